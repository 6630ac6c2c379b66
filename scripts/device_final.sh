#!/usr/bin/env bash
# Final device check after a pipeline-library change: build (sm_90a), the GEMM, FP8 and
# pipeline device tests, then the quick GEMM bench and the FP8 bench with its tile/cluster
# sweep. Results under $OUT.   usage: COMMIT=<sha> bash scripts/device_final.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"; repo="$(pwd)"
{ date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L; } | tee "$OUT/env.txt"
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
cd /tmp
timeout 240 pytest -q -rfE -p no:cacheprovider "$repo/tests/test_gemm_gpu.py" \
  "$repo/tests/test_fp8_gpu.py" "$repo/tests/test_pipeline_device.py" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; tail -4 "$OUT/gpu_tests.log"
timeout 150 python3 -m jax_sm100.bench --quick --out "$OUT/gemm" > "$OUT/bench_gemm.log" 2>&1
echo "gemm bench rc=$?"; tail -22 "$OUT/bench_gemm.log"
timeout 150 python3 -m jax_sm100.bench_fp8 --quick --no-quant --sweep --out "$OUT/fp8" > "$OUT/bench_fp8.log" 2>&1
echo "fp8 bench rc=$?"; tail -30 "$OUT/bench_fp8.log"
