#!/usr/bin/env bash
# One device call that verifies the tree and runs this round's experiments, results under
# $OUT:  COMMIT=<sha> bash scripts/device_session.sh
#   1. build for sm_90a only;
#   2. the GPU tests: GEMM, FP8, pipeline device tests, command buffers, Flax on the
#      kernels; then, separately, the experimental kernels' tests (ordered issue,
#      2x2 cluster, dual quantization);
#   3. the quick FP8 bench (cuBLASLt side by side) with the variant sweep and the quantization
#      bandwidth table (incl. the dual kernel);
#   4. an ncu look at the default FP8 kernel and the ordered-issue one.
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"; repo="$(pwd)"
{ date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L; } | tee "$OUT/env.txt"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
cd /tmp
# The experimental kernels (ordered issue, cluster+overlap, dual quantization) run in a
# second pytest so that a hang there cannot hide the verified kernels' results.
experimental="ordered or c4_ or quantize_dual or dual_quantize"
timeout 220 pytest -q -rfE -p no:cacheprovider -k "not ($experimental)" "$repo/tests/test_fp8_gpu.py" \
  "$repo/tests/test_gemm_gpu.py" "$repo/tests/test_pipeline_device.py" \
  "$repo/tests/test_command_buffer_gpu.py" "$repo/tests/test_flax_linen.py" \
  "$repo/tests/test_flax_nnx.py" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? ($(( $(date +%s) - start )) s)"; grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests.log" | tail -25
timeout 120 pytest -q -rfE -p no:cacheprovider -k "$experimental" "$repo/tests/test_fp8_gpu.py" \
  > "$OUT/gpu_tests_experimental.log" 2>&1
echo "experimental gpu tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests_experimental.log" | tail -25
timeout 220 python3 -m jax_sm100.bench_fp8 --quick --sweep --out "$OUT/fp8" > "$OUT/bench_fp8.log" 2>&1
echo "fp8 bench rc=$? ($(( $(date +%s) - start )) s)"; tail -30 "$OUT/bench_fp8.log"
timeout 70 bash "$repo/scripts/device_ncu_fp8.sh" > "$OUT/ncu_fp8.log" 2>&1
echo "ncu rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^==|Duration|Throughput|Tensor|Stall|Issue|Pipe" "$OUT/ncu_fp8.log" | head -160
