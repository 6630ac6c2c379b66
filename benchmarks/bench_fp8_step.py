"""fp8_dot's training step against XLA's bf16 step, side by side in one process (issue 31's
FP8 step target: >= 1.6x the XLA bf16 step on 4096x4096x14336 and 8192x7168x7168).

One step, for x (M, K), w (K, N) in bf16: y = dot(x, w), a loss that reads y (the mean
square error against a target t (M, N)), and its gradients with respect to x and w, jitted,
over distinct input sets. Variants:
  xla_bf16  jnp.dot in bf16 (XLA's GEMMs, fp32 accumulation)
  fp8       jax_sm100.fp8_dot (x in 1x128 blocks, w in 128x128 blocks; the backward in FP8
            as well: dx = Q(g) @ Q(w)^T, dw = Q(x)^T @ Q(g), quantizations included)
GPU time (CUPTI, with torch) and wall time (benchmarks/common.time_jax); --kernels adds each
variant's GPU time per kernel name (one step), the passes a step is made of.

    python benchmarks/bench_fp8_step.py [--shapes 4096x4096x14336,8192x7168x7168]
        [--kernels] [--out fp8_step.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (git_commit, gpu_time_jax, kernel_table, normal_sets,  # noqa: E402
                    require_torch, time_jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402

VARIANTS = {"xla_bf16": jnp.dot, "fp8": jax_sm100.fp8_dot}


def make_step(dot):
  def loss(x, w, t):
    return jnp.mean(jnp.square(dot(x, w).astype(jnp.float32) - t))

  return jax.value_and_grad(loss, argnums=(0, 1))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--shapes", default="4096x4096x14336,8192x7168x7168",
                  help="comma-separated MxNxK")
  ap.add_argument("--sets", type=int, default=4)
  ap.add_argument("--reps", type=int, default=10)
  ap.add_argument("--kernels", action="store_true", help="GPU time per kernel name")
  ap.add_argument("--out", default="")
  args = ap.parse_args()
  torch = require_torch("bench_fp8_step")
  rec = dict(device=jax.devices()[0].device_kind, commit=git_commit(), jax=jax.__version__,
             date=datetime.date.today().isoformat(), rows=[])
  for shape in args.shapes.split(","):
    m, n, k = map(int, shape.split("x"))
    sets = normal_sets(m + n + k, args.sets, [((m, k), jnp.bfloat16, 1.0),
                                              ((k, n), jnp.bfloat16, k ** -0.5),
                                              ((m, n), jnp.float32, 1.0)])
    row = dict(shape_mnk=[m, n, k], gpu_us={}, wall_us={}, kernels_us={})
    for name, dot in VARIANTS.items():
      step = make_step(dot)
      row["gpu_us"][name] = gpu_time_jax(torch, step, sets) * 1e6
      row["wall_us"][name] = time_jax(step, sets, args.reps) * 1e6
      if args.kernels:
        row["kernels_us"][name] = kernel_table(torch, step, sets)
    for t in ("gpu_us", "wall_us"):
      row[t.replace("_us", "") + "_fp8_over_xla"] = row[t]["xla_bf16"] / row[t]["fp8"]
    rec["rows"].append(row)
    print(f"{shape}: GPU xla_bf16 {row['gpu_us']['xla_bf16']:.1f} us, fp8 "
          f"{row['gpu_us']['fp8']:.1f} us ({row['gpu_fp8_over_xla']:.3f}x); wall "
          f"{row['wall_us']['xla_bf16']:.1f} / {row['wall_us']['fp8']:.1f} us "
          f"({row['wall_fp8_over_xla']:.3f}x)", flush=True)
    for name, table in row["kernels_us"].items():
      print(f"  {name}:")
      for kname, us in table.items():
        print(f"    {us:8.1f}  {kname[:110]}")
    del sets
  if args.out:
    with open(args.out, "w") as f:
      json.dump(rec, f, indent=1)


if __name__ == "__main__":
  main()
