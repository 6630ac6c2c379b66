#!/usr/bin/env bash
# Nsight Compute look at the dual quantize kernel (x and x^T in one pass) in its three
# modes on one large bf16 input (16384 x 7168 by default): DRAM / L1 / L2 throughput,
# occupancy, warp stall reasons. Needs the package installed.
# Usage: benchmarks/device_ncu_quant.sh [R C]
R=${1:-16384}; C=${2:-7168}
cd /tmp
cat > /tmp/dual_launches.py <<PY
import jax, jax.numpy as jnp
from jax_sm100._launch.quantize import quantize_dual_launch as _quantize_dual_launch
x = jax.random.normal(jax.random.PRNGKey(0), ($R, $C), jnp.bfloat16)
for br, tb in ((1, 1), (1, 128), (128, 128)):
  f = jax.jit(lambda x: _quantize_dual_launch(x, tb, block_rows=br))
  for _ in range(2):
    jax.block_until_ready(f(x))
PY
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy
          --section WarpStateStats --section LaunchStats)
# Each mode runs twice: profile the second launch of each (launches 1, 3, 5).
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 ncu --clock-control none \
  --kernel-name regex:quantize_dual --launch-skip 1 --launch-count 5 --print-details all \
  "${sections[@]}" python3 /tmp/dual_launches.py 2>&1 | grep -v "^==PROF=="
