"""A/B timing of the FP8 GEMM kernel between two builds of the package, each run in its
own process, with cuBLASLt's blockwise FP8 timed round-robin in the same process as the
machine-drift reference. Prints one JSON line per shape.

  python3 scripts/fp8_ab.py [--rounds 3] [--shapes MxNxK,...]

Run it once per build (PYTHONPATH selects the build), alternating A B A B; compare
`kernel_over_cublas` across the runs, not raw TFLOP/s (scripts/device_ab.sh does this).
"""
import argparse
import json
import os
import statistics


import jax_sm100
from jax_sm100 import bench_fp8 as bf


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in bf.LARGE))
  ap.add_argument("--tag", default=os.environ.get("AB_TAG", "?"))
  args = ap.parse_args()
  torch, blk = bf.torch_and_blockwise()
  print(f"# {args.tag}: jax_sm100 from {os.path.dirname(jax_sm100.__file__)}", flush=True)
  for spec in args.shapes.split(","):
    m, n, k = map(int, spec.split("x"))
    flops = 2.0 * m * n * k
    sets = bf.quantized_sets(m, n, k, bf.n_sets_for(m, n, k))
    kern, tsets = bf.fp8_kernel(sets, m, n)
    torch_sets = bf.torch_sets(torch, sets)
    ours, cub, cub_error = [], [], None
    for _ in range(args.rounds):
      ours.append(flops / bf.gpu_time_jax(torch, kern, tsets) / 1e12)
      if cub_error is None:
        try:  # cuBLASLt may refuse a shape (partial scale blocks): time ours alone then
          cub.append(flops / bf.gpu_time_torch(torch, blk, torch_sets) / 1e12)
        except Exception as e:  # noqa: BLE001
          cub_error = f"{type(e).__name__}: {str(e)[:200]}"
    ratios = [o / c for o, c in zip(ours, cub)]
    print(json.dumps({"tag": args.tag, "shape": [m, n, k], "kernel": statistics.median(ours),
                      "kernel_us": flops / statistics.median(ours) / 1e6,
                      "cublas_block": statistics.median(cub) if cub else None,
                      "kernel_over_cublas": statistics.median(ratios) if ratios else None,
                      "cublas_error": cub_error,
                      "rounds": [round(r, 4) for r in ratios]}), flush=True)
    del sets, tsets, torch_sets


if __name__ == "__main__":
  main()
