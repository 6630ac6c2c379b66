"""The FP8 suite: every compiled FP8 kernel form against cuBLASLt's blockwise FP8 GEMM.

    python benchmarks/bench_fp8_suite.py --out fp8_suite.json [--plot fp8_suite.png]
        [--shapes MxNxK,...] [--rounds 3]
    python benchmarks/bench_fp8_suite.py --from fp8_suite.json --plot fp8_suite.png
    python benchmarks/bench_fp8_suite.py --from a.json[,b.json] --emit-table \
        jax_sm100/_dispatch_data.json

For each shape (M x N x K, d = a @ b^T; squares and LLM projection shapes over M in
{16, 64, 128, 512, 4096}), one process on one GPU, GPU time (the kernels' own durations,
CUPTI through torch.profiler) of:
  default       jax_sm100.fp8_blockwise_matmul with a's scales passed transposed (the
                kernel with no XLA op before it), the configuration the op chooses
                (the measured dispatch, jax_sm100._dispatch_fp8, where it has an entry;
                else the heuristic; no autotune cache)
  heuristic     the same under tuning.override(dispatch="heuristic"): the rule's choice
                (tuning.fp8_config), the baseline of --emit-table's entries
  each form     the same under tuning.override(fp8=Fp8Config(...)) for every form in
                tuning.FP8_TILINGS (group_m at its default)
  cublas_block  cuBLASLt's blockwise FP8 GEMM (1x128 a scales, 128x128 b scales) through
                torch, the baseline of issue 31's FP8 target
round-robin over `--rounds` rounds (each reports its median), over several distinct input
sets so that L2 reuse stays out. Prints and writes per shape the default's and the best
form's ratio to cuBLASLt (cuBLASLt time / ours: > 1 means ours is faster) and the
geomeans. Needs torch with a blockwise scaled_mm and the sm_90a FP8 kernel.

--emit-table writes the FP8 entries of the measured dispatch (jax_sm100._dispatch_fp8.
build_entries: per shape class, a form only where it beat the heuristic's choice on
every shape of the class, by MARGIN on their geomean) for the runs' GPU kind into the
dispatch table file, replacing that kind's FP8 entries; the runs must share one kind.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_suite import dump_table, gpu_times  # noqa: E402
from common import (_torch, bar_chart, fp8_transposed, geomean, git_commit, gpu_time_torch,  # noqa: E402
                    pick_torch_blockwise, quantized_sets, torch_sets)

import jax  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from jax_sm100 import tuning  # noqa: E402
from jax_sm100._dispatch_fp8 import form_name  # noqa: E402  (the suite's column names)

SQUARES = [(s, s, s) for s in (512, 1024, 2048, 4096, 8192)]
# (N, K) of LLM projections (DeepSeek-V3 / Llama shapes).
PROJECTIONS = [(2112, 7168), (7168, 2048), (4096, 7168), (24576, 1536), (7168, 16384),
               (28672, 4096)]
MS = (16, 64, 128, 512, 4096)
# fp8_dot's weight-gradient products (dW = x^T dy, K = tokens) at the step shapes of
# bench_fp8.py.
WGRAD = [(7168, 2048, 4096), (2048, 7168, 4096)]
SUITE = SQUARES + [(m, n, k) for (n, k) in PROJECTIONS for m in MS] + WGRAD


def is_large(m, n, k):
  """At least one full wave of 128x128 tiles on a 132-SM GPU, M >= 512, K >= 1536."""
  return m >= 512 and (m // 128) * (n // 128) >= 132 and k >= 1536


N_SETS = 8  # distinct input sets per shape (8 x B exceeds the L2 from N x K = 2112 x 7168 on)


def run_shape(torch, blk_fn, m, n, k, rounds, log):
  sets = quantized_sets(m, n, k, N_SETS)
  op, tsets = fp8_transposed(sets)
  tt = torch_sets(torch, sets)
  default = tuning.resolve_fp8(tuning.Settings(autotune_cache=False), m, n, k, False)[0]
  rule = tuning.fp8_config(m, n, k)
  cols = {"default": dict(autotune_cache=False), "heuristic": dict(dispatch="heuristic")}
  for f in tuning.FP8_TILINGS:
    cols[form_name(f)] = dict(fp8=tuning.Fp8Config(*f))
  runs = {}
  for c, kw in cols.items():
    many = jax.jit(lambda ss: [op(*s) for s in ss])
    with tuning.override(**kw):  # read when traced: compiled here, reused below
      try:
        jax.block_until_ready(many(tsets))
        runs[c] = many
      except Exception as e:  # noqa: BLE001  (a form the shape cannot take)
        log(f"  {m}x{n}x{k} {c}: {type(e).__name__}: {str(e)[:160]}")
  times = {c: [] for c in list(runs) + ["cublas_block"]}
  for _ in range(rounds):
    sec = gpu_times(torch, list(runs.values()), tsets)
    for c, t in zip(runs, sec or [float("nan")] * len(runs)):
      times[c].append(t * 1e6)
    times["cublas_block"].append(gpu_time_torch(torch, blk_fn, tt) * 1e6)
  us = {c: statistics.median(v) for c, v in times.items()}
  forms = {c: t for c, t in us.items() if c not in ("default", "heuristic", "cublas_block")}
  best = min(forms, key=forms.get)
  row = {"shape": [m, n, k], "default_form": form_name(
      (default.block_m, default.block_n, default.cluster, default.pair_along_n)),
      "heuristic_form": form_name((rule.block_m, rule.block_n, rule.cluster, rule.pair_along_n)),
      "us": us, "rounds": times, "best_form": best,
      "default_over_cublas": us["cublas_block"] / us["default"],
      "best_over_cublas": us["cublas_block"] / forms[best],
      "default_over_best": forms[best] / us["default"], "large": is_large(m, n, k)}
  log(f"{m:>5}x{n:>5}x{k:>5}  cuBLASLt {us['cublas_block']:8.1f} us  default "
      f"{row['default_form']:>10} {us['default']:8.1f} us ({row['default_over_cublas']:.3f})  "
      f"best {best:>10} {forms[best]:8.1f} us ({row['best_over_cublas']:.3f})")
  del sets, tsets, tt, runs
  return row


def plot(result, path) -> bool:
  """Bar chart of ours / cuBLASLt per shape (the default choice and the fastest form)."""
  rows = result["rows"]
  return bar_chart(
      path, ["x".join(map(str, r["shape"])) for r in rows],
      {"default choice": [r["default_over_cublas"] for r in rows],
       "fastest form": [r["best_over_cublas"] for r in rows]},
      ylabel="cuBLASLt time / ours (GPU time)", hline=1.0, rotation=70, dpi=110, inches_per_label=0.42,
      title=f"FP8 blockwise GEMM against cuBLASLt blockwise, {result['device']}")


def emit_table(sources, table_path) -> int:
  """Writes the FP8 entries built from `sources` (suite JSONs of one GPU kind) into the
  dispatch table at `table_path`."""
  import types
  from jax_sm100 import _dispatch_fp8, _dispatch_table
  results = []
  for src in sources:
    with open(src) as f:
      results.append((src, json.load(f)))
  kinds = {_dispatch_table.gpu_kind(types.SimpleNamespace(platform="gpu", device_kind=r["device"]))
           for _, r in results}
  if len(kinds) != 1:
    print(f"the runs are of several GPU kinds: {sorted(kinds)}")
    return 1
  (kind,) = kinds
  with open(table_path) as f:
    table = json.load(f)
  sms = tuning.sm_count(types.SimpleNamespace(platform="gpu", device_kind=results[0][1]["device"]))
  entries = _dispatch_fp8.build_entries([row for _, r in results for row in r["rows"]], sms=sms,
                                        classes=table["classes"])
  table.setdefault("kinds", {}).setdefault(kind, {})["fp8"] = {
      "measured_on": kind, "metric": "gpu_us", "margin": _dispatch_fp8.MARGIN,
      "source": " + ".join(f"{os.path.relpath(src)} ({r['commit']})" for src, r in results),
      "entries": entries}
  problems = _dispatch_table.check_table(table)
  if problems:
    print("; ".join(problems))
    return 1
  with open(table_path, "w") as f:
    f.write(dump_table(table))
  print(f"{kind}: {len(entries)} FP8 class entries -> {table_path}")
  return 0


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default="", help="JSON file for every number (required to measure)")
  ap.add_argument("--shapes", default="", help="MxNxK,... instead of the suite")
  ap.add_argument("--part", default="", help="i/n: the i-th of n slices of the shape list")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--plot", default="", help="PNG of the ratios (with --from: of that JSON)")
  ap.add_argument("--from", dest="src", default="",
                  help="JSON files this script wrote (comma-separated): plot the first, or "
                       "with --emit-table make the table's FP8 entries from all")
  ap.add_argument("--emit-table", default="", help="dispatch table file to write the FP8 "
                                                   "entries of --from's GPU kind into")
  args = ap.parse_args(argv)
  if args.src and args.emit_table:
    return emit_table(args.src.split(","), args.emit_table)
  if args.src:
    with open(args.src) as f:
      return 0 if plot(json.load(f), args.plot or args.src.replace(".json", ".png")) else 1
  if not args.out:
    ap.error("--out is required to measure")
  log = lambda s: print(s, flush=True)  # noqa: E731
  dev = jax.devices()[0]
  log(f"device: {dev.device_kind}  backend(): {jax_sm100.backend()}  jax {jax.__version__}")
  if jax_sm100.backend() != "sm90" or "jax_sm100_fp8_gemm" not in reg.registered_targets():
    log("the FP8 kernels are not available here (needs an sm_90 GPU and a CUDA build)")
    return 1
  torch, why = _torch()
  if torch is None:
    log(f"needs torch: {why}")
    return 1
  blk_name, blk_fn = pick_torch_blockwise(torch, log)
  if blk_fn is None:
    log("no torch blockwise FP8 call matched the reference")
    return 1
  shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
            if args.shapes else SUITE)
  if args.part:
    i, n = (int(v) for v in args.part.split("/"))
    shapes = shapes[i::n]
  rows = [run_shape(torch, blk_fn, m, n, k, args.rounds, log) for (m, n, k) in shapes]
  summary = {}
  for sel, name in ((lambda r: True, "all"), (lambda r: r["large"], "large")):
    picked = [r for r in rows if sel(r)]
    if picked:
      summary[f"geomean_{name}_default_over_cublas"] = geomean(
          [r["default_over_cublas"] for r in picked])
      summary[f"geomean_{name}_best_over_cublas"] = geomean(
          [r["best_over_cublas"] for r in picked])
      summary[f"below_1_{name}_default"] = sum(r["default_over_cublas"] < 1 for r in picked)
  for k_, v in summary.items():
    log(f"{k_}: {v:.3f}" if isinstance(v, float) else f"{k_}: {v}")
  result = {"device": dev.device_kind, "commit": git_commit(), "jax": jax.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "metric": "gpu_us", "torch_blockwise_call": blk_name, "rows": rows,
            "summary": summary}
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  if args.plot:
    plot(result, args.plot)
  return 0


if __name__ == "__main__":
  sys.exit(main())
