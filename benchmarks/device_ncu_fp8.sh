#!/usr/bin/env bash
# Nsight Compute look at one FP8 blockwise GEMM launch (4096x7168x16384 by default) for
# each kernel variant named on the command line as CLUSTER,OVERLAP,BLOCK_N
# (default: the default kernel, cluster 2 + overlap, and the 2x2 cluster): speed of light, pipe
# utilisation (tensor), shared-memory / L2 / DRAM throughput, warp stall reasons. Needs the package installed.
# Usage: scripts/device_ncu_fp8.sh [M N K] [-- VARIANT ...]
M=${1:-4096}; N=${2:-7168}; K=${3:-16384}
launches="python3 $(cd "$(dirname "$0")" && pwd)/fp8_gemm_launches.py"  # three launches of the FFI target
shift 3 2>/dev/null; [ "${1:-}" = "--" ] && shift
variants=("$@"); [ ${#variants[@]} -eq 0 ] && variants=("2,1,128" "4,1,128")
cd /tmp
# Sections, not raw metric names: a metric name this ncu does not know would fail the run.
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section LaunchStats)
for v in "${variants[@]}"; do
  IFS=, read -r cl ov bn <<< "$v"
  echo "== ${M}x${N}x${K} cluster=$cl overlap=$ov block_n=$bn"
  JAX_SM100_FP8_CLUSTER=$cl JAX_SM100_FP8_OVERLAP=$ov JAX_SM100_FP8_BLOCK_N=$bn \
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 ncu --clock-control none \
    --kernel-name regex:sm90_fp8_gemm --launch-skip 1 --launch-count 1 --print-details all "${sections[@]}" \
    $launches $M $N $K 2>&1 | grep -v "^==PROF=="
done
