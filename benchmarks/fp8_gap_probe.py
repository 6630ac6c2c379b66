"""Host-side gaps between FP8 GEMM launches inside one jit: for each way of calling the
kernel (the op with documented scales, the op with transposed scales), one jit over
several input sets; CUPTI (torch.profiler) gives each kernel's
start and duration. Prints one JSON line per (shape, op): GPU busy time per call (the
kernels' summed durations), the span from the first kernel's start to the last one's end
per call, and wall time per call (common.time_jax). span - busy = idle GPU time.

  python3 benchmarks/fp8_gap_probe.py [--shapes MxNxK,...] [--sets 8]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as bf  # noqa: E402

import jax  # noqa: E402

import jax_sm100  # noqa: E402


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--shapes", default="4096x4096x4096,4096x7168x2048,8192x8192x8192")
  ap.add_argument("--sets", type=int, default=8)
  args = ap.parse_args()
  torch, _ = bf._torch()
  for spec in args.shapes.split(","):
    m, n, k = map(int, spec.split("x"))
    sets = bf.quantized_sets(m, n, k, args.sets)
    ops = {
        "op_documented": (jax_sm100.fp8_blockwise_matmul, sets),
        "op_transposed": bf.fp8_transposed(sets),
    }
    for name, (fn, ss) in ops.items():
      many = jax.jit(lambda ss, fn=fn: [fn(*s) for s in ss])
      reps = 5
      ev = bf.cupti_gpu_events(torch, lambda: jax.block_until_ready(many(ss)), reps)
      busy = sum(float(e["dur"]) for e in ev)
      # one span per repetition: the kernels in launch order, len(ss) calls each
      ev.sort(key=lambda e: float(e["ts"]))
      per_rep = len(ev) // reps
      spans = []
      for r in range(reps):
        chunk = ev[r * per_rep:(r + 1) * per_rep]
        spans.append(max(float(e["ts"]) + float(e["dur"]) for e in chunk) - float(chunk[0]["ts"]))
      wall = bf.time_jax(fn, ss, 10)
      print(json.dumps({"shape": [m, n, k], "op": name, "kernels_per_call": len(ev) / (reps * len(ss)),
                        "busy_us_per_call": busy / (reps * len(ss)),
                        "span_us_per_call": sum(spans) / (reps * len(ss)),
                        "wall_us_per_call": wall * 1e6}), flush=True)
    del sets, ops


if __name__ == "__main__":
  main()
