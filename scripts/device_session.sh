#!/usr/bin/env bash
# One device call that verifies the tree and measures it, results under $OUT (at most 8
# files come back):  COMMIT=<sha> [SWEEP=1] [NCU=1] bash scripts/device_session.sh
#   1. build for sm_90a only;
#   2. the GPU tests: GEMM, FP8, pipeline device tests, command buffers, Flax on the
#      kernels; then, separately, the experimental kernels' tests (ordered issue, 2x2
#      cluster), so a hang there cannot hide the verified kernels' results;
#   3. the quantization bandwidth probe, plain and under XLA command buffers (CUDA
#      graphs: no host work between the ops);
#   4. the quick FP8 bench (cuBLASLt side by side; with SWEEP=1 the variant sweep), then
#      again under XLA command buffers;
#   5. with NCU=1, an ncu look at the FP8 GEMM (scripts/device_ncu_fp8.sh).
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"; repo="$(pwd)"
date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
cd /tmp
experimental="ordered or c4_"
timeout 220 pytest -q -rfE -p no:cacheprovider -k "not ($experimental)" "$repo/tests/test_fp8_gpu.py" \
  "$repo/tests/test_gemm_gpu.py" "$repo/tests/test_pipeline_device.py" \
  "$repo/tests/test_command_buffer_gpu.py" "$repo/tests/test_flax_linen.py" \
  "$repo/tests/test_flax_nnx.py" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? ($(( $(date +%s) - start )) s)"; grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests.log" | tail -25
timeout 120 pytest -q -rfE -p no:cacheprovider -k "$experimental" "$repo/tests/test_fp8_gpu.py" \
  > "$OUT/gpu_tests_experimental.log" 2>&1
echo "experimental gpu tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E "passed|failed|FAILED|ERROR" "$OUT/gpu_tests_experimental.log" | tail -25
graphs="--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"
timeout 100 python3 "$repo/scripts/device_quant_probe.py" "$OUT/quant_probe.json" 2>&1 | grep -v Warn
XLA_FLAGS="$graphs" timeout 100 python3 "$repo/scripts/device_quant_probe.py" "$OUT/quant_probe_graphs.json" 2>&1 | grep -v Warn
echo "quant probes ($(( $(date +%s) - start )) s)"
sweep=(); [ "${SWEEP:-0}" = 1 ] && sweep=(--sweep)
timeout 220 python3 -m jax_sm100.bench_fp8 --quick --no-quant "${sweep[@]}" --out "$OUT/fp8" 2>&1 | grep -v "Warn\|warn" | tail -22
echo "fp8 bench ($(( $(date +%s) - start )) s)"
XLA_FLAGS="$graphs" timeout 150 python3 -m jax_sm100.bench_fp8 --quick --no-quant --out "$OUT/fp8_graphs" 2>&1 \
  | grep -v "Warn\|warn" | tail -14
echo "fp8 bench under command buffers ($(( $(date +%s) - start )) s)"
if [ "${NCU:-0}" = 1 ]; then
  timeout 70 bash "$repo/scripts/device_ncu_fp8.sh" > "$OUT/ncu_fp8.log" 2>&1
  echo "ncu rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^==|Duration|Throughput|Stall" "$OUT/ncu_fp8.log" | head -60
fi
rm -f "$OUT"/fp8*/bench_fp8.png  # keep under the 8 files that come back
