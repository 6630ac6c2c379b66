#!/usr/bin/env bash
# Nsight Compute look at one FP8 blockwise GEMM launch (4096x7168x16384 by default) for
# each kernel configuration named on the command line as BLOCK_M,BLOCK_N,CLUSTER[,n]
# (fp8_gemm_launches.py's CONFIG; "default": the default choice; without any: the default,
# the 128x128 pair along M and the 256x128 pair along N): speed of light, pipe utilisation
# (tensor), shared-memory / L2 / DRAM throughput, warp stall reasons. Needs the package
# installed.   Usage: benchmarks/device_ncu_fp8.sh [M N K] [-- CONFIG ...]
M=${1:-4096}; N=${2:-7168}; K=${3:-16384}
launches="python3 $(cd "$(dirname "$0")" && pwd)/fp8_gemm_launches.py"  # three launches
shift 3 2>/dev/null; [ "${1:-}" = "--" ] && shift
configs=("$@"); [ ${#configs[@]} -eq 0 ] && configs=("default" "128,128,2" "256,128,2,n")
cd /tmp || exit 1
# Sections, not raw metric names: a metric name this ncu does not know would fail the run.
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section LaunchStats)
for c in "${configs[@]}"; do
  echo "== ${M}x${N}x${K} config $c"
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 ncu --clock-control none \
    --kernel-name regex:sm90_fp8_gemm --launch-skip 1 --launch-count 1 --print-details all "${sections[@]}" \
    $launches $M $N $K "$c" 2>&1 | grep -v "^==PROF=="
done
