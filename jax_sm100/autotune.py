"""jax_sm100.autotune: measure the user's shapes on the user's GPU and cache the fastest
path for each, kernel tiling or XLA's own dot.

    import jax_sm100, jax.numpy as jnp
    table = jax_sm100.autotune([(4096, 4096, 4096), (16, 7168, 4096)],
                               dtypes=(jnp.bfloat16,), ops=("matmul", "matmul_residual"))

For each (op, dtype, shape) every tiling the device's GEMM kernel is compiled for and
the op's XLA path are timed in one process, on distinct input sets, alternating call by
call, median of `repeats` (jax_sm100.bench.time_runs). The fastest wins. The results go
to a JSON cache (default ~/.cache/jax_sm100/autotune-<GPU kind>.json; entries of other
shapes, GPU kinds and versions already there are kept), keyed by op, dtype, the exact
(M, N, K, batch) of the product, the jax_sm100 version and the GPU kind. The ops read it
when they are traced: an exact hit wins over the shipped dispatch table's class entry
(see jax_sm100._dispatch_table). tuning.override(autotune_cache=path | False) points
the ops at another file or turns the cache off.

The (M, N, K, batch) of a product is the GEMM the op runs: matmul(a (..., M, K), b (K, N))
folds a's leading dims into M (batch 1); with b batched, batch is the output's batch
count. The gradient products of a training step are GEMMs of their own shapes (dA:
M x K x N, dB: K x N x M); autotune them too where they matter.

ops=("fp8",) measures the FP8 blockwise GEMM (fp8_blockwise_matmul, and fp8_dot's three
products for x (M, K) @ w (K, N): y M x N x K, dx M x K x N, dw K x N x M, as the
kernel sees them: N padded to 8, K to 16): every form of the device's FP8 kernel, the
heuristic's choice among them (there is no XLA blockwise FP8 GEMM); the fastest form
is cached under op "fp8_gemm" (jax_sm100._dispatch_fp8 reads it).
"""
from __future__ import annotations

import datetime
import json
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _backend, _dispatch_fp8, _dispatch_table, tuning

__all__ = ["autotune"]

_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))
# "fp8": the FP8 blockwise GEMM's launches (fp8_blockwise_matmul, fp8_dot's products):
# every form of the device's FP8 kernel against the heuristic's choice (no XLA path).
_OPS = _dispatch_table.OPS + ("fp8",)


def _shape(s) -> tuple:
  try:
    vals = tuple(int(v) for v in s)
  except (TypeError, ValueError):
    vals = ()
  if len(vals) not in (3, 4) or not all(v > 0 for v in vals) or any(
      isinstance(v, bool) for v in s):
    raise ValueError(f"jax_sm100.autotune: a shape is (M, N, K) or (M, N, K, batch) of "
                     f"positive ints; got {s!r}.")
  return vals if len(vals) == 4 else vals + (1,)


def _check(shapes, dtypes, ops):
  shapes = [_shape(s) for s in shapes]
  dts = []
  for d in dtypes:
    try:
      dt = np.dtype(d)
    except TypeError:
      dt = None
    if dt not in _DTYPES:
      raise ValueError(f"jax_sm100.autotune: dtypes are bfloat16 / float16; got {d!r}.")
    dts.append(dt)
  for op in ops:
    if op not in _OPS:
      raise ValueError(f"jax_sm100.autotune: ops are {', '.join(_OPS)}; got {op!r}.")
  if not shapes:
    raise ValueError("jax_sm100.autotune: no shapes given.")
  if "fp8" in ops and any(s[3] != 1 for s in shapes):
    raise ValueError("jax_sm100.autotune: the FP8 GEMM is 2-D (fp8_blockwise_matmul, "
                     "fp8_dot): its shapes are (M, N, K) or (M, N, K, 1).")
  return shapes, dts, tuple(ops)


def _bench():
  # Imported on use: `python -m jax_sm100.bench` must find it not yet imported.
  from jax_sm100 import bench
  return bench


def _op_and_sets(op, dtype, m, n, k, batch):
  """(fn of one input set, input sets) for one product."""
  import jax_sm100
  bench = _bench()
  lead = (batch,) if batch > 1 else ()

  def make(key):
    k1, k2, k3 = jax.random.split(key, 3)
    a = bench._normal(k1, lead + (m, k), dtype)
    b = bench._normal(k2, lead + (k, n), dtype)
    if op == "matmul":
      return a, b
    if op == "matmul_bias":
      return a, b, bench._normal(k3, (n,), dtype)
    return a, b, bench._normal(k3, lead + (m, n), dtype)
  fn = {"matmul": jax_sm100.matmul,
        "matmul_residual": lambda a, b, c: jax_sm100.matmul_residual(a, b, c),
        "matmul_bias": lambda a, b, bias: jax_sm100.matmul_bias(
            a, b, bias, activation=_dispatch_table.BIAS_ACTIVATION)}[op]
  sets = bench.input_sets(m * batch, n, k, make)
  return fn, sets


def _fp8_entry(m, n, k, dev, kind, version, repeats):
  """One FP8 cache entry: fp8_blockwise_matmul on pre-quantized inputs (1x128 a scales,
  128x128 b scales, the layouts fp8_dot's quantizers write) under each form of the
  device's FP8 kernel and under the heuristic's choice; the fastest form wins."""
  import jax_sm100
  bench = _bench()
  q1 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)))
  q128 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(128, 128)))

  def make(key):
    x = bench._normal(key, (m, k), jnp.bfloat16)
    w = bench._normal(jax.random.fold_in(key, 1), (n, k), jnp.bfloat16)
    return (*q1(x), *q128(w))
  sets = bench.input_sets(m, n, k, make, itemsize=1)
  fn = jax_sm100.fp8_blockwise_matmul
  arch = tuning._table(dev, "fp8")[0]
  forms = tuning.ARCH_FP8_TILINGS.get(arch, tuning.FP8_TILINGS)
  default = tuning.fp8_config(m, n, k, device=dev)
  heuristic = _dispatch_fp8.form_name(
      (default.block_m, default.block_n, default.cluster, default.pair_along_n))
  names = [_dispatch_fp8.form_name(f) for f in forms]  # the heuristic's is one of them
  runs = [_compiled(fn, sets, autotune_cache=False,
                    fp8=tuning.Fp8Config(*f, group_m=default.group_m)) for f in forms]
  times = dict(zip(names, bench.time_runs(runs, sets, repeats)))
  best = min(names, key=lambda c: times[c])
  del sets, runs
  return {"op": _dispatch_fp8.OP, "dtype": _dispatch_fp8.DTYPE, "shape": [m, n, k, 1],
          "path": "kernel", "form": list(_dispatch_fp8.parse_form(best)),
          "heuristic": heuristic,
          "speedup": round(times[heuristic] / times[best], 4),
          "times_us": {c: round(t * 1e6, 3) for c, t in times.items()},
          "gpu_kind": kind, "device_kind": str(getattr(dev, "device_kind", "")),
          "jax_sm100_version": version, "jax_version": jax.__version__,
          "repeats": int(repeats),
          "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _compiled(fn, sets, **settings):
  """over_sets(fn) traced and compiled under tuning.override(**settings)."""
  with tuning.override(**settings):
    return _bench().over_sets(fn).lower(sets).compile()


def _merge(path, entries):
  """Writes `entries` into the cache at `path` (same key, kind and version replaced)."""
  data = _dispatch_table.read_cache(path) if os.path.exists(path) else {}
  keep = []
  new_keys = {(e["op"], e["dtype"], tuple(e["shape"]), e["gpu_kind"], e["jax_sm100_version"])
              for e in entries}
  for e in data.get("entries", []):
    try:
      k = (e["op"], e["dtype"], tuple(e["shape"]), e["gpu_kind"], e["jax_sm100_version"])
    except (KeyError, TypeError):
      continue
    if k not in new_keys:
      keep.append(e)
  table = {"format": _dispatch_table.FORMAT,
           "about": "jax_sm100.autotune measurements (times in microseconds per call, wall "
                    "time of one jit over distinct input sets, median)",
           "entries": keep + list(entries)}
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
  with os.fdopen(fd, "w") as f:
    json.dump(table, f, indent=1)
  os.replace(tmp, path)
  return table


def autotune(shapes, *, dtypes=(jnp.bfloat16,), ops=("matmul",), path=None, repeats=5,
             log=None) -> dict:
  """Times every compiled tiling of ours and XLA's dot for each shape on the default
  GPU, writes the fastest path per (op, dtype, shape) to a JSON cache the ops read at
  trace time, and returns the cache's contents (its "entries": one per measured
  product, with "path" 'kernel' or 'xla', the best "tiling" of ours, "speedup" of the
  winner over the other path, and every "times_us").

  shapes: (M, N, K) or (M, N, K, batch) per product; dtypes: bfloat16 and/or float16;
  ops: any of "matmul", "matmul_residual", "matmul_bias" (measured with
  activation _dispatch_table.BIAS_ACTIVATION), "fp8" (the FP8 GEMM's forms, batch 1,
  dtypes not used: its entries hold the best "form" and "speedup" over the
  heuristic's choice); path: the cache file (default
  ~/.cache/jax_sm100/autotune-<GPU kind>.json); repeats: timed calls per candidate;
  log: a function taking a line of progress (e.g. print), or None.

  Raises RuntimeError where the kernels do not run (no GPU, or jax_sm100.backend() is
  not 'sm90' / 'sm100'): there is nothing to measure. Functions already traced by
  jax.jit keep their dispatch; trace again to use the new cache.
  """
  shapes, dts, ops = _check(shapes, dtypes, ops)
  name = _backend.backend()
  if name not in ("sm90", "sm100"):
    why = _backend.why_reference() if name == "reference" else f"backend() is {name!r}"
    raise RuntimeError(f"jax_sm100.autotune measures the GEMM kernels on a GPU that runs them; "
                       f"here backend() is {name!r} ({why}), so there is nothing to time.")
  dev = _backend._default_device()
  kind = _dispatch_table.gpu_kind(dev)
  path = os.fspath(path) if path is not None else _dispatch_table.default_cache_path(kind)
  version = _dispatch_table._version()
  tilings = tuning.gemm_candidates(dev)
  say = log or (lambda _line: None)
  entries = []
  for op in ops:
    if op == "fp8":
      for m, n, k, _ in shapes:
        entries.append(_fp8_entry(m, n, k, dev, kind, version, repeats))
        e = entries[-1]
        say(f"fp8 {m}x{n}x{k}: {_dispatch_fp8.form_name(e['form'])} "
            f"{e['times_us'][_dispatch_fp8.form_name(e['form'])]:.1f} us, the heuristic's "
            f"{e['heuristic']} {e['times_us'][e['heuristic']]:.1f} us")
      continue
    for dt in dts:
      for m, n, k, batch in shapes:
        fn, sets = _op_and_sets(op, dt, m, n, k, batch)
        names = ["xla"] + [_dispatch_table.tiling_name(t) for t in tilings]
        runs = [_compiled(fn, sets, dispatch="xla", autotune_cache=False)]
        runs += [_compiled(fn, sets, autotune_cache=False,
                           gemm=tuning.candidate_config(t, m, n, k, batch, device=dev))
                 for t in tilings]
        times = dict(zip(names, _bench().time_runs(runs, sets, repeats)))
        best = min(names[1:], key=lambda c: times[c])
        xla_wins = times["xla"] < times[best]
        speedup = times[best] / times["xla"] if xla_wins else times["xla"] / times[best]
        entries.append({
            "op": op, "dtype": dt.name, "shape": [m, n, k, batch],
            "path": "xla" if xla_wins else "kernel",
            "tiling": list(_dispatch_table.parse_tiling(best)),
            "speedup": round(speedup, 4),
            "times_us": {c: round(t * 1e6, 3) for c, t in times.items()},
            "gpu_kind": kind, "device_kind": str(getattr(dev, "device_kind", "")),
            "jax_sm100_version": version, "jax_version": jax.__version__,
            "sets": len(sets), "repeats": int(repeats),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        })
        say(f"{op} {dt.name} {m}x{n}x{k}" + (f" batch {batch}" if batch > 1 else "")
            + f": {entries[-1]['path']} ({best} {times[best] * 1e6:.1f} us, "
              f"xla {times['xla'] * 1e6:.1f} us)")
        del sets, runs
  return _merge(path, entries)
