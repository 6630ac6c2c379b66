#!/usr/bin/env bash
# One device call that checks the whole package on an sm_90 GPU: build for
# sm_90a only, every GPU test (GEMM, FP8, pipeline device tests with
# compute-sanitizer), and the README's main job (bf16 vs FP8 Flax training,
# loss curves saved). Logs and results go to $OUT (the device tool's folder).
#   usage (repo root): COMMIT=<sha> bash scripts/device_integration.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a JAX_SM100_GIT_COMMIT="${COMMIT:-unknown}"  # the device copy has no .git
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"
repo="$(pwd)"
{ date -u; echo "commit ${COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
  python3 -c "import flax, optax; print('flax', flax.__version__, 'optax', optax.__version__)" \
    || echo "flax/optax missing"; } 2>&1 | tee "$OUT/env.txt"

t0=$SECONDS
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $((SECONDS - t0)) s"

cd /tmp   # test the installed package, not the source tree
python3 -c "import jax_sm100 as j; print('backend', j.backend(), j._ffi.cuda_archs(), sorted(j._ffi.registrations()))" \
  2>&1 | tee -a "$OUT/env.txt"
t0=$SECONDS
timeout 420 pytest -q -rfEs -p no:cacheprovider \
  "$repo/tests/test_gemm_gpu.py" "$repo/tests/test_fp8_gpu.py" "$repo/tests/test_pipeline_device.py" \
  "$repo/tests/test_flax_linen.py" "$repo/tests/test_flax_nnx.py" \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? ($((SECONDS - t0)) s)"; tail -25 "$OUT/gpu_tests.log"

t0=$SECONDS
timeout 120 python3 "$repo/examples/train_mlp.py" --steps 600 --log-every 50 --batch 4096 \
  --d-in 512 --hidden 2048 --depth 3 --lr 1e-3 \
  --json "$OUT/train_curves.json" --png "$OUT/train_curves.png" > "$OUT/train.log" 2>&1
echo "example rc=$? ($((SECONDS - t0)) s)"; grep -E "backend|->" "$OUT/train.log"
