"""A small benchmark of jax_sm100's ops against XLA on this machine's default device.

    python -m jax_sm100.bench [--quick] [--only bf16,residual,fp8,fp8_dot] [--out DIR]
                              [--dispatch auto|kernel|xla|heuristic]

  bf16      jax_sm100.matmul                  vs jnp.dot (bf16)
  residual  jax_sm100.matmul_residual         vs jnp.dot(a, b) + c (bf16)
  fp8       jax_sm100.fp8_blockwise_matmul    vs jnp.dot in bf16 on the same shape
  fp8_dot   fp8_dot's training step (y, dx, dw) vs the same step with jnp.dot in bf16

Each op runs inside one jitted function over several distinct input sets (so L2
reuse between calls stays out of the numbers); after a warm-up the two sides
alternate call by call, and the median per-call time is reported, with a second
interleaved pass as the run-to-run spread. Prints TFLOP/s, ours/XLA ratios and
their geometric means; with --out, writes bench.json (device, date, jax version,
every number). The benchmarks against cuBLASLt and the A/B tools live in the
source checkout's benchmarks/ folder.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

SHAPES = [(8192, 8192, 8192), (4096, 7168, 16384), (4096, 4096, 4096), (4096, 24576, 1536),
          (2048, 2048, 2048), (128, 7168, 4096), (16, 7168, 4096), (3000, 5000, 2056)]
QUICK = [(8192, 8192, 8192), (4096, 7168, 16384), (4096, 4096, 4096), (128, 7168, 4096),
         (3000, 5000, 2056)]
DOT_SHAPES = [(4096, 7168, 2048), (4096, 2048, 7168)]  # (M, K, N) of x (M, K) @ w (K, N)


def _normal(key, shape, dtype, scale=1.0):
  return (scale * jax.random.normal(key, shape, jnp.float32)).astype(dtype)


def input_sets(m, n, k, make, itemsize=2, budget=3 << 30):
  """Distinct input sets: at least 4, more for small problems (to amortize the
  per-call dispatch), within a memory budget."""
  per_set = (m * k + k * n + 2 * m * n) * itemsize
  count = int(max(4, min(32, budget // per_set, 2e12 // max(1.0, 2.0 * m * n * k))))
  keys = jax.random.split(jax.random.key(m * 31 + n * 7 + k), count)
  return [make(kk) for kk in keys]


def over_sets(fn):
  """One jitted function that applies fn to every input set: run(sets) -> outputs."""
  return jax.jit(lambda s: [fn(*x) for x in s])


def time_runs(runs, sets, repeats, warmup=2):
  """Median seconds per call of each run (run(sets): one call per input set, e.g.
  over_sets(fn) or its compiled form); the runs alternate call by call so clock and
  power drift hit them alike. The shared timer of this benchmark, jax_sm100.autotune
  and benchmarks/bench_suite.py."""
  for _ in range(warmup):
    for run in runs:
      jax.block_until_ready(run(sets))
  times = [[] for _ in runs]
  for _ in range(repeats):
    for i, run in enumerate(runs):
      t0 = time.perf_counter()
      jax.block_until_ready(run(sets))
      times[i].append((time.perf_counter() - t0) / len(sets))
  return [float(np.median(t)) for t in times]


def _time_pair(ours, base, sets, repeats, warmup=2):
  """Median seconds per call of each op (one jit over all sets each; the two
  alternate call by call so clock and power drift hit both alike)."""
  t_ours, t_base = time_runs([over_sets(ours), over_sets(base)], sets, repeats, warmup)
  return t_ours, t_base


def _columns():
  """name -> (shape list key, build(m, n, k) -> (ours, xla, sets, flops))."""
  import jax_sm100
  bf16 = jnp.bfloat16

  def matmul(m, n, k):
    make = lambda kk: (_normal(kk, (m, k), bf16), _normal(jax.random.fold_in(kk, 1), (k, n), bf16))
    return jax_sm100.matmul, jnp.dot, input_sets(m, n, k, make), 2.0 * m * n * k

  def residual(m, n, k):
    def make(kk):
      k1, k2, k3 = jax.random.split(kk, 3)
      return _normal(k1, (m, k), bf16), _normal(k2, (k, n), bf16), _normal(k3, (m, n), bf16)
    ours = lambda a, b, c: jax_sm100.matmul_residual(a, b, c)
    return ours, (lambda a, b, c: jnp.dot(a, b) + c), input_sets(m, n, k, make), 2.0 * m * n * k

  def fp8(m, n, k):
    q1 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)))
    q128 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(128, 128)))

    def make(kk):
      x, w = _normal(kk, (m, k), bf16), _normal(jax.random.fold_in(kk, 1), (n, k), bf16)
      return (*q1(x), *q128(w), x, w.T)
    ours = lambda a, sa, b, sb, x, wt: jax_sm100.fp8_blockwise_matmul(a, sa, b, sb)
    xla = lambda a, sa, b, sb, x, wt: jnp.dot(x, wt)
    return ours, xla, input_sets(m, n, k, make, itemsize=3), 2.0 * m * n * k

  def fp8_dot(m, k, n):
    def step(dot):
      def f(x, w, g):
        y, vjp = jax.vjp(dot, x, w)
        return (y,) + vjp(g)
      return f

    def make(kk):
      k1, k2, k3 = jax.random.split(kk, 3)
      return _normal(k1, (m, k), bf16), _normal(k2, (k, n), bf16, 0.05), _normal(k3, (m, n), bf16)
    return step(jax_sm100.fp8_dot), step(jnp.dot), input_sets(m, n, k, make), 6.0 * m * n * k

  return {"bf16": ("gemm", matmul), "residual": ("gemm", residual), "fp8": ("gemm", fp8),
          "fp8_dot": ("dot", fp8_dot)}


def _geomean(xs):
  xs = [x for x in xs if x > 0 and math.isfinite(x)]
  return float(math.exp(sum(map(math.log, xs)) / len(xs))) if xs else float("nan")


def run(columns, quick, repeats, log=print):
  rows = []
  for name, (kind, build) in _columns().items():
    if name not in columns:
      continue
    shapes = (DOT_SHAPES[:1] if quick else DOT_SHAPES) if kind == "dot" else (
        QUICK if quick else SHAPES)
    for shape in shapes:
      ours, xla, sets, flops = build(*shape)
      t_ours, t_xla = _time_pair(ours, xla, sets, repeats)
      t_ours2, t_xla2 = _time_pair(ours, xla, sets, repeats, warmup=0)
      row = dict(column=name, shape=list(shape), sets=len(sets), ours_s=t_ours, xla_s=t_xla,
                 ours_tflops=flops / t_ours / 1e12, xla_tflops=flops / t_xla / 1e12,
                 ratio=t_xla / t_ours, ratio_repeat=t_xla2 / t_ours2)
      rows.append(row)
      log(f"{name:8s} {'x'.join(map(str, shape)):>17s}  ours {row['ours_tflops']:7.1f}  "
          f"XLA {row['xla_tflops']:7.1f} TFLOP/s  ours/XLA {row['ratio']:.3f} "
          f"(repeat {row['ratio_repeat']:.3f})")
      del sets
  summary = {c: _geomean([r["ratio"] for r in rows if r["column"] == c])
             for c in columns if any(r["column"] == c for r in rows)}
  for c, g in summary.items():
    log(f"{c:8s} geomean ours/XLA {g:.3f}")
  return rows, summary


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
  p.add_argument("--only", default="bf16,residual,fp8,fp8_dot", help="comma-separated columns")
  p.add_argument("--repeats", type=int, default=0)
  p.add_argument("--out", default="", help="directory for bench.json")
  p.add_argument("--dispatch", default="auto", choices=("auto", "kernel", "xla", "heuristic"),
                 help="the bf16/fp16 products' dispatch (tuning.override(dispatch=...)): "
                      "auto = as the package dispatches them; kernel / heuristic time our "
                      "kernel wherever the measured dispatch would pick XLA's dot")
  args = p.parse_args(argv)
  import jax_sm100
  from jax_sm100 import tuning
  dev = jax.devices()[0]
  print(f"device {dev.device_kind}  jax {jax.__version__}  backend {jax_sm100.backend()}  "
        f"dispatch {args.dispatch}")
  if jax_sm100.backend() == "reference":
    print("warning: jax_sm100.backend() is 'reference': 'ours' is the pure-JAX path",
          file=sys.stderr)
  with tuning.override(dispatch=args.dispatch):   # read when each timed function is traced
    rows, summary = run(args.only.split(","), args.quick,
                        args.repeats or (5 if args.quick else 10))
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    meta = dict(device=dev.device_kind, jax_version=jax.__version__,
                backend=jax_sm100.backend(), quick=args.quick, dispatch=args.dispatch,
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                git_commit=os.environ.get("JAX_SM100_GIT_COMMIT", "unknown"))
    with open(os.path.join(args.out, "bench.json"), "w") as f:
      json.dump(dict(meta=meta, summary=summary, results=rows), f, indent=1)


if __name__ == "__main__":
  main()
