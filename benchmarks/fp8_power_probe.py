"""SM clock and board power while the FP8 GEMM runs back to back, against cuBLASLt's
blockwise FP8 in the same process: tells a kernel that does more work per cycle from one
that merely runs at a higher clock (the H100/H200 are power-limited under FP8 GEMMs).
Prints one JSON line per (op, shape): time per call, median SM clock (MHz), board power
(W), the clock-event reasons seen, and cycles per call (time x clock).
With --deepgemm DIR (a checkout of DeepGEMM's Hopper FP8 GEMM, not part of this
project), DeepGEMM's `gemm_fp8_fp8_bf16_nt` on the same inputs is measured the same way,
after a check that it agrees with cuBLASLt. --burst adds one JSON line per shape with
short-run GPU times (CUPTI kernel durations; 5 repetitions over the input sets,
alternating the ops).

  python3 benchmarks/fp8_power_probe.py [--seconds 3] [--shapes MxNxK,...] [--deepgemm DIR] [--burst]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as bf  # noqa: E402


def sample_while(run, sync, seconds):
  """Call `run()` (one async batch of calls; returns how many) repeatedly for `seconds`
  while nvidia-smi samples every 50 ms, then `sync()`; returns seconds per call and the
  samples taken after the first 0.5 s."""
  run()  # warm-up (compilation, first launch)
  sync()
  q = "clocks.sm,power.draw,clocks_event_reasons.active"
  smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "50"],
                         stdout=subprocess.PIPE, text=True)
  t0 = time.perf_counter()
  calls = 0
  while time.perf_counter() - t0 < seconds:
    calls += run()
  sync()
  elapsed = time.perf_counter() - t0
  smi.terminate()
  out, _ = smi.communicate()
  rows = [r.split(", ") for r in out.strip().splitlines() if r.count(",") == 2]
  rows = rows[int(0.5 / 0.05):]  # skip the ramp
  return elapsed / calls, rows


def summary(tag, shape, per_call, rows):
  clocks = [float(r[0]) for r in rows if r[0].strip().replace(".", "").isdigit()]
  power = [float(r[1]) for r in rows if r[1].strip().replace(".", "").isdigit()]
  mhz = statistics.median(clocks) if clocks else float("nan")
  return {"op": tag, "shape": shape, "us_per_call": per_call * 1e6,
          "tflops": 2.0 * shape[0] * shape[1] * shape[2] / per_call / 1e12,
          "sm_mhz": mhz, "power_w": statistics.median(power) if power else None,
          "mcycles_per_call": per_call * mhz,
          "event_reasons": sorted({r[2].strip() for r in rows}), "samples": len(rows)}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--seconds", type=float, default=3.0)
  ap.add_argument("--shapes", default="4096x7168x16384")
  ap.add_argument("--tag", default=os.environ.get("AB_TAG", "ours"))
  ap.add_argument("--deepgemm", default="", help="DeepGEMM checkout to measure as well")
  ap.add_argument("--burst", action="store_true", help="also short-run times")
  args = ap.parse_args()
  torch, blk = bf.torch_and_blockwise()
  dg = None
  if args.deepgemm:
    sys.path.insert(0, args.deepgemm)
    import deep_gemm as dg
  for spec in args.shapes.split(","):
    m, n, k = map(int, spec.split("x"))
    sets = bf.quantized_sets(m, n, k, bf.n_sets_for(m, n, k))
    kern, tsets = bf.fp8_transposed(sets)
    many = jax.jit(lambda ss: [kern(*s) for s in ss])
    pending = []  # batches not yet waited for: two stay queued (the GPU never idles), memory bounded

    def run_ours():
      pending.append(many(tsets))
      if len(pending) > 2:
        jax.block_until_ready(pending.pop(0))
      return len(tsets)
    per, rows = sample_while(run_ours, lambda: jax.block_until_ready(pending), args.seconds)
    print(json.dumps(summary(args.tag, [m, n, k], per, rows)), flush=True)
    torch_sets = bf.torch_sets(torch, sets)
    per, rows = sample_while(lambda: len([blk(*s) for s in torch_sets]), torch.cuda.synchronize,
                             args.seconds)
    print(json.dumps(summary("cublaslt_blockwise", [m, n, k], per, rows)), flush=True)
    timed = {"ours": None, "cublaslt_blockwise": blk}  # None: ours (a JAX function)
    if dg is not None:
      # DeepGEMM's layouts: A's scales (M, K/128) column-major (torch_sets has them so),
      # B as (N, K) row-major (torch_sets holds its transposed view), B's scales as ours.
      outs = [torch.empty((m, n), dtype=torch.bfloat16, device="cuda") for _ in torch_sets]
      dg_sets = [(a, sa, bt.t(), sb, o) for (a, sa, bt, sb), o in zip(torch_sets, outs)]

      def dg_call(a, sa, b, sb, o):
        dg.gemm_fp8_fp8_bf16_nt((a, sa), (b, sb), o)
        return o
      diff = bf.calc_diff(dg_call(*dg_sets[0]).float().cpu().numpy(),
                          blk(*torch_sets[0]).float().cpu().numpy())
      print(json.dumps({"op": "deepgemm_check", "shape": [m, n, k], "calc_diff_vs_cublaslt": diff}),
            flush=True)
      if diff < 1e-3:
        per, rows = sample_while(lambda: len([dg_call(*s) for s in dg_sets]), torch.cuda.synchronize,
                                 args.seconds)
        row = summary("deepgemm", [m, n, k], per, rows)
        row["env"] = {k_: v for k_, v in os.environ.items() if k_.startswith("DG_")}
        print(json.dumps(row), flush=True)
        timed["deepgemm"] = dg_call
    if args.burst:
      # Short runs, the ops alternating: 5 repetitions over the sets, median per op, by
      # GPU time (CUPTI kernel durations, as the bench), so host dispatch counts for none.
      res = {tag: [] for tag in timed}
      for _ in range(5):
        for tag, fn in timed.items():
          if fn is None:
            res[tag].append(bf.gpu_time_jax(torch, kern, tsets, reps=1))
          else:
            res[tag].append(bf.gpu_time_torch(torch, fn, dg_sets if tag == "deepgemm" else torch_sets,
                                              reps=1))
      print(json.dumps({"op": "burst", "shape": [m, n, k],
                        "us_per_call": {t: statistics.median(v) * 1e6 for t, v in res.items()}}),
            flush=True)
    sets = tsets = torch_sets = dg_sets = outs = None  # free device memory before the next shape


if __name__ == "__main__":
  main()
