#!/usr/bin/env bash
# One device call that verifies the tree and measures it, results under $OUT (at most 8
# files come back):  COMMIT=<sha> [TESTS=0] [FULL=1] [SWEEP=1] [NCU=1] [TRAIN=1] [BF16=1] bash scripts/device_session.sh
#   1. build for sm_90a only;
#   2. unless TESTS=0, the GPU tests: GEMM, FP8, pipeline device tests, command buffers,
#      Flax on the kernels; then, separately, the opt-in 2x2 cluster's tests, so a hang
#      there cannot hide the default kernels' results;
#   3. the FP8 bench (cuBLASLt side by side, GPU and wall time): quick and without the
#      quantization table, or with FULL=1 everything; SWEEP=1 adds the variant sweep;
#   4. with NCU=1, an ncu look at the FP8 GEMM (scripts/device_ncu_fp8.sh);
#   5. with TRAIN=1, the README's main job on the GPU (bf16 and FP8 Flax MLP, curves);
#   6. with BF16=1, the bf16/fp16/residual GEMM bench (quick suite).
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"; repo="$(pwd)"
date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
cd /tmp
if [ "${TESTS:-1}" != 0 ]; then
  experimental="c4_"
  timeout 220 pytest -q -rfE -p no:cacheprovider -k "not ($experimental)" "$repo/tests/test_fp8_gpu.py" \
    "$repo/tests/test_gemm_gpu.py" "$repo/tests/test_pipeline_device.py" \
    "$repo/tests/test_command_buffer_gpu.py" "$repo/tests/test_flax_linen.py" \
    "$repo/tests/test_flax_nnx.py" > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? ($(( $(date +%s) - start )) s)"; grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests.log" | tail -25
  timeout 120 pytest -q -rfE -p no:cacheprovider -k "$experimental" "$repo/tests/test_fp8_gpu.py" \
    > "$OUT/gpu_tests_experimental.log" 2>&1
  echo "experimental gpu tests rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests_experimental.log" | tail -25
fi
args=(--quick --no-quant); [ "${FULL:-0}" = 1 ] && args=()
[ "${SWEEP:-0}" = 1 ] && args+=(--sweep)
timeout 400 python3 -m jax_sm100.bench_fp8 "${args[@]}" --out "$OUT/fp8" > "$OUT/bench_fp8.log" 2>&1
echo "fp8 bench rc=$? ($(( $(date +%s) - start )) s)"; grep -v "Warn\|warn\|candidate\|from_numpy" "$OUT/bench_fp8.log" | tail -45
if [ "${NCU:-0}" = 1 ]; then
  timeout 70 bash "$repo/scripts/device_ncu_fp8.sh" > "$OUT/ncu_fp8.log" 2>&1
  echo "ncu rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^==|Duration|Throughput|Stall" "$OUT/ncu_fp8.log" | head -60
fi
if [ "${TRAIN:-0}" = 1 ]; then
  timeout 150 python3 "$repo/examples/train_mlp.py" --steps 600 --log-every 50 --batch 4096 \
    --d-in 512 --hidden 2048 --depth 3 --lr 1e-3 \
    --json "$OUT/train_curves.json" --png "$OUT/train_curves.png" > "$OUT/train.log" 2>&1
  echo "example rc=$? ($(( $(date +%s) - start )) s)"; grep -E "backend|->" "$OUT/train.log"
fi
if [ "${BF16:-0}" = 1 ]; then
  timeout 200 python3 -m jax_sm100.bench --quick --out "$OUT/bf16" > "$OUT/bench_bf16.log" 2>&1
  echo "bf16 bench rc=$? ($(( $(date +%s) - start )) s)"; grep -v "Warn\|warn" "$OUT/bench_bf16.log" | tail -30
  rm -f "$OUT"/bf16/*.png
fi
rm -f "$OUT"/fp8*/bench_fp8.png  # keep under the 8 files that come back
