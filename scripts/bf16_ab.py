"""A/B timing of the bf16 GEMM between builds of the package, each run in its own
process (PYTHONPATH selects the build), with XLA's jnp.dot timed in the same process as
the drift reference: GPU time (CUPTI kernel durations) over 8 input sets, median of 5.
Prints one JSON line per shape.

  AB_TAG=A PYTHONPATH=/tmp/ab_a python3 scripts/bf16_ab.py MxNxK,...
"""
import json
import os
import statistics
import sys

import jax
import jax.numpy as jnp

import jax_sm100
from jax_sm100 import bench_fp8 as bf


def main():
  torch, _ = bf.torch_and_blockwise()
  tag = os.environ.get("AB_TAG", "?")
  for spec in sys.argv[1].split(","):
    m, n, k = map(int, spec.split("x"))
    key = jax.random.PRNGKey(0)
    sets = []
    for _ in range(8):
      key, k1, k2 = jax.random.split(key, 3)
      sets.append((jax.random.normal(k1, (m, k), jnp.bfloat16),
                   jax.random.normal(k2, (k, n), jnp.bfloat16)))
    ours, xla = [], []
    for _ in range(5):
      ours.append(bf.gpu_time_jax(torch, jax_sm100.matmul, sets))
      xla.append(bf.gpu_time_jax(torch, jnp.dot, sets))
    o, x = statistics.median(ours), statistics.median(xla)
    print(json.dumps({"tag": tag, "shape": [m, n, k], "ours_us": o * 1e6, "xla_us": x * 1e6,
                      "ours_over_xla": x / o}), flush=True)


if __name__ == "__main__":
  main()
