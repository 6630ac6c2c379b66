#!/usr/bin/env bash
# A/B of two builds of jax_sm100 on one device machine: A = another commit's sources,
# B = this working tree. Each build is installed into its own directory (pip install
# --target build/ab/{A,B}: build/ is git-ignored, so a warm device machine keeps them
# between calls), then benchmarks/ab.py times the quick bf16, residual, FP8, fp8_dot and
# quantize suites in one process per build and pass, the builds interleaved (A B, B A,
# A B, ...), and prints per-shape ratios with a noise floor (the spread between passes
# of one build). Two builds cannot share one process: same module, same FFI target names.
#
#   1. here, in a git checkout:   bash benchmarks/ab.sh prepare REV   (any commit, tag, branch)
#        -> build/ab/src_A (git archive REV; the device copy has no .git)
#   2. device (carry build/ab/src_A):   bash benchmarks/ab.sh build
#        -> both builds for sm_90a, concurrently (a few minutes); logs in $OUT
#   3. device (same warm machine):   [PASSES=2] [SUITES=bf16,fp8] bash benchmarks/ab.sh run
#        -> $OUT/ab.jsonl and the summary (ab.py summary $OUT/ab.jsonl)
#   or 2+3 in one call when the time limit allows:   bash benchmarks/ab.sh all
# A_DIR=path builds A from another source directory instead of build/ab/src_A.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ab="$repo/build/ab"
OUT="${OUT:-/tmp/ab_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a XLA_PYTHON_CLIENT_PREALLOCATE=false

prepare() {
  local rev="${1:?usage: bash benchmarks/ab.sh prepare REV}"
  rm -rf "$ab/src_A"; mkdir -p "$ab/src_A"
  git -C "$repo" archive "$rev" | tar -x -C "$ab/src_A" || exit 1
  echo "A = $rev in $ab/src_A ($(du -sh "$ab/src_A" | cut -f1)); carry build/ab/src_A to the device"
}

build_one() {  # tag, source directory
  rm -rf "${ab:?}/$1"
  (cd "$2" && python3 -m pip install --no-build-isolation --no-deps -q --target "$ab/$1" .) \
    > "$OUT/build_$1.log" 2>&1
  local rc=$?
  echo "build $1 rc=$rc ($2)"; [ $rc = 0 ] || tail -20 "$OUT/build_$1.log"
  return $rc
}

build() {
  local src_a="${A_DIR:-$ab/src_A}" t0=$SECONDS
  [ -d "$src_a" ] || { echo "no A sources in $src_a: run 'bash benchmarks/ab.sh prepare REV' here first"; exit 1; }
  nvidia-smi -L 2>/dev/null
  build_one A "$src_a" & local pa=$!
  build_one B "$repo" & local pb=$!
  wait $pa; local ra=$?; wait $pb; local rb=$?
  echo "builds: $((SECONDS - t0)) s"
  [ $ra = 0 ] && [ $rb = 0 ]
}

run() {
  local suites="${SUITES:-bf16,residual,fp8,fp8_dot,quant}" t0=$SECONDS order
  for t in A B; do [ -d "$ab/$t/jax_sm100" ] || { echo "build $t missing: run 'ab.sh build'"; exit 1; }; done
  rm -f "$OUT/ab.jsonl"
  cd /tmp || exit 1  # never import the checkout's jax_sm100/
  for p in $(seq "${PASSES:-2}"); do
    if [ $((p % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for t in $order; do
      PYTHONPATH="$ab/$t" timeout "${AB_TIMEOUT:-240}" python3 "$repo/benchmarks/ab.py" measure \
        --tag "$t" --pass "$p" --suites "$suites" --out "$OUT/ab.jsonl" 2>>"$OUT/ab.err" \
        | tee -a "$OUT/ab.log"
      echo "pass $p $t done ($((SECONDS - t0)) s)"
    done
  done
  python3 "$repo/benchmarks/ab.py" summary "$OUT/ab.jsonl" --base A | tee "$OUT/ab_summary.txt"
}

case "${1:-all}" in
  prepare) prepare "${2:-}" ;;
  build) build ;;
  run) run ;;
  all) build && run ;;
  *) echo "usage: bash benchmarks/ab.sh prepare REV | build | run | all"; exit 2 ;;
esac
