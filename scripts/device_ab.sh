#!/usr/bin/env bash
# A/B of the FP8 GEMM kernel between two source trees on one device machine:
#   A = .ab/base (made here: rm -rf .ab/base; mkdir -p .ab/base;
#       git archive <rev> | tar -x -C .ab/base; carry ".ab"), B = the working tree.
# Both are built for sm_90a (concurrently), then scripts/fp8_ab.py times each in its own
# process, alternating A B A B, with cuBLASLt blockwise in every process as the drift
# reference. Results: $OUT/ab.jsonl and a summary (kernel / cuBLASLt, per build).
# With NCU=1, an ncu look at B's default kernel at 4096x7168x16384 (device_ncu_fp8.sh).
# EXTRA="tag:VAR=val,VAR=val tag2:..." adds runs of B with those environment overrides
# after each pair.
# Other directories .ab/<name> are built and timed as further variants (tag <name>).
# Without .ab/base only B (and the EXTRA runs) is built and timed: a same-process look at
# several overrides or shapes of one build.
# AB_SCRIPT=scripts/fp8_power_probe.py runs that script in each process instead (SM
# clock and power; no A/B summary).
# Usage (device): [PAIRS=2] [SHAPES=MxNxK,...] [TESTS=1] [NCU=0] [EXTRA=...] [AB_SCRIPT=...] bash scripts/device_ab.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a
OUT="${OUT:-/tmp/ab_out}"; mkdir -p "$OUT"; repo="$(pwd)"; start=$(date +%s)
nvidia-smi -L
have_a=0; [ -d .ab/base ] && have_a=1
[ $have_a = 1 ] && (cd .ab/base && python3 -m pip install --no-build-isolation --no-deps -q --target /tmp/ab_a . \
   > "$OUT/build_a.log" 2>&1; echo "build A rc=$?") &
variants=(); for d in .ab/*/; do d=${d%/}; [ "$d" != .ab/base ] && [ -d "$d" ] && variants+=("${d#.ab/}"); done
for v in "${variants[@]}"; do
  (cd ".ab/$v" && python3 -m pip install --no-build-isolation --no-deps -q --target "/tmp/ab_$v" . \
     > "$OUT/build_$v.log" 2>&1; echo "build $v rc=$?") &
done
python3 -m pip install --no-build-isolation --no-deps -q . > "$OUT/build_b.log" 2>&1
echo "build B rc=$?"; wait; echo "builds $(( $(date +%s) - start )) s"
cd /tmp
if [ "${TESTS:-1}" = 1 ]; then
  timeout 200 pytest -q -x -p no:cacheprovider -k "not c4_" "$repo/tests/test_fp8_gpu.py" > "$OUT/fp8_tests_b.log" 2>&1
  echo "B fp8 tests rc=$? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/fp8_tests_b.log"
fi
shapes=(); [ -n "${SHAPES:-}" ] && shapes=(--shapes "$SHAPES")
script="$repo/${AB_SCRIPT:-scripts/fp8_ab.py}"
for i in $(seq "${PAIRS:-2}"); do
  [ $have_a = 1 ] && AB_TAG=A PYTHONPATH=/tmp/ab_a timeout "${AB_TIMEOUT:-150}" python3 "$script" "${shapes[@]}" 2>>"$OUT/ab.err" | tee -a "$OUT/ab.jsonl"
  AB_TAG=B timeout "${AB_TIMEOUT:-150}" python3 "$script" "${shapes[@]}" 2>>"$OUT/ab.err" | tee -a "$OUT/ab.jsonl"
  for v in "${variants[@]}"; do
    AB_TAG="$v" PYTHONPATH="/tmp/ab_$v" timeout "${AB_TIMEOUT:-150}" python3 "$script" "${shapes[@]}" \
      2>>"$OUT/ab.err" | tee -a "$OUT/ab.jsonl"
  done
  for spec in ${EXTRA:-}; do
    env $(echo "${spec#*:}" | tr , ' ') AB_TAG="${spec%%:*}" timeout "${AB_TIMEOUT:-150}" python3 "$script" \
      "${shapes[@]}" 2>>"$OUT/ab.err" | tee -a "$OUT/ab.jsonl"
  done
  echo "pair $i done ($(( $(date +%s) - start )) s)"
done
python3 - "$OUT/ab.jsonl" <<'PY'
import json, sys, statistics, collections
rows = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")) if "kernel" in r]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows: by[tuple(r["shape"])][r["tag"]].append(r)
for s, t in by.items():
  med = {tag: (statistics.median(x["kernel"] for x in rs),
              statistics.median((x["kernel_over_cublas"] or float("nan")) for x in rs))
         for tag, rs in t.items()}
  base = med.get("A", (float("nan"), float("nan")))[1]
  print(f"{'x'.join(map(str, s))}: " + "  ".join(
      f"{tag} {k:.0f} TF ({r:.3f} of cuBLASLt, {r / base:.3f} of A)" for tag, (k, r) in med.items()))
PY
if [ "${NCU:-0}" = 1 ]; then
  timeout 90 bash "$repo/scripts/device_ncu_fp8.sh" 4096 7168 16384 -- 1,0,128 > "$OUT/ncu_b.log" 2>&1
  echo "ncu rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^==|Duration|Tensor \(FP\)|Shared|Throughput|Stall|Issue Slots" "$OUT/ncu_b.log" | head -50
fi
