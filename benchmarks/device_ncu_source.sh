#!/usr/bin/env bash
# Where the default FP8 GEMM's warps stall, per SASS instruction: one ncu launch with
# warp-state sampling at full rate, exported and printed as the source page (SASS, CSV).
# WHO=cublas profiles cuBLASLt's blockwise FP8 kernel (through torch) instead, to read its
# main loop next to ours. Needs the package (or torch) installed.
# Usage: [WHO=ours|cublas] benchmarks/device_ncu_source.sh OUTDIR [M N K]
out=$1; M=${2:-4096}; N=${3:-7168}; K=${4:-16384}
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${WHO:-ours}" = cublas ]; then
  launches="python3 $here/cublas_blockwise_launches.py"; kernel=regex:nvjet  # cuBLASLt's GEMMs
else
  launches="python3 $here/fp8_gemm_launches.py"; kernel=regex:sm90_fp8_gemm  # three launches of the FP8 GEMM
fi
cd /tmp
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 ncu --clock-control none --kernel-name $kernel \
  --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section SpeedOfLight --warp-sampling-interval 0 \
  -f -o /tmp/fp8_src $launches $M $N $K > "$out/ncu_source_run.log" 2>&1
echo "ncu rc=$?"
ncu -i /tmp/fp8_src.ncu-rep --page source --csv --print-source sass > "$out/ncu_source_sass.csv" 2> "$out/ncu_source_print.err"
echo "source page rc=$? lines=$(wc -l < "$out/ncu_source_sass.csv")"
ncu -i /tmp/fp8_src.ncu-rep --print-details all > "$out/ncu_source_details.txt" 2>&1
head -3 "$out/ncu_source_sass.csv" | cut -c1-400
