#!/usr/bin/env bash
# The README's test command: sets everything up on a fresh machine, then runs
# the test suite. GPU tests (marker `gpu`) skip themselves without an sm_90 GPU.
# Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup_env.sh"
# The SASS check in tests/test_build.py needs cuobjdump and the nvdisasm it
# calls; the CUDA toolkit on a CPU machine may lack both, NVIDIA's PyPI
# packages provide them.
python -m pip install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm \
  || echo "[test] could not install nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm"
if command -v nvcc >/dev/null 2>&1 && [ "$jax_sm100_want_cuda" = 1 ]; then
  export JAX_SM100_EXPECT_KERNELS=1   # a build that lost its kernels must fail the tests
fi
cd "$repo"
set +e
# `pytest`, not `python -m pytest`: -m puts the checkout on sys.path, so the
# source tree's jax_sm100/ (which has no compiled _ffi) would shadow the install.
# One worker per core (pytest-xdist), whole files to a worker so that a module's
# fixtures (compiled probes, built venvs) are made once; JAX_SM100_TEST_WORKERS=0
# runs in this process.
pytest -ra --durations=15 -n "${JAX_SM100_TEST_WORKERS:-auto}" --dist loadfile "$@" tests
rc=$?
set -e
# Repeated after pytest's output, where it is read.
if [ "${JAX_SM100_KERNELS:-none}" = "none" ]; then
  echo "[test] this build has NO GPU kernels (reference path only); see set-up's last lines"
else
  echo "[test] this build has GPU kernels for: $JAX_SM100_KERNELS"
fi
if [ "$rc" -eq 5 ]; then
  echo "[test] pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
