#!/usr/bin/env bash
# Our default FP8 GEMM beside DeepGEMM's Hopper kernel (checkout DIR, e.g. the ignored .dg/)
# under ncu, one launch each per shape: speed of light, instruction and warp-state
# statistics, memory traffic; with SOURCE=1 also the per-instruction stall samples (source
# page, summarised by ncu_source_summary.py). Needs the package installed.
# Usage: [SOURCE=1] benchmarks/device_ncu_vs_deepgemm.sh OUTDIR DGDIR MxNxK ...
out=$1; dg=$2; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section InstructionStats --section LaunchStats)
[ "${SOURCE:-0}" = 1 ] && sections+=(--section SourceCounters --warp-sampling-interval 0)
cd /tmp
for shape in "$@"; do
  IFS=x read -r M N K <<< "$shape"
  for who in ours deepgemm; do
    if [ $who = ours ]; then
      launches=("$here/fp8_gemm_launches.py" $M $N $K); kernel=regex:sm90_fp8_gemm
    else
      launches=("$here/deepgemm_launches.py" "$dg" $M $N $K); kernel=regex:fp8_gemm_kernel
    fi
    rep="/tmp/ncu_${who}_${shape}"
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 ncu --clock-control none --kernel-name $kernel \
      --launch-skip 1 --launch-count 1 "${sections[@]}" -f -o "$rep" python3 "${launches[@]}" \
      > "$out/ncu_${who}_${shape}_run.log" 2>&1
    echo "== $shape $who ncu rc=$?"
    ncu -i "$rep.ncu-rep" --print-details all > "$out/ncu_${who}_${shape}.txt" 2>&1
    grep -E "^  [a-z].*\(|SM Frequency|Elapsed Cycles|Duration|SM Active Cycles|Executed Instructions  |Executed Ipc A|Memory Throughput  .*byte|L2 Hit Rate  |DRAM Throughput|Registers Per|Grid Size|Cluster Size|Warp Cycles Per Issued|Avg. Active Threads" \
      "$out/ncu_${who}_${shape}.txt" | sed 's/  */ /g' | cut -c1-150
    if [ "${SOURCE:-0}" = 1 ]; then
      ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "/tmp/src_${who}_${shape}.csv" 2>/dev/null
      python3 "$here/ncu_source_summary.py" --threshold 250 "/tmp/src_${who}_${shape}.csv" \
        > "$out/ncu_source_${who}_${shape}.txt" 2>&1
      head -4 "$out/ncu_source_${who}_${shape}.txt" | cut -c1-400
    fi
  done
done
