"""Benchmark of the grouped (mixture-of-experts) GEMMs against XLA and torch.

    python benchmarks/bench_grouped.py --out DIR [--quick] [--only bf16,fp8,step]

Side by side in one process on one GPU, for G in {8, 32, 128} experts, token counts
uniform or skewed (power-law, a quarter of the experts empty), expert shapes (K, N) in
{(7168, 2048), (2048, 7168), (4096, 14336)} (DeepSeek / Mixtral-like):

  bf16   out (M, N) = x (M, K) grouped @ w (G, K, N):
           ours      jax_sm100.ragged_dot
           xla       jax.lax.ragged_dot (XLA's grouped dot)
           torch     torch._grouped_mm(x, w, offs) where the device's torch has it
           ours_BMxBN  with --tiles BMxBN,...: ours forced onto that tiling
                     (tuning.override(grouped=...)); --no-xla skips the xla column
  fp8    the same product from FP8 operands (x 1x128, w 128x128 per expert), at
         --fp8-tokens-per-expert tokens per expert:
           ours      jax_sm100.fp8_grouped_matmul (a's scales given transposed: the layout
                     the kernel reads)
           dense     our dense jax_sm100.fp8_blockwise_matmul at equal FLOPs (M x N x K
                     with the same M): grouped efficiency = dense time / grouped time
           torch     torch._scaled_grouped_mm where present: per-row / per-column scales,
                     not blockwise (a different, cheaper scaling: for reference only)
  step   a training step of one grouped layer (y, dx, dw): jax_sm100.ragged_dot's and
         fp8_ragged_dot's custom_vjp against jax.lax.ragged_dot's bf16 step.

Timing: wall time per call of one jit over several distinct input sets (the difference
between all sets and the first two, so dispatch cancels; benchmarks/common.time_jax),
and, with torch installed, GPU time (the kernels' own durations from CUPTI) for every
column. Every row is checked first (relative error against XLA's bf16 product, or
calc_diff against the dequantized product for FP8), so a broken kernel is never timed.
Ratios are xla/ours (> 1: ours faster); the issue's targets are printed with the
geometric means. Inputs are random, never zeros. Writes DIR/bench_grouped.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _torch, calc_diff, geomean, git_commit, gpu_time_jax, gpu_time_torch, \
    time_jax, time_torch  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import tuning  # noqa: E402
from jax_sm100.tuning import GroupedConfig  # noqa: E402


class _Skipped(Exception):
  """A column left out by a flag."""

EXPERTS = (8, 32, 128)
SHAPES = ((7168, 2048), (2048, 7168), (4096, 14336))  # (K, N) per expert
PATTERNS = ("uniform", "skewed")
BF16 = jnp.bfloat16
SET_BYTES = 2 << 30  # distinct input sets share the weights above this size


def group_sizes(pattern, g, m, seed=0):
  """uniform: equal; skewed: power-law sizes, a quarter of the experts empty; sum = m."""
  if pattern == "uniform":
    s = np.full(g, m // g)
  else:
    rng = np.random.default_rng(seed + g)
    p = rng.pareto(1.0, g) + 1e-3
    p[rng.permutation(g)[:g // 4]] = 0
    s = np.floor(p / p.sum() * m).astype(np.int64)
  s[np.argmax(s)] += m - s.sum()
  return s.astype(np.int32)


def _normal(key, shape, dtype=BF16, scale=1.0):
  return (scale * jax.random.normal(key, shape, jnp.float32)).astype(dtype)


def bf16_sets(m, k, n, g, n_sets):
  """n_sets of (x, w) with fresh x; w fresh too unless it is large (then shared)."""
  key = jax.random.key(m + 7 * k + 31 * n + g)
  w_shared = _normal(jax.random.fold_in(key, 99), (g, k, n), scale=k ** -0.5) \
      if 2 * g * k * n > SET_BYTES else None
  sets = []
  for i in range(n_sets):
    k1, k2 = jax.random.split(jax.random.fold_in(key, i))
    w = w_shared if w_shared is not None else _normal(k2, (g, k, n), scale=k ** -0.5)
    sets.append((_normal(k1, (m, k)), w))
  return jax.block_until_ready(sets)


def _once(cache, key, make):
  """make() the first time `key` is seen, then that value (one copy per shared array)."""
  if key not in cache:
    cache[key] = make()
  return cache[key]


def rel_err(got, ref):
  got, ref = (np.asarray(jnp.asarray(v).astype(jnp.float32), np.float64) for v in (got, ref))
  return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def _time(torch, fn, sets, reps, gpu):
  wall = time_jax(fn, sets, reps)
  return wall, (gpu_time_jax(torch, fn, sets) if gpu else None)


def _torch_grouped(torch, log):
  """torch._grouped_mm as f(x, w, offs), or None with a note."""
  if torch is None or not hasattr(torch, "_grouped_mm"):
    log("  torch._grouped_mm: not in this torch; column skipped")
    return None
  return lambda x, w, offs: torch._grouped_mm(x, w, offs=offs)


def _torch_weights(torch, tg, x, w, offs, ref):
  """w as torch._grouped_mm takes it: as it is (G, K, N) row-major, else column-major;
  the first layout whose product matches `ref`, or None."""
  for wt in (w, w.transpose(-2, -1).contiguous().transpose(-2, -1)):
    try:
      if rel_err(tg(x, wt, offs).float().cpu().numpy(), ref) < 2e-2:
        return wt is not w
    except Exception:  # noqa: BLE001
      continue
  return None


def _to_torch(torch, x):
  arr = np.asarray(x)
  if arr.dtype == np.dtype(jnp.float8_e4m3fn):
    return torch.from_numpy(arr.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
  if arr.dtype == np.dtype(BF16):
    return torch.from_numpy(arr.view(np.uint16)).cuda().view(torch.bfloat16)
  return torch.from_numpy(np.ascontiguousarray(arr)).cuda()


def bench_bf16(args, torch, log):
  rows = []
  tg = _torch_grouped(torch, log)
  for g in args.experts:
    for k, n in args.shapes:
      for pattern in PATTERNS:
        m = args.tokens
        sizes = group_sizes(pattern, g, m)
        gs = jnp.asarray(sizes)
        try:
          sets = bf16_sets(m, k, n, g, args.sets)
        except jax.errors.JaxRuntimeError as e:  # (G, K, N) weights past the device memory
          log(f"  bf16 G={g} {k}x{n} {pattern}: inputs do not fit: {str(e)[:120]}")
          rows.append(dict(column="bf16", experts=g, k=k, n=n, m=m, pattern=pattern,
                           note=f"inputs do not fit: {str(e)[:160]}"))
          continue
        ours = lambda x, w: jax_sm100.ragged_dot(x, w, gs)
        xla = lambda x, w: jax.lax.ragged_dot(x, w, gs)
        err = rel_err(jax.jit(ours)(*sets[0]), jax.jit(xla)(*sets[0]))
        row = dict(column="bf16", experts=g, k=k, n=n, m=m, pattern=pattern, err=err,
                   flops=2.0 * m * k * n)
        if err > 2e-2:
          log(f"  bf16 G={g} {k}x{n} {pattern}: ours differs from XLA ({err:.3g}); not timed")
          rows.append(row)
          continue
        row["ours_s"], row["ours_gpu_s"] = _time(torch, ours, sets, args.reps, torch is not None)
        for bm, bn in args.tiles:
          def forced(x, w, cfg=GroupedConfig(bm, bn)):
            with tuning.override(grouped=cfg):
              return jax_sm100.ragged_dot(x, w, gs)
          row[f"ours_{bm}x{bn}_s"], row[f"ours_{bm}x{bn}_gpu_s"] = _time(
              torch, forced, sets, args.reps, torch is not None)
        try:
          if args.no_xla:
            raise _Skipped
          row["xla_s"], row["xla_gpu_s"] = _time(torch, xla, sets, args.reps, torch is not None)
        except _Skipped:
          pass
        except jax.errors.JaxRuntimeError as e:  # XLA's lowering holds (G, M, N)-sized temps
          row["xla_note"] = f"{len(sets)} sets in one jit: {str(e)[:120]}; timed on 2 sets"
          log(f"  bf16 G={g} {k}x{n} {pattern}: XLA {row['xla_note']}")
          try:
            row["xla_s"], row["xla_gpu_s"] = _time(torch, xla, sets[:2], args.reps,
                                                   torch is not None)
          except jax.errors.JaxRuntimeError as e2:
            row["xla_note"] = f"XLA's ragged_dot does not run here: {str(e2)[:160]}"
            log(f"  bf16 G={g} {k}x{n} {pattern}: {row['xla_note']}")
        if tg is not None:
          try:
            offs = torch.from_numpy(np.cumsum(sizes).astype(np.int32)).cuda()
            # One torch copy per distinct w (large weights are shared by the sets).
            tw = {}
            tsets = [(_to_torch(torch, x), _once(tw, id(w), lambda w=w: _to_torch(torch, w)))
                     for x, w in sets]
            col_major = _torch_weights(torch, tg, *tsets[0], offs, jax.jit(xla)(*sets[0]))
            if col_major is None:
              row["torch_note"] = "torch._grouped_mm did not match XLA's product"
            else:
              if col_major:
                cm = {}
                tsets = [(x, _once(cm, id(w), lambda w=w: w.transpose(-2, -1).contiguous()
                                   .transpose(-2, -1))) for x, w in tsets]
              row["torch_s"] = time_torch(torch, lambda x, w: tg(x, w, offs), tsets, args.reps)
              row["torch_gpu_s"] = gpu_time_torch(torch, lambda x, w: tg(x, w, offs), tsets)
          except Exception as e:  # noqa: BLE001
            row["torch_note"] = f"{type(e).__name__}: {e}"[:200]
        rows.append(row)
        _log_row(row, log)
        del sets
  return rows


def fp8_sets(m, k, n, g, n_sets):
  """(a, a_scale_t, b (G, N, K), b_scale) per set, quantized on device, plus the dense
  operands of the same FLOPs: b0 (N, K), its scale (our dense FP8 GEMM)."""
  q1 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, scale_transposed=True))
  qw = jax.jit(jax.vmap(lambda w: jax_sm100.quantize_fp8_blockwise(w, block=(128, 128))))
  key = jax.random.key(m + 3 * k + 5 * n + g)
  shared = g * k * n > SET_BYTES
  w0 = qw(_normal(jax.random.fold_in(key, 99), (g, n, k))) if shared else None
  sets = []
  for i in range(n_sets):
    k1, k2 = jax.random.split(jax.random.fold_in(key, i))
    a, st = q1(_normal(k1, (m, k)))
    b, sb = w0 if shared else qw(_normal(k2, (g, n, k)))
    sets.append((a, st, b, sb))
  return jax.block_until_ready(sets)


def fp8_check(got, a, st, b, sb, sizes):
  """calc_diff of got against the dequantized product (fp32, on the device) at the first,
  middle and last rows of up to 8 experts (one expert's dequantized weight at a time)."""
  k, n = a.shape[1], b.shape[1]
  ends = np.cumsum(sizes)
  starts = ends - sizes
  experts = [e for e in np.random.default_rng(0).permutation(len(sizes)) if sizes[e]][:8]
  refs, outs = [], []
  for e in experts:
    rows = np.unique([starts[e], (starts[e] + ends[e]) // 2, ends[e] - 1])
    a_deq = a[rows].astype(jnp.float32) * jnp.repeat(st.T[rows], 128, axis=1)[:, :k]
    b_deq = b[e].astype(jnp.float32) * jnp.repeat(jnp.repeat(sb[e], 128, 0), 128, 1)[:n, :k]
    refs.append(np.asarray(jnp.dot(a_deq, b_deq.T, precision=jax.lax.Precision.HIGHEST)))
    outs.append(np.asarray(got[rows].astype(jnp.float32)))
  return calc_diff(np.concatenate(outs), np.concatenate(refs))


def _torch_scaled_grouped(torch, log):
  if torch is None or not hasattr(torch, "_scaled_grouped_mm"):
    log("  torch._scaled_grouped_mm: not in this torch; column skipped")
    return None

  def f(a, sa_row, bt, sb_col, offs):  # a (M, K), bt (G, K, N) column-major
    return torch._scaled_grouped_mm(a, bt, sa_row, sb_col, offs=offs, out_dtype=torch.bfloat16)
  return f


def bench_fp8(args, torch, log):
  rows = []
  tsg = _torch_scaled_grouped(torch, log)
  for g in args.experts:
    for k, n in args.shapes:
      for pattern in PATTERNS:
        m = min(g * args.fp8_tokens_per_expert, args.fp8_max_tokens)
        sizes = group_sizes(pattern, g, m)
        gs = jnp.asarray(sizes)
        sets = fp8_sets(m, k, n, g, args.sets)
        ours = lambda a, st, b, sb: jax_sm100.fp8_grouped_matmul(a, st, b, sb, gs,
                                                                 a_scale_transposed=True)
        dense = lambda a, st, b, sb: jax_sm100.fp8_blockwise_matmul(a, st, b[0], sb[0],
                                                                    a_scale_transposed=True)
        got = jax.jit(ours)(*sets[0])
        diff = fp8_check(got, *sets[0], sizes)
        row = dict(column="fp8", experts=g, k=k, n=n, m=m, pattern=pattern, calc_diff=diff,
                   tokens_per_expert=m // g, flops=2.0 * m * k * n)
        if diff > 1e-3:
          log(f"  fp8 G={g} {k}x{n} {pattern}: calc_diff {diff:.3g}; not timed")
          rows.append(row)
          continue
        row["ours_s"], row["ours_gpu_s"] = _time(torch, ours, sets, args.reps, torch is not None)
        row["dense_s"], row["dense_gpu_s"] = _time(torch, dense, sets, args.reps,
                                                   torch is not None)
        if tsg is not None:
          try:  # per-row / per-column scales from the same quantized bytes (not blockwise)
            offs = torch.from_numpy(np.cumsum(sizes).astype(np.int32)).cuda()
            tsets = [(_to_torch(torch, a), torch.ones(m, device="cuda"),
                      _to_torch(torch, b).transpose(-2, -1), torch.ones(g, n, device="cuda"))
                     for a, st, b, sb in sets]
            row["torch_s"] = time_torch(torch, lambda *o: tsg(*o, offs), tsets, args.reps)
            row["torch_gpu_s"] = gpu_time_torch(torch, lambda *o: tsg(*o, offs), tsets)
          except Exception as e:  # noqa: BLE001
            row["torch_note"] = f"{type(e).__name__}: {e}"[:200]
        rows.append(row)
        _log_row(row, log)
        del sets
  return rows


def bench_step(args, torch, log):
  """One grouped layer's training step (y, dx, dw) at args.tokens tokens."""
  rows = []

  def step(dot, gs):
    def f(x, w, ct):
      y, vjp = jax.vjp(lambda x, w: dot(x, w, gs), x, w)
      return (y,) + vjp(ct)
    return f

  for g in args.experts:
    for k, n in args.shapes:
      m = args.tokens
      sizes = group_sizes("skewed", g, m)
      gs = jnp.asarray(sizes)
      sets = [(x, w, _normal(jax.random.fold_in(jax.random.key(i), 5), (m, n)))
              for i, (x, w) in enumerate(bf16_sets(m, k, n, g, args.sets))]
      row = dict(column="step", experts=g, k=k, n=n, m=m, pattern="skewed",
                 flops=6.0 * m * k * n)
      for name, dot in (("ours", jax_sm100.ragged_dot), ("fp8", jax_sm100.fp8_ragged_dot),
                        ("xla", jax.lax.ragged_dot)):
        row[f"{name}_s"], row[f"{name}_gpu_s"] = _time(torch, step(dot, gs), sets, args.reps,
                                                       torch is not None)
      rows.append(row)
      _log_row(row, log)
      del sets
  return rows


def _ratios(row):
  """xla/ours-style ratios of a row (> 1: ours faster), wall and GPU time."""
  out = {}
  for suffix in ("_s", "_gpu_s"):
    t = {k[:-len(suffix)]: v for k, v in row.items() if k.endswith(suffix) and v}
    tag = "gpu_" if suffix == "_gpu_s" else ""
    if row["column"] == "bf16" and "ours" in t:
      for other in ("xla", "torch"):
        if other in t:
          out[f"{tag}{other}/ours"] = t[other] / t["ours"]
      for forced in (c for c in t if c.startswith("ours_") and not c.endswith("_gpu")):
        if "torch" in t:
          out[f"{tag}torch/{forced}"] = t["torch"] / t[forced]
    elif row["column"] == "fp8" and "ours" in t:
      out[f"{tag}efficiency"] = t["dense"] / t["ours"] if "dense" in t else None
      if "torch" in t:
        out[f"{tag}torch/ours"] = t["torch"] / t["ours"]
    elif row["column"] == "step" and "xla" in t:
      for name in ("ours", "fp8"):
        if name in t:
          out[f"{tag}xla/{name}"] = t["xla"] / t[name]
  row.update(out)
  return out


def _log_row(row, log):
  r = _ratios(row)
  tf = {k[:-2]: row["flops"] / v / 1e12 for k, v in row.items()
        if k.endswith("_s") and not k.endswith("_gpu_s") and v}
  log(f"{row['column']:5s} G={row['experts']:3d} {row['k']:5d}x{row['n']:<5d} M={row['m']:6d} "
      f"{row['pattern']:7s} " + "  ".join(f"{k} {v:6.1f}" for k, v in tf.items()) +
      " TFLOP/s  " + "  ".join(f"{k} {v:.3f}" for k, v in r.items() if v))


# The targets, judged on GPU time (wall time where torch, and so CUPTI, is absent).
TARGETS = {("bf16", "xla/ours"): 1.3, ("bf16", "torch/ours"): 1.0,
           ("fp8", "efficiency"): 0.9, ("step", "xla/fp8"): 1.3}


def summarize(rows, log):
  summary = {}
  for (col, plain), target in TARGETS.items():
    key = "gpu_" + plain
    vals = [r[key] for r in rows if r["column"] == col and r.get(key)]
    if not vals:
      key = plain
      vals = [r[key] for r in rows if r["column"] == col and r.get(key)]
    if not vals:
      continue
    if col == "fp8":  # the target counts >= 4k tokens per expert only
      vals = [r[key] for r in rows if r["column"] == col and r.get(key)
              and r["tokens_per_expert"] >= 4096] or vals
    gm, worst = geomean(vals), min(vals)
    summary[f"{col} {key}"] = dict(geomean=gm, worst=worst, target=target,
                                   met=bool(gm >= target))
    log(f"{col:5s} {key:16s} geomean {gm:.3f} (worst {worst:.3f}); target >= {target}: "
        f"{'met' if gm >= target else 'NOT met'}")
  return summary


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--out", default="", help="directory for bench_grouped.json")
  p.add_argument("--only", default="bf16,fp8,step")
  p.add_argument("--quick", action="store_true", help="G 8 and 32, the first two shapes")
  p.add_argument("--experts", default="", help="comma-separated G values (default: all, "
                 "or --quick's)")
  p.add_argument("--shapes", default="", help="comma-separated KxN expert shapes, e.g. "
                 "4096x14336 (default: all, or --quick's)")
  p.add_argument("--tokens", type=int, default=8192, help="rows M of the bf16 and step columns")
  p.add_argument("--fp8-tokens-per-expert", type=int, default=4096)
  p.add_argument("--fp8-max-tokens", type=int, default=131072)
  p.add_argument("--sets", type=int, default=6, help="distinct input sets per timing")
  p.add_argument("--reps", type=int, default=5)
  p.add_argument("--tiles", default="", help="bf16: also time ours forced onto these "
                 "tilings, e.g. 128x128,128x256")
  p.add_argument("--no-xla", action="store_true", help="bf16: skip XLA's ragged_dot")
  args = p.parse_args(argv)
  args.tiles = tuple(tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",") if t)
  if args.experts:
    args.experts = tuple(int(g) for g in args.experts.split(","))
  else:
    args.experts = EXPERTS[:2] if args.quick else EXPERTS
  if args.shapes:
    args.shapes = tuple(tuple(int(v) for v in kn.split("x")) for kn in args.shapes.split(","))
  else:
    args.shapes = SHAPES[:2] if args.quick else SHAPES
  dev = jax.devices()[0]
  torch, why = _torch()
  log = lambda s: print(s, flush=True)  # noqa: E731
  log(f"device {dev.device_kind}  jax {jax.__version__}  backend {jax_sm100.backend()}  "
      f"torch {torch.__version__ if torch else why}")
  if jax_sm100.backend() == "reference":
    log("warning: jax_sm100.backend() is 'reference': 'ours' is the pure-JAX path")
  rows = []
  for name, fn in (("bf16", bench_bf16), ("fp8", bench_fp8), ("step", bench_step)):
    if name in args.only.split(","):
      rows += fn(args, torch, log)
  summary = summarize(rows, log)
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_grouped.json"), "w") as f:
      json.dump(dict(device=dev.device_kind, date=datetime.datetime.now().isoformat(),
                     commit=git_commit(), jax=jax.__version__, backend=jax_sm100.backend(),
                     args={k: v for k, v in vars(args).items()}, rows=rows, summary=summary),
                f, indent=1, default=str)


if __name__ == "__main__":
  main()
