#!/usr/bin/env bash
# One device call: build sm_90a; the quantization GPU tests; the quantization bandwidth
# probe (every kernel and the copy baselines side by side, plus an ncu pass timing the
# kernels themselves); then the full FP8 benchmark with the current defaults.
#   COMMIT=<sha> bash scripts/device_quant_session.sh      (results under $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"; repo="$(pwd)"
{ date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L; } | tee "$OUT/env.txt"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
cd /tmp
timeout 100 pytest -q -rfE -p no:cacheprovider -k "quantize" "$repo/tests/test_fp8_gpu.py" > "$OUT/quant_tests.log" 2>&1
echo "quantize tests rc=$? ($(( $(date +%s) - start )) s)"; grep -E "passed|failed|FAILED|ERROR" "$OUT/quant_tests.log" | tail -10
timeout 120 python3 "$repo/scripts/device_quant_probe.py" "$OUT/quant_probe.json" > "$OUT/quant_probe.log" 2>&1
echo "probe rc=$? ($(( $(date +%s) - start )) s)"; cat "$OUT/quant_probe.log" | grep -v Warning | tail -4
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 90 ncu --clock-control none \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \
  --kernel-name regex:"quantize|copy|add" python3 "$repo/scripts/device_quant_probe.py" --ncu-once > "$OUT/quant_ncu.log" 2>&1
echo "ncu rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^  [a-zA-Z_]|gpu__time|dram__" "$OUT/quant_ncu.log" | cut -c1-150 | head -60
timeout 300 python3 -m jax_sm100.bench_fp8 --out "$OUT/fp8" > "$OUT/bench_fp8_full.log" 2>&1
echo "full fp8 bench rc=$? ($(( $(date +%s) - start )) s)"; grep -v "Warning\|warn" "$OUT/bench_fp8_full.log" | tail -32
