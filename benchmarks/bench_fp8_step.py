"""fp8_dot's training step against XLA's bf16 step, side by side in one process (issue 31's
FP8 step target: >= 1.6x the XLA bf16 step on 4096x4096x14336 and 8192x7168x7168).

One step, for x (M, K), w (K, N) in bf16: y = dot(x, w), a loss that reads y (the mean
square error against a target t (M, N)), and its gradients with respect to x and w, jitted,
over distinct input sets. Variants:
  xla_bf16  jnp.dot in bf16 (XLA's GEMMs, fp32 accumulation)
  fp8       jax_sm100.fp8_dot (x in 1x128 blocks, w in 128x128 blocks; the backward in FP8
            as well: dx = Q(g) @ Q(w)^T, dw = Q(x)^T @ Q(g), quantizations included)
GPU time (CUPTI, with torch) and wall time (benchmarks/common.time_jax); --kernels adds each
variant's GPU time per kernel name (one step), the passes a step is made of, and the
step's ceiling with these GEMMs: the FP8 step's own GEMM and other kernels as measured,
its quantizers replaced by their bytes at a device copy's rate (XLA's negation of 1 GiB,
the same CUPTI measure). Each quantizer reads its bf16 input once and writes two FP8
copies (x and x^T, w and w^T, g and g^T): 4 bytes per element of x, w and g. The ceiling
says how fast the FP8 step could be with quantizers that move their bytes as fast as a
copy; `gemm_us_for_1.6x` the GEMM time 1.6x would then need.

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
from common import (copy_bandwidth, git_commit, gpu_time_jax, kernel_table,  # noqa: E402
                    normal_sets, require_torch, time_jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402

VARIANTS = {"xla_bf16": jnp.dot, "fp8": jax_sm100.fp8_dot}


def make_step(dot):
  def loss(x, w, t):
    return jnp.mean(jnp.square(dot(x, w).astype(jnp.float32) - t))

  return jax.value_and_grad(loss, argnums=(0, 1))


def ceiling(kernels_us, xla_us, m, n, k, copy_bw):
  """The FP8 step with its quantizers at a device copy's rate (see the module doc)."""
  gemm = sum(us for name, us in kernels_us.items() if "fp8_gemm_kernel" in name)
  quant = sum(us for name, us in kernels_us.items() if "quantize" in name)
  other = sum(kernels_us.values()) - gemm - quant
  quant_at_copy = 4 * (m * k + k * n + m * n) / copy_bw * 1e6
  step = gemm + quant_at_copy + other
  return {"gemm_us": gemm, "quant_us": quant, "quant_us_at_copy": quant_at_copy, "other_us": other,
          "step_us": step, "xla_over_ceiling": xla_us / step,
          "gemm_us_for_1.6x": xla_us / 1.6 - quant_at_copy - other}


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
  copy_bw = None
  if args.kernels:
    copy_bw, _ = copy_bandwidth(torch)
    rec["copy_tbs"] = copy_bw / 1e12
    print(f"device copy {copy_bw / 1e12:.2f} TB/s", flush=True)
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
    if args.kernels:
      row["ceiling"] = ceiling(row["kernels_us"]["fp8"], row["gpu_us"]["xla_bf16"], m, n, k, copy_bw)
      c = row["ceiling"]
      print(f"{shape}: ceiling with quantizers at copy rate: {c['step_us']:.1f} us "
            f"({c['xla_over_ceiling']:.3f}x XLA); GEMMs {c['gemm_us']:.1f} us, quantizers "
            f"{c['quant_us']:.1f} us measured / {c['quant_us_at_copy']:.1f} at copy rate, other "
            f"{c['other_us']:.1f} us; 1.6x needs GEMMs in {c['gemm_us_for_1.6x']:.1f} us", flush=True)
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
