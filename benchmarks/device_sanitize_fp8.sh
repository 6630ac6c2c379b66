#!/usr/bin/env bash
# compute-sanitizer memcheck on the FP8 GEMM's compiled configurations, one shape with
# several tiles per CTA, an odd K-block count and a 64-row last M tile (so a math WG's
# chain of tiles breaks): 2112x3072x384 (the default picks 192-row tiles there); the
# three-WG 192-row tiles at 2176x3072x384 (a last M tile of 64 rows: two of its three
# math WGs have nothing there). Run on the GPU machine after the package is installed.
# Prints one "ERROR SUMMARY" line per configuration.
set -o pipefail
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /tmp || exit 1
run() {  # shape "M N K", config (fp8_gemm_launches.py's CONFIG)
  echo "== $1: ${2:-default}"
  compute-sanitizer --tool memcheck --error-exitcode 3 \
    python3 "$here/fp8_gemm_launches.py" $1 "${2:-default}" 2>&1 | grep -E "ERROR SUMMARY|Invalid|error" | head -5
}
run "2112 3072 384"
run "2112 3072 384" 128,128,2
run "2112 3072 384" 128,64,2
# 256-row tiles' pair along N (A multicast) and 1 CTA, on 25 N tiles (the last pair's
# second CTA has no N tile) and 10 K blocks (laps of the unrolled K loop and a tail).
run "2112 3200 1280" 256,128,2,n
run "2112 3200 1280" 256,128,1
run "2176 3072 384" 192,128,1
