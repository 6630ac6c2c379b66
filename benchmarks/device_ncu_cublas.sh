#!/usr/bin/env bash
# Nsight Compute side by side: cuBLASLt's blockwise FP8 kernel (through torch's
# scaled_mm, BlockWise1x128 x BlockWise128x128) and our default FP8 GEMM kernel on one
# shape (4096x7168x16384 by default): kernel name (cuBLASLt's names carry its tile and
# cluster shape), launch configuration, speed of light, SM clock, tensor-pipe and
# shared-memory / L2 throughput, warp stalls. Needs the package installed and torch.
# Usage: benchmarks/device_ncu_cublas.sh [M N K]
M=${1:-4096}; N=${2:-7168}; K=${3:-16384}
here="$(cd "$(dirname "$0")" && pwd)"
launches="python3 $here/fp8_gemm_launches.py"  # three launches of the FP8 GEMM
cublas="python3 $here/cublas_blockwise_launches.py $M $N $K"  # three calls
cd /tmp
# cuBLASLt's kernel: the longest kernel of the scaled_mm calls, by name (torch.profiler).
kname=$(python3 - <<PY
import runpy, sys, torch
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CUDA]) as prof:
  sys.argv = ["", "$M", "$N", "$K"]
  runpy.run_path("$here/cublas_blockwise_launches.py")
dev = lambda e: getattr(e, "device_time", None) or getattr(e, "cuda_time", 0)  # noqa: E731
ev = max((e for e in prof.events() if str(e.device_type).endswith("CUDA")), key=dev)
print(ev.name)
PY
)
echo "cuBLASLt kernel: $kname"
kre=$(echo "$kname" | grep -oE '[A-Za-z0-9_]{8,}' | head -1)  # a distinctive identifier in it
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats)
echo "== cuBLASLt blockwise ${M}x${N}x${K}"
timeout 150 ncu --clock-control none --kernel-name "regex:$kre" \
  --launch-skip 1 --launch-count 1 --print-details all "${sections[@]}" $cublas 2>&1 | grep -v "^==PROF=="
echo "== ours (default variant) ${M}x${N}x${K}"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 ncu --clock-control none --kernel-name regex:sm90_fp8_gemm \
  --launch-skip 1 --launch-count 1 --print-details all "${sections[@]}" $launches $M $N $K 2>&1 | grep -v "^==PROF=="
