"""Timing and data helpers shared by the benchmarks (outside the wheel).

Only jax_sm100's public API is used here, so the same helpers time any build of
the package (benchmarks/ab.py runs them against two builds).

  time_jax / gpu_time_jax     wall time (differential jit) / GPU time (CUPTI kernel
                              durations through torch.profiler) of a JAX op
  gpu_time_jax_per_call       GPU time with one jitted call per input set (no cross-set
                              fusion by XLA)
  copy_bandwidth              a device copy's bytes/s (XLA's negation of 1 GiB)
  time_torch / gpu_time_torch the same for a torch op
  quantized_sets              FP8 operands (a, a_scale, b, b_scale), quantized on device
  torch_and_blockwise         torch and cuBLASLt's blockwise FP8 GEMM, checked
  parse_fp8_config            "256,128,2,n" -> jax_sm100.tuning.Fp8Config
"""
from __future__ import annotations

import collections
import json
import math
import os
import statistics
import subprocess
import sys
import time

# torch and JAX share the GPU: keep XLA from grabbing most of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

E4M3 = jnp.float8_e4m3fn


def cdiv(a, b):
  return -(-a // b)


def geomean(xs):
  xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
  return float(math.exp(sum(math.log(x) for x in xs) / len(xs))) if xs else float("nan")


def git_commit():
  """JAX_SM100_GIT_COMMIT (device copies have no .git), else the checkout's HEAD."""
  env = os.environ.get("JAX_SM100_GIT_COMMIT")
  if env:
    return env
  try:
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=here,
                                   stderr=subprocess.DEVNULL).decode().strip()
  except Exception:  # noqa: BLE001
    return "unknown"


def time_jax(fn, sets, reps):
  """Seconds per call of fn(*set): each measurement is one jit over several distinct
  input sets (median over reps); the per-call time is the DIFFERENCE between all sets
  and the first two, divided by the extra sets, so the host's dispatch and sync latency
  (tens of microseconds, large next to a 100-microsecond op) cancels out."""
  def measure(ss):
    many = jax.jit(lambda ss: [fn(*s) for s in ss])
    jax.block_until_ready(many(ss))
    times = []
    for _ in range(reps):
      t0 = time.perf_counter()
      jax.block_until_ready(many(ss))
      times.append(time.perf_counter() - t0)
    return statistics.median(times)
  if len(sets) >= 4:
    return max((measure(sets) - measure(sets[:2])) / (len(sets) - 2), 1e-9)
  return measure(sets) / len(sets)


def n_sets_for(m, n, k):
  """Enough distinct input sets that the timed work dwarfs dispatch jitter."""
  return 8 if 2.0 * m * n * k > 5e10 else 32


def time_torch(torch, fn, sets, reps):
  """Seconds per call with CUDA events, rotating over the sets, median over reps."""
  for s in sets:
    fn(*s)
  torch.cuda.synchronize()
  times = []
  for _ in range(reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for s in sets:
      fn(*s)
    end.record()
    end.synchronize()
    times.append(start.elapsed_time(end) * 1e-3 / len(sets))
  return statistics.median(times)


def cupti_gpu_events(torch, run_all, reps):
  """Every kernel and device memcpy/memset (chrome-trace events: cat, name, dur in us)
  that `reps` calls of run_all() put on the GPU, recorded by CUPTI through
  torch.profiler. CUPTI sees every kernel of the process, whoever launched it (XLA, our
  FFI handlers, cuBLASLt)."""
  import tempfile
  from torch.profiler import ProfilerActivity, profile
  run_all()  # compile / warm up outside the window
  torch.cuda.synchronize()
  with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(reps):
      run_all()
    torch.cuda.synchronize()
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as fh:
      events = json.load(fh)["traceEvents"]
  return [e for e in events
          if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]


def _cupti_total_us(torch, run_all, reps):
  """Summed duration (us) of cupti_gpu_events."""
  return sum(float(e["dur"]) for e in cupti_gpu_events(torch, run_all, reps))


def kernel_table(torch, fn, sets, reps=3, hlo_path=""):
  """GPU us per call of fn(*set) by kernel name (top 25), from the program of one call over
  one set; with hlo_path, that program's optimized HLO is written there (XLA's kernels
  carry its fusions' names, so each row can be traced to the ops it fuses)."""
  one = jax.jit(lambda ss: [fn(*s) for s in ss])
  if hlo_path:
    with open(hlo_path, "w") as f:
      f.write(one.lower(sets[:1]).compile().as_text())
  events = cupti_gpu_events(torch, lambda: jax.block_until_ready(one(sets[:1])), reps)
  per = collections.Counter()
  for e in events:
    per[e["name"][:200]] += e["dur"] / reps
  return dict(per.most_common(25))


def normal_sets(seed, n_sets, specs):
  """n_sets distinct input sets: each a tuple of standard-normal arrays, one per
  (shape, dtype, scale) of `specs` (drawn in float32, scaled, then cast), from
  PRNGKey(seed)."""
  key = jax.random.PRNGKey(seed)
  sets = []
  for _ in range(n_sets):
    key, *keys = jax.random.split(key, len(specs) + 1)
    sets.append(tuple((jax.random.normal(kk, shape, jnp.float32) * scale).astype(dtype)
                      for kk, (shape, dtype, scale) in zip(keys, specs)))
  return sets


def require_torch(tool):
  """torch with CUDA (for CUPTI GPU time and the torch baselines), or exit naming `tool`."""
  torch, why = _torch()
  if torch is None:
    sys.exit(f"{tool}: needs torch with CUDA ({why})")
  return torch


def gpu_time_jax(torch, fn, sets, reps=3):
  """GPU seconds per call of fn(*set) (one jit over all sets, as time_jax), from the
  kernels' own durations: host-side gaps between the ops do not count."""
  many = jax.jit(lambda ss: [fn(*s) for s in ss])
  us = _cupti_total_us(torch, lambda: jax.block_until_ready(many(sets)), reps)
  return us * 1e-6 / (reps * len(sets))


def gpu_time_jax_per_call(torch, fn, sets, reps=3):
  """gpu_time_jax with one jitted call per set instead of one jit over all sets, so that
  XLA cannot fuse small ops on different sets into one kernel."""
  f = jax.jit(fn)
  run_all = lambda: jax.block_until_ready([f(*s) for s in sets])  # noqa: E731
  us = _cupti_total_us(torch, run_all, reps)
  return us * 1e-6 / (reps * len(sets))


def copy_bandwidth(torch, nbytes=1 << 30):
  """(bytes/s, seconds) of a device copy: XLA's negation of a `nbytes` bf16 buffer (read
  and written), by GPU time, two buffers alternating."""
  import jax.numpy as jnp
  x = [jnp.ones((nbytes // 2,), jnp.bfloat16) for _ in range(2)]
  t = gpu_time_jax(torch, lambda v: -v, [(v,) for v in x], reps=5)
  return 2 * nbytes / t, t


def gpu_time_torch(torch, fn, sets, reps=3):
  """GPU seconds per call of a torch op, from the kernels' own durations."""
  us = _cupti_total_us(torch, lambda: [fn(*s) for s in sets], reps)
  return us * 1e-6 / (reps * len(sets))


def quantized_sets(m, n, k, n_sets, seed=0):
  """n_sets of (a, a_scale, b, b_scale) from random normal data, quantized on device by
  jax_sm100.quantize_fp8_blockwise (a: 1x128 blocks, b (N, K): 128x128 blocks)."""
  import jax_sm100
  q1 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)))
  q128 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(128, 128)))
  key = jax.random.PRNGKey(seed)
  sets = []
  for _ in range(n_sets):
    key, k1, k2 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (m, k), jnp.bfloat16)
    w = jax.random.normal(k2, (n, k), jnp.bfloat16)
    a, sa = q1(x)
    b, sb = q128(w)
    sets.append((a, sa, b, sb))
  jax.block_until_ready(sets)
  return sets


def fp8_transposed(sets):
  """`sets` with a's scales transposed, (ceil(K/128), M), and the op that reads them
  so: fp8_blockwise_matmul(..., a_scale_transposed=True), the kernel with no XLA op
  before it (M % 4 == 0)."""
  import jax_sm100
  op = lambda a, st, b, sb: jax_sm100.fp8_blockwise_matmul(  # noqa: E731
      a, st, b, sb, a_scale_transposed=True)
  return op, [(a, sa.T, b, sb) for (a, sa, b, sb) in sets]


def calc_diff(x, y):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def parse_fp8_config(spec):
  """"BLOCK_M,BLOCK_N,CLUSTER[,n][,gGROUP_M]" (n: the pair lies along N) -> Fp8Config;
  "" or "default" -> None (the default choice)."""
  from jax_sm100.tuning import Fp8Config
  if spec in ("", "default", None):
    return None
  parts = spec.split(",")
  bm, bn, cl = (int(v) for v in parts[:3])
  along_n = "n" in parts[3:]
  group = [int(p[1:]) for p in parts[3:] if p.startswith("g")]
  return Fp8Config(bm, bn, cl, along_n, *(group[:1] or [8]))


# ---------------------------------------------------------------------------
# torch / cuBLASLt
# ---------------------------------------------------------------------------

def _torch():
  try:
    import torch
    if not torch.cuda.is_available():
      return None, "torch has no CUDA device"
    return torch, ""
  except Exception as e:  # noqa: BLE001
    return None, f"torch unavailable ({type(e).__name__}: {e})"


def _to_torch(torch, x):
  """JAX device array -> torch CUDA tensor (through host memory; setup only)."""
  arr = np.asarray(x)
  if arr.dtype == np.dtype(E4M3):
    return torch.from_numpy(arr.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
  return torch.from_numpy(np.ascontiguousarray(arr)).cuda()


def torch_blockwise_candidates(torch):
  """Ways to ask cuBLASLt for 1x128 x 128x128 FP8; each is checked numerically."""
  cands = []
  F = getattr(torch.nn.functional, "scaled_mm", None)
  ST = getattr(torch.nn.functional, "ScalingType", None)
  if ST is None:
    try:
      from torch.nn.functional import ScalingType as ST  # noqa: N813
    except Exception:  # noqa: BLE001
      ST = None
  if F is not None and ST is not None:
    r1 = getattr(ST, "BlockWise1x128", None) or getattr(ST, "Blockwise_1x128", None)
    r128 = getattr(ST, "BlockWise128x128", None) or getattr(ST, "Blockwise_128x128", None)
    if r1 is not None and r128 is not None:
      for name, sb_fn in (("scale_b (N/128, K/128)", lambda sb: sb),
                          ("scale_b (K/128, N/128) view", lambda sb: sb.t()),
                          ("scale_b (K/128, N/128) contiguous", lambda sb: sb.t().contiguous())):
        def make(sb_fn=sb_fn):
          def call(a, sa_cm, bt, sb):
            return F(a, bt, sa_cm, r1, sb_fn(sb), r128, output_dtype=torch.bfloat16)
          return call
        cands.append((f"torch.nn.functional.scaled_mm(..., {r1}, {r128}), {name}", make()))
  for name, sb_fn in (("scale_b (N/128, K/128)", lambda sb: sb),
                      ("scale_b (K/128, N/128) view", lambda sb: sb.t()),
                      ("scale_b (K/128, N/128) contiguous", lambda sb: sb.t().contiguous())):
    def make(sb_fn=sb_fn):
      def call(a, sa_cm, bt, sb):
        return torch._scaled_mm(a, bt, sa_cm, sb_fn(sb), out_dtype=torch.bfloat16)
      return call
    cands.append((f"torch._scaled_mm blockwise, {name}", make()))
  return cands


def torch_sets(torch, sets):
  """`sets` of (a, a_scale, b, b_scale) as torch's blockwise scaled_mm takes them: a_scale
  (M, K/128) with strides (1, M), b transposed (a view)."""
  return [(_to_torch(torch, a), _to_torch(torch, sa).t().contiguous().t(), _to_torch(torch, b).t(),
           _to_torch(torch, sb)) for (a, sa, b, sb) in sets]


def torch_and_blockwise():
  """(torch, cuBLASLt's blockwise FP8 GEMM as a function of a torch_sets entry) for the
  device scripts; exits with the reason when torch, its CUDA device or a working
  blockwise scaled_mm is missing."""
  torch, why = _torch()
  if torch is None:
    raise SystemExit(f"needs torch: {why}")
  _, blk = pick_torch_blockwise(torch, lambda *_: None)
  if blk is None:
    raise SystemExit("no torch blockwise scaled_mm candidate matched the float64 reference")
  return torch, blk


def pick_torch_blockwise(torch, log):
  """First candidate that runs and matches the float64 reference on a small problem."""
  m, n, k = 256, 384, 512
  (a, sa, b, sb), = quantized_sets(m, n, k, 1, seed=7)
  ref = (np.asarray(a).astype(np.float64) * np.repeat(np.asarray(sa, np.float64), 128, 1)) @ \
        (np.asarray(b).astype(np.float64) *
         np.repeat(np.repeat(np.asarray(sb, np.float64), 128, 0), 128, 1)).T
  ta, tb = _to_torch(torch, a), _to_torch(torch, b)
  tsa = _to_torch(torch, sa).t().contiguous().t()  # (M, K/128), strides (1, M)
  tsb = _to_torch(torch, sb)
  for name, fn in torch_blockwise_candidates(torch):
    try:
      out = fn(ta, tsa, tb.t(), tsb)
      torch.cuda.synchronize()
      d = calc_diff(out.float().cpu().numpy(), ref)
      log(f"  torch blockwise candidate: {name}: calc_diff {d:.2e}")
      if d < 1e-3:
        return name, fn
    except Exception as e:  # noqa: BLE001
      log(f"  torch blockwise candidate: {name}: {type(e).__name__}: {str(e)[:160]}")
  return None, None


def bar_chart(path, labels, series, *, ylabel, title, hline=None, rotation=20, dpi=120,
              inches_per_label=1.6):
  """Grouped bars, one group per label and one bar per entry of `series` ({name: values},
  missing values drawn as 0), written to `path` as PNG. False when matplotlib is missing."""
  try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
  except Exception:  # noqa: BLE001
    return False
  x = np.arange(len(labels))
  w = 0.8 / max(len(series), 1)
  fig, ax = plt.subplots(figsize=(max(8, inches_per_label * len(labels)), 4.5))
  for i, (name, values) in enumerate(series.items()):
    ax.bar(x + i * w, [0 if v is None else v for v in values], w, label=name)
  if hline is not None:
    ax.axhline(hline, color="k", lw=0.8)
  ax.set_xticks(x + w * (len(series) - 1) / 2)
  ax.set_xticklabels(labels, rotation=rotation, fontsize=7 if rotation > 45 else 8)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  return True
