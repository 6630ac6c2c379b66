#!/usr/bin/env bash
# Installs a built wheel into a fresh virtual environment with no nvcc on PATH, with a
# given jax (default: the newest the index offers), and runs the test suite against it.
#   bash scripts/test_wheel.sh dist/jax_sm100-*.whl [JAX_VERSION] [pytest args...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheel="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; shift
jaxv="${1:-}"; [ $# -gt 0 ] && shift
venv="$repo/build/wheel-test-${jaxv:-newest}"
pins=(jax jaxlib); [ -n "$jaxv" ] && pins=("jax==$jaxv" "jaxlib==$jaxv")
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# flax/optax resolve to releases that accept this jax; cuobjdump/nvdisasm for the SASS tests.
"$venv/bin/python" -m pip install -q "$wheel" "${pins[@]}" flax optax "pytest>=7" pytest-xdist matplotlib \
  nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
# No compiler toolchain of CUDA's on PATH: the wheel must not need one.
clean_path="$venv/bin"
IFS=: read -ra parts <<< "$PATH"
for p in "${parts[@]}"; do
  [ -x "$p/nvcc" ] && continue
  clean_path="$clean_path:$p"
done
export PATH="$clean_path"
if command -v nvcc >/dev/null 2>&1; then echo "[wheel-test] nvcc still on PATH" >&2; exit 1; fi
export JAX_SM100_EXPECT_KERNELS=1
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"  # not the checkout: its jax_sm100/ would shadow the installed wheel
"$venv/bin/python" -c "import jax, jax_sm100, jax_sm100._ffi as f; print('[wheel-test] jax', jax.__version__, \
'| jax_sm100 from', jax_sm100.__file__, '| archs', f.cuda_archs(), '| backend', jax_sm100.backend()); \
assert '$venv' in jax_sm100.__file__ and f.has_cuda(), 'not the installed wheel, or no kernels'"
set +e
# The wheel's tests: `source_tree` ones check the checkout (its C++ headers, scripts), not
# the wheel, and `reference_path` ones the plain-jnp twin of a kernel-path test; both run
# in the source job (scripts/test.sh). On the newest jax (the jax the source job runs on)
# only the tests that run or read the installed library (`library`, `machine_code`): the
# rest are Python on that same jax, already run by the source job. With a pinned (older)
# jax every test but the `machine_code` ones: those read the library's machine code, which
# no jax version changes. Workers as there.
if [ -n "$jaxv" ]; then
  marks="not source_tree and not reference_path and not machine_code"
else
  marks="(library or machine_code) and not source_tree and not reference_path"
fi
"$venv/bin/python" -m pytest -ra --durations=15 -p no:cacheprovider -m "$marks" \
  -n "${JAX_SM100_TEST_WORKERS:-auto}" --dist loadfile "$@" "$repo/tests"
rc=$?
set -e
[ "$rc" -eq 5 ] && { echo "[wheel-test] pytest collected no tests" >&2; exit 1; }
exit "$rc"
