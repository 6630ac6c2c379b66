#!/usr/bin/env bash
# Creates (or reuses) the virtual environment .venv and installs jax_sm100 into
# it, built from this checkout against that environment's jaxlib. Sourced by
# scripts/test.sh and scripts/run_example.sh; safe to run again.
#
#   JAX_SM100_VENV          where the venv lives (default: .venv)
#   JAX_SM100_CUDA_ARCHS    GPU archs to build (default 90a;100a; e.g. 90a)
#   JAX_SM100_ENABLE_CUDA   OFF builds without kernels (reference path only)
#   JAX_SM100_VERBOSE       1 shows the whole build output instead of one line
#                           per compiled file (it always goes to the build log)
#
# Its last lines say whether GPU kernels were compiled, as the installed
# extension reports it; it leaves that answer in JAX_SM100_KERNELS ("sm_90a
# sm_100a", or "none") for the scripts that source it.
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
echo "[setup] installing the build tools, jax, flax and pytest into $venv"
python -m pip install -q --upgrade pip
# Everything the build needs, then jax: the extension is built below with
# --no-build-isolation, against this very jaxlib (so the FFI headers match the
# runtime), and pip then installs none of pyproject's [build-system] requirements
# itself. CMake and Ninja come from PyPI as well: scikit-build-core prefers the
# `cmake` module of its own environment, so a missing or too old system CMake
# (Debian 12 has 3.25) does not matter. Keep these in step with pyproject.toml's
# [build-system] requires and CMakeLists.txt's cmake_minimum_required
# (tests/test_setup.py checks both).
python -m pip install -q "scikit-build-core>=0.11" "cmake>=3.26" ninja \
  "jax>=0.8" "jaxlib>=0.8" "flax>=0.10" optax "pytest>=7" pytest-xdist matplotlib
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# What to expect (the installed extension tells the truth at the end). CMake
# reads OFF, 0, FALSE, NO and N, in any case, as false.
case "$(printf '%s' "${JAX_SM100_ENABLE_CUDA:-ON}" | tr '[:upper:]' '[:lower:]')" in
  off|0|false|no|n) jax_sm100_want_cuda=0 ;;
  *) jax_sm100_want_cuda=1 ;;
esac
if [ "$jax_sm100_want_cuda" = 0 ]; then
  echo "[setup] building jax_sm100 WITHOUT GPU kernels" \
       "(JAX_SM100_ENABLE_CUDA=$JAX_SM100_ENABLE_CUDA)"
elif ! command -v nvcc >/dev/null 2>&1; then
  echo "[setup] building jax_sm100 WITHOUT GPU kernels: no nvcc on PATH or in /usr/local/cuda/bin"
else
  echo "[setup] building jax_sm100 with GPU kernels for ${JAX_SM100_CUDA_ARCHS:-90a;100a}" \
       "($(command -v nvcc)); the CUDA files take minutes to compile"
fi

# Shows the build as it goes: one line per finished build step (Ninja's
# "[3/14] Building CUDA object ..."), with the time since the build began, the
# project's own CMake messages, errors, and a heartbeat while a long CUDA file
# compiles. Everything else (compiler command lines, ptxas register reports)
# goes to the build log only.
_jax_sm100_show() {
  local line="$1" t stamp step desc
  t=$((SECONDS - _jax_sm100_t0))
  stamp="$(printf '%d:%02d' $((t / 60)) $((t % 60)))"
  if [[ $line =~ ^[[:space:]]*(\[[[:space:]]*[0-9]+(/[0-9]+|%)\])[[:space:]](.*)$ ]]; then
    step="${BASH_REMATCH[1]}"
    desc="${BASH_REMATCH[3]}"
    # "CMakeFiles/jax_sm100_ffi.dir/ffi/src/x.cu.o" -> "ffi/src/x.cu.o"; a source
    # in site-packages -> its path below site-packages.
    if [[ $desc =~ ^(.*)CMakeFiles/[^/]*\.dir/(.*)$ ]]; then
      desc="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
    fi
    if [[ $desc =~ ^(.*[[:space:]])[^[:space:]]*site-packages/(.*)$ ]]; then
      desc="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
    fi
    echo "[setup]   $stamp $step $desc"
  elif [[ $line == *"-- jax_sm100:"* || $line == *"*** jax_sm100:"* || $line == *"FAILED:"* \
          || $line == *" error:"* || $line == *"error: "* || $line == *"CMake Error"* ]]; then
    line="${line#"${line%%[![:space:]]*}"}"
    echo "[setup]   $line"
  fi
}
_jax_sm100_progress() {
  _jax_sm100_t0=$SECONDS
  local part buf="" rc t last=$SECONDS
  while :; do
    if IFS= read -r -t 30 part; then
      _jax_sm100_show "$buf$part"
      buf=""
      last=$SECONDS
    else
      rc=$?
      if [ "$rc" -gt 128 ]; then   # no complete line for 30 s: still compiling
        buf+="$part"
        if [ $((SECONDS - last)) -ge 60 ]; then
          t=$((SECONDS - _jax_sm100_t0))
          printf '[setup]   %d:%02d   ... still building\n' $((t / 60)) $((t % 60))
          last=$SECONDS
        fi
        continue
      fi
      [ -z "$buf$part" ] || _jax_sm100_show "$buf$part"
      break
    fi
  done
}

mkdir -p "$repo/build"
log="$repo/build/setup.log"
echo "[setup] build log: $log"
if [ "${JAX_SM100_VERBOSE:-0}" = "1" ]; then
  show=(cat)
else
  show=(_jax_sm100_progress)
fi
if ! python -m pip install -v --no-build-isolation "$repo[flax,test]" 2>&1 \
    | tee "$log" | "${show[@]}"; then
  if grep -q 'FAILED:' "$log"; then
    echo "[setup] BUILD FAILED. The first failed step, from $log:" >&2
    sed -n '/FAILED:/,$p' "$log" | head -n 60 >&2
  else
    echo "[setup] BUILD FAILED. The end of $log:" >&2
    tail -n 40 "$log" >&2
  fi
  exit 1
fi

# The truth about what was built, from the installed extension. From / so the
# checkout's jax_sm100/ (no compiled library) cannot shadow the install.
JAX_SM100_KERNELS="$(cd / && python -c '
from jax_sm100 import _ffi
print(" ".join(_ffi.cuda_archs()) if _ffi.has_cuda() else "none")')"
export JAX_SM100_KERNELS
(cd / && python - <<'PY'
import jax
import jax_sm100
print(f"[setup] installed jax_sm100 with jax {jax.__version__}; "
      f"backend on this machine: {jax_sm100.backend()}")
PY
)
if [ "$JAX_SM100_KERNELS" != "none" ]; then
  echo "[setup] GPU kernels: compiled, machine code for ${JAX_SM100_KERNELS// /, }"
else
  if [ "$jax_sm100_want_cuda" = 0 ]; then
    why="JAX_SM100_ENABLE_CUDA=${JAX_SM100_ENABLE_CUDA}"
  elif ! command -v nvcc >/dev/null 2>&1; then
    why="no nvcc found: install the CUDA toolkit or put its nvcc on PATH"
  else
    why="nvcc is at $(command -v nvcc) but CMake did not use it; see $log"
  fi
  cat <<EOF
[setup] ********************************************************************
[setup] *** GPU kernels: NONE. jax_sm100 was built WITHOUT CUDA kernels  ***
[setup] *** ($why)
[setup] *** Every op takes the jax.numpy reference path, on any device.  ***
[setup] ********************************************************************
EOF
fi
