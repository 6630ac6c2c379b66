#!/usr/bin/env bash
# Creates (or reuses) the virtual environment .venv and installs jax_sm100 into
# it, built from this checkout against that environment's jaxlib. Sourced by
# scripts/test.sh and scripts/run_example.sh; safe to run again.
#
#   JAX_SM100_VENV          where the venv lives (default: .venv)
#   JAX_SM100_CUDA_ARCHS    GPU archs to build (default 90a;100a; e.g. 90a)
#   JAX_SM100_ENABLE_CUDA   OFF builds without kernels (reference path only)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${JAX_SM100_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating virtual environment $venv"
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
# Build tools + jax first, then build our extension against that very jaxlib
# (--no-build-isolation), so the FFI headers match the runtime.
python -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" "jax>=0.5" "jaxlib>=0.5" \
  "flax>=0.10" optax "pytest>=7" matplotlib
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
echo "[setup] building jax_sm100 (CUDA archs: ${JAX_SM100_CUDA_ARCHS:-90a;100a})"
python -m pip install -q --no-build-isolation "$repo[flax,test]"
# From / so the checkout's jax_sm100/ (no compiled _ffi) cannot shadow the install.
(cd / && python - <<'PY'
import jax_sm100, jax
from jax_sm100 import _ffi
print(f"[setup] jax {jax.__version__}; jax_sm100 kernels compiled: {_ffi.has_cuda()} "
      f"{_ffi.cuda_archs()}; backend here: {jax_sm100.backend()}")
PY
)
