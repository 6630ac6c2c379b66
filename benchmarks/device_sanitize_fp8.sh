#!/usr/bin/env bash
# compute-sanitizer memcheck on the FP8 GEMM's default and chained forms, one shape with
# several tiles per CTA, an odd K-block count and a 64-row last M tile (so a math WG's
# chain of tiles breaks): 2112x3072x384 (the default picks 192-row tiles there); the
# three-WG 192-row tiles at 2176x3072x384 (a last M tile of 64 rows: two of its three
# math WGs have nothing there). Run on the GPU
# machine after the package is installed. Prints one "ERROR SUMMARY" line per variant.
set -o pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /tmp
run() {  # name, then KEY=VALUE overrides (SHAPE="M N K" among them picks the shape)
  local name=$1; shift
  echo "== $name: $*"
  local shape="2112 3072 384" kv
  for kv in "$@"; do [ "${kv%%=*}" = SHAPE ] && shape=${kv#*=}; done
  env "$@" compute-sanitizer --tool memcheck --error-exitcode 3 \
    python3 "$here/fp8_gemm_launches.py" $shape 2>&1 | grep -E "ERROR SUMMARY|Invalid|error" | head -5
}
run default
run 128x128_c2_overlap_chain JAX_SM100_FP8_BLOCK_M=128 JAX_SM100_FP8_CLUSTER=2 JAX_SM100_FP8_OVERLAP=1 JAX_SM100_FP8_CHAIN=1
run 128x128_c4_overlap_chain JAX_SM100_FP8_BLOCK_M=128 JAX_SM100_FP8_CLUSTER=4 JAX_SM100_FP8_OVERLAP=1 JAX_SM100_FP8_CHAIN=1
run 256x128_c2 JAX_SM100_FP8_BLOCK_M=256 JAX_SM100_FP8_CLUSTER=2
# 256-row tiles' default pair along N (A multicast) and 1 CTA, on 25 N tiles (the last
# pair's second CTA has no N tile) and 10 K blocks (laps of the unrolled K loop and a tail).
run 256x128_c2n SHAPE="2112 3200 1280" JAX_SM100_FP8_BLOCK_M=256 JAX_SM100_FP8_CLUSTER=2n
run 256x128_c1 SHAPE="2112 3200 1280" JAX_SM100_FP8_BLOCK_M=256 JAX_SM100_FP8_CLUSTER=1
run 192x128_chain SHAPE="2176 3072 384" JAX_SM100_FP8_BLOCK_M=192
run 192x128 SHAPE="2176 3072 384" JAX_SM100_FP8_BLOCK_M=192 JAX_SM100_FP8_CHAIN=0
