"""Benchmark of the fused bias/activation GEMM (jax_sm100.matmul_bias) against XLA.

    python benchmarks/bench_bias.py --out DIR [--quick] [--fp8]

Side by side in one process on one GPU, bf16, out = act(x @ w + b), for activations
{none, relu, gelu (tanh), gelu_exact, silu}:
  fwd    fused   jax_sm100.matmul_bias(x, w, b, activation=a)
         plain   act(jax_sm100.matmul(x, w) + b): our plain GEMM, XLA's epilogue pass
         biased  act(jax_sm100.matmul_bias(x, w, b)): the bias fused, the activation by XLA
         xla     act(jnp.dot(x, w) + b): XLA end to end (it may fuse into cuBLASLt)
  step   the layer's training step (out, dx, dw, db; the loss needs the forward output)
         for fused / plain / xla, activation gelu.
Wall time per call (benchmarks/common.time_jax: distinct input sets, dispatch cancels)
and, with torch installed, GPU time (CUPTI). Every row is checked first against XLA's
result (relative error); ratios are other/fused (> 1: fused faster). Issue targets:
fwd fused >= 1.10x xla on the large shapes and >= 0.97x plain. Writes DIR/bench_bias.json.

--fp8: the same for fp8_dot (FP8 blockwise product, bf16 in and out): fused is
fp8_dot(x, w, bias=b, activation=a), plain act(fp8_dot(x, w) + b), biased
act(fp8_dot(x, w, bias=b)); xla stays XLA's bf16 act(jnp.dot(x, w) + b). Rows are checked
against plain (FP8 against bf16 differs by the FP8 rounding). Writes DIR/bench_bias_fp8.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _torch, geomean, git_commit, gpu_time_jax, time_jax  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_sm100  # noqa: E402

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336),
          (16384, 2048, 7168), (2048, 2048, 2048))  # (M, N, K)
LARGE = 5  # the first five are "large"
ACTS = (None, "relu", "gelu", "gelu_exact", "silu")
BF16 = jnp.bfloat16
JNP_ACT = {None: lambda z: z, "relu": jax.nn.relu, "gelu": jax.nn.gelu,
           "gelu_exact": lambda z: jax.nn.gelu(z, approximate=False), "silu": jax.nn.silu}


def make_sets(m, n, k, n_sets):
  key = jax.random.key(m * 7 + n * 3 + k)
  sets = []
  for i in range(n_sets):
    k1, k2, k3, k4 = jax.random.split(jax.random.fold_in(key, i), 4)
    sets.append((jax.random.normal(k1, (m, k), BF16), jax.random.normal(k2, (k, n), BF16) / 64,
                 jax.random.normal(k3, (n,), BF16), jax.random.normal(k4, (m, n), BF16)))
  return jax.block_until_ready(sets)


def forwards(act, fp8=False):
  f = JNP_ACT[act]
  if fp8:
    return {"fused": lambda x, w, b, ct: jax_sm100.fp8_dot(x, w, bias=b, activation=act),
            "plain": lambda x, w, b, ct: f(jax_sm100.fp8_dot(x, w) + b),
            "biased": lambda x, w, b, ct: f(jax_sm100.fp8_dot(x, w, bias=b)),
            "xla": lambda x, w, b, ct: f(jnp.dot(x, w) + b)}
  return {"fused": lambda x, w, b, ct: jax_sm100.matmul_bias(x, w, b, activation=act),
          "plain": lambda x, w, b, ct: f(jax_sm100.matmul(x, w) + b),
          "biased": lambda x, w, b, ct: f(jax_sm100.matmul_bias(x, w, b)),
          "xla": lambda x, w, b, ct: f(jnp.dot(x, w) + b)}


def steps(act, fp8=False):
  def step(fwd):
    def g(x, w, b, ct):
      y, vjp = jax.vjp(lambda x, w, b: fwd(x, w, b, None), x, w, b)
      return (y,) + vjp(ct)
    return g
  return {name: step(f) for name, f in forwards(act, fp8).items()}


def rel_err(got, ref):
  got, ref = np.asarray(got, np.float32), np.asarray(ref, np.float32)
  return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def bench(args, torch, log):
  rows = []
  for m, n, k in args.shapes:
    sets = make_sets(m, n, k, args.sets)
    for column, acts, fns in (("fwd", args.acts, forwards), ("step", ("gelu",), steps)):
      for act in acts:
        impls = fns(act, args.fp8)
        row = dict(column=column, m=m, n=n, k=k, activation=act or "none")
        ref = jax.jit(impls["plain" if args.fp8 else "xla"])(*sets[0])
        got = jax.jit(impls["fused"])(*sets[0])
        row["rel_err"] = max(rel_err(a, b) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref)))
        # FP8: two paths whose operands differ by one bf16 rounding quantize a few percent
        # of the elements to the neighbouring e4m3 value (2^-3 apart): ~2% apart.
        if row["rel_err"] > (5e-2 if args.fp8 else 2e-2):
          log(f"{column} {m}x{n}x{k} {act}: rel_err {row['rel_err']:.3g}; not timed")
          rows.append(row)
          continue
        for name, fn in impls.items():
          row[f"{name}_s"] = time_jax(fn, sets, args.reps)
          if torch is not None:
            row[f"{name}_gpu_s"] = gpu_time_jax(torch, fn, sets)
        for suffix in ("_s", "_gpu_s"):
          if f"fused{suffix}" in row:
            for other in ("plain", "xla", "biased"):
              row[f"{'gpu_' if 'gpu' in suffix else ''}{other}/fused"] = (
                  row[f"{other}{suffix}"] / row[f"fused{suffix}"])
        rows.append(row)
        log(f"{column:4s} {m:5d}x{n:5d}x{k:5d} {row['activation']:10s} "
            + "  ".join(f"{r} {row[r]:.3f}" for r in ("plain/fused", "xla/fused",
                                                      "gpu_plain/fused", "gpu_xla/fused",
                                                      "gpu_biased/fused") if r in row))
    del sets
  return rows


def summarize(rows, log, large):
  out = {}
  for column in ("fwd", "step"):
    for key in ("gpu_xla/fused", "gpu_plain/fused", "xla/fused", "plain/fused"):
      vals = [r[key] for r in rows if r["column"] == column and key in r
              and (r["m"], r["n"], r["k"]) in large]
      if vals:
        out[f"{column} {key} large"] = dict(geomean=geomean(vals), worst=min(vals), n=len(vals))
        log(f"{column} {key:16s} large shapes: geomean {geomean(vals):.3f} worst {min(vals):.3f}")
  return out


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--out", default="")
  p.add_argument("--quick", action="store_true", help="two shapes, gelu and none")
  p.add_argument("--sets", type=int, default=6)
  p.add_argument("--reps", type=int, default=5)
  p.add_argument("--step-only", action="store_true", help="only the training-step rows")
  p.add_argument("--fp8", action="store_true", help="fp8_dot instead of matmul_bias")
  args = p.parse_args(argv)
  args.shapes = SHAPES[:2] if args.quick else SHAPES
  args.acts = () if args.step_only else (None, "gelu") if args.quick else ACTS
  torch, why = _torch()
  log = lambda s: print(s, flush=True)  # noqa: E731
  dev = jax.devices()[0]
  log(f"device {dev.device_kind}  jax {jax.__version__}  backend {jax_sm100.backend()}  "
      f"torch {torch.__version__ if torch else why}")
  rows = bench(args, torch, log)
  summary = summarize(rows, log, set(SHAPES[:LARGE]))
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    name = "bench_bias_fp8.json" if args.fp8 else "bench_bias.json"
    with open(os.path.join(args.out, name), "w") as f:
      json.dump(dict(device=dev.device_kind, date=datetime.datetime.now().isoformat(),
                     commit=git_commit(), jax=jax.__version__, args=vars(args), rows=rows,
                     summary=summary), f, indent=1, default=str)


if __name__ == "__main__":
  main()
