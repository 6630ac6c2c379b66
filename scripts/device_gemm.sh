#!/usr/bin/env bash
# Device-machine run for the sm90 GEMM (issue 4): build for sm_90a, GPU tests, quick timing.
# Usage (repo root, on the GPU machine): scripts/device_gemm.sh [pytest -k expr] ; logs go to $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L
python3 -m pip install --no-build-isolation --no-deps -q . 2>&1 | tail -30 | tee "$OUT/build.log" || exit 1
(cd /tmp && python3 -c "import jax_sm100, jax; print(jax.__version__, jax.devices(), jax_sm100.backend(), sorted(jax_sm100._ffi_registry.registered_targets()))")
KEXPR=${1:-}
REPO=$PWD; (cd /tmp && timeout 400 python3 -m pytest -q -p no:cacheprovider --rootdir=/tmp "$REPO/tests/test_gemm_gpu.py" ${KEXPR:+-k "$KEXPR"}) 2>&1 | tail -60 | tee "$OUT/test.log"
