#!/usr/bin/env bash
# One device call that verifies the tree and measures it; logs and results under $OUT
# (at most 8 files come back from the device tool):
#   COMMIT=<sha> [TESTS=0] [BENCH=0] [FULL=1] [SWEEP=1] [TRAIN=1] bash benchmarks/device_session.sh
#   1. build for sm_90a only (build.log);
#   2. unless TESTS=0, the GPU tests: GEMM, FP8, pipeline device tests, command buffers,
#      Flax on the kernels (gpu_tests.log);
#   3. unless BENCH=0, the quick bf16 / residual / FP8 / fp8_dot benchmark against XLA
#      (python -m jax_sm100.bench --quick: bench.log, bench/bench.json) and the quick FP8
#      benchmark against cuBLASLt (benchmarks/bench_fp8.py --quick --no-quant:
#      bench_fp8.log, fp8/bench_fp8.json); FULL=1 runs both in full, SWEEP=1 adds the FP8
#      kernel-configuration sweep;
#   4. with TRAIN=1, the README's main job on the GPU (bf16 and FP8 Flax MLP, curves; three
#      more files: use BENCH=0 with it to stay within the 8 that come back).
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
{ date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L; } 2>&1 | tee "$OUT/env.txt"
start=$SECONDS
(cd "$repo" && python3 -m pip install --no-build-isolation --no-deps -q .) > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $((SECONDS - start)) s"
cd /tmp || exit 1  # test the installed package, not the checkout's jax_sm100/
python3 -c "import jax, jax_sm100 as j; print('jax', jax.__version__, 'backend', j.backend(), \
j._ffi.cuda_archs(), sorted(j._ffi.registrations()))" 2>&1 | tee -a "$OUT/env.txt"
if [ "${TESTS:-1}" != 0 ]; then
  timeout 300 pytest -q -rfE -p no:cacheprovider "$repo/tests/test_gemm_gpu.py" \
    "$repo/tests/test_fp8_gpu.py" "$repo/tests/test_fp8_bias_gpu.py" "$repo/tests/test_quantize_fp8_gpu.py" \
    "$repo/tests/test_pipeline_device.py" \
    "$repo/tests/test_command_buffer_gpu.py" "$repo/tests/test_flax_linen.py" \
    "$repo/tests/test_flax_nnx.py" > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? ($((SECONDS - start)) s)"
  grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests.log" | tail -25
fi
if [ "${BENCH:-1}" != 0 ]; then
  quick=(--quick); [ "${FULL:-0}" = 1 ] && quick=()
  timeout 240 python3 -m jax_sm100.bench "${quick[@]}" --out "$OUT/bench" > "$OUT/bench.log" 2>&1
  echo "bench rc=$? ($((SECONDS - start)) s)"; grep -v "Warn\|warn" "$OUT/bench.log" | tail -25
  args=(--quick --no-quant); [ "${FULL:-0}" = 1 ] && args=()
  [ "${SWEEP:-0}" = 1 ] && args+=(--sweep)
  timeout 400 python3 "$repo/benchmarks/bench_fp8.py" "${args[@]}" --out "$OUT/fp8" \
    > "$OUT/bench_fp8.log" 2>&1
  echo "fp8 bench rc=$? ($((SECONDS - start)) s)"
  grep -v "Warn\|warn\|candidate\|from_numpy" "$OUT/bench_fp8.log" | tail -40
  rm -f "$OUT"/fp8/bench_fp8.png  # keep under the 8 files that come back
fi
if [ "${TRAIN:-0}" = 1 ]; then
  timeout 150 python3 "$repo/examples/train_mlp.py" --steps 600 --log-every 50 --batch 4096 \
    --d-in 512 --hidden 2048 --depth 3 --lr 1e-3 \
    --json "$OUT/train_curves.json" --png "$OUT/train_curves.png" > "$OUT/train.log" 2>&1
  echo "example rc=$? ($((SECONDS - start)) s)"; grep -E "backend|->" "$OUT/train.log"
fi
