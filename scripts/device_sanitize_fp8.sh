#!/usr/bin/env bash
# compute-sanitizer memcheck on the FP8 GEMM's default and chained forms, one shape with
# several tiles per CTA, an odd K-block count and a 64-row last M tile (so a math WG's
# chain of tiles breaks): 2112x3072x384. Run on the GPU machine after the package is
# installed. Prints one "ERROR SUMMARY" line per variant.
set -o pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /tmp
run() {  # name, then KEY=VALUE overrides
  local name=$1; shift
  echo "== $name: $*"
  env "$@" compute-sanitizer --tool memcheck --error-exitcode 3 \
    python3 "$here/fp8_gemm_launches.py" 2112 3072 384 2>&1 | grep -E "ERROR SUMMARY|Invalid|error" | head -5
}
run default
run 128x128_c2_overlap_chain JAX_SM100_FP8_BLOCK_M=128 JAX_SM100_FP8_CLUSTER=2 JAX_SM100_FP8_OVERLAP=1 JAX_SM100_FP8_CHAIN=1
run 128x128_c4_overlap_chain JAX_SM100_FP8_BLOCK_M=128 JAX_SM100_FP8_CLUSTER=4 JAX_SM100_FP8_OVERLAP=1 JAX_SM100_FP8_CHAIN=1
run 256x128_c2 JAX_SM100_FP8_BLOCK_M=256 JAX_SM100_FP8_CLUSTER=2
