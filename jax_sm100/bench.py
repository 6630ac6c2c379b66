"""Benchmark: jax_sm100 kernels vs XLA, side by side in one process.

    python -m jax_sm100.bench [--quick] [--out DIR] [--only bf16,fp16,residual]

Each op is timed inside ONE jitted function that runs it on several distinct input
sets (rotated so that L2 reuse between calls stays out of the numbers); after a
warm-up, the median of repeated calls is divided by the number of sets. XLA's
baselines are `jnp.dot` (matmul) and `jnp.dot(...) + c` (residual, the same
bf16/fp16 output dtype). Prints a table of TFLOP/s and ours/XLA ratios with their
geometric means, writes bench.json (device, date, git commit, jax version, every
number) and bench.png (grouped bars per shape) into --out.

Adding columns (e.g. FP8, issue 5): append a `Column` to COLUMNS (or call
register_column) with a builder that returns the op, its baseline and the input
sets for a shape; the table, JSON and chart pick it up.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import subprocess
import sys
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

# (M, N, K): the DESIGN.md table, decode-like M, non-multiples of the tiles.
SUITE = [
    (8192, 8192, 8192),
    (4096, 7168, 16384),
    (4096, 4096, 4096),
    (4096, 24576, 1536),
    (4096, 7168, 2048),
    (2048, 2048, 2048),
    (128, 7168, 4096),
    (1, 7168, 4096),
    (16, 7168, 4096),
    (64, 7168, 4096),
    (3000, 5000, 2056),
    (1000, 1000, 1000),
]
QUICK = [(8192, 8192, 8192), (4096, 7168, 16384), (4096, 4096, 4096), (128, 7168, 4096),
         (3000, 5000, 2056)]
LARGE = [(8192, 8192, 8192), (4096, 7168, 16384)]


@dataclasses.dataclass
class Column:
  """One comparison: our op vs its XLA baseline on one dtype family.

  build(m, n, k, key) -> (ours, baseline, make_inputs) where ours/baseline take one
  input tuple and make_inputs(n_sets) returns a list of distinct input tuples.
  """
  name: str
  build: Callable
  flops: Callable = lambda m, n, k: 2.0 * m * n * k


def _rand(key, shape, dtype):
  return jax.random.normal(key, shape, jnp.float32).astype(dtype)


def _matmul_column(dtype):
  def build(m, n, k, key):
    import jax_sm100

    def make(n_sets):
      keys = jax.random.split(key, 2 * n_sets)
      return [(_rand(keys[2 * i], (m, k), dtype), _rand(keys[2 * i + 1], (k, n), dtype))
              for i in range(n_sets)]
    return (lambda a, b: jax_sm100.matmul(a, b)), (lambda a, b: jnp.dot(a, b)), make
  return build


def _residual_column(dtype):
  def build(m, n, k, key):
    import jax_sm100

    def make(n_sets):
      keys = jax.random.split(key, 3 * n_sets)
      return [(_rand(keys[3 * i], (m, k), dtype), _rand(keys[3 * i + 1], (k, n), dtype),
               _rand(keys[3 * i + 2], (m, n), dtype)) for i in range(n_sets)]
    ours = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=1.0, beta=1.0)
    return ours, (lambda a, b, c: jnp.dot(a, b) + c), make
  return build


COLUMNS: list[Column] = [
    Column("bf16", _matmul_column(jnp.bfloat16)),
    Column("fp16", _matmul_column(jnp.float16)),
    Column("residual", _residual_column(jnp.bfloat16)),
]


def register_column(col: Column) -> None:
  """Adds a comparison (e.g. FP8 blockwise vs its baseline) to the benchmark."""
  COLUMNS.append(col)


def _n_sets(m, n, k, itemsize=2, budget=3 << 30):
  """Distinct input sets: at least 4, more for small problems (to amortize the
  per-call dispatch), within a memory budget."""
  per_set = (m * k + k * n + 2 * m * n) * itemsize
  by_mem = max(1, budget // per_set)
  by_work = max(1, int(2e12 // max(1.0, 2.0 * m * n * k)))  # ~>= 2 TFLOP per call
  return int(max(4, min(64, by_mem, by_work)))


def _time_pair(fn_a, fn_b, sets, repeats, warmup=2):
  """Median seconds of one call of each op. Each op runs in one jit over all sets;
  the two ops alternate call by call (a, b, a, b, ...) so clock and power drift hit
  both alike. Returns (median_a, median_b, all_a, all_b), per op call."""
  runs = [jax.jit(lambda s, f=f: [f(*x) for x in s]) for f in (fn_a, fn_b)]
  for _ in range(warmup):
    for run in runs:
      jax.block_until_ready(run(sets))
  times = ([], [])
  for _ in range(repeats):
    for i, run in enumerate(runs):
      t0 = time.perf_counter()
      jax.block_until_ready(run(sets))
      times[i].append((time.perf_counter() - t0) / len(sets))
  return float(np.median(times[0])), float(np.median(times[1])), times[0], times[1]


def _git_commit():
  env = os.environ.get("JAX_SM100_GIT_COMMIT")
  if env:
    return env
  try:
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=here,
                                   stderr=subprocess.DEVNULL).decode().strip()
  except Exception:
    return "unknown"


def _geomean(xs):
  xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
  return float(math.exp(sum(math.log(x) for x in xs) / len(xs))) if xs else float("nan")


def run(shapes, columns, repeats, out_dir, log=print):
  import jax_sm100
  dev = jax.devices()[0]
  results = []
  key = jax.random.key(0)
  for col in columns:
    for (m, n, k) in shapes:
      key, sub = jax.random.split(key)
      ours, base, make = col.build(m, n, k, sub)
      n_sets = _n_sets(m, n, k)
      sets = make(n_sets)
      flops = col.flops(m, n, k)
      t_ours, t_base, all_ours, all_base = _time_pair(ours, base, sets, repeats)
      # A second interleaved pass shows the run-to-run spread (noise floor of the ratio).
      t_ours2, t_base2, _, _ = _time_pair(ours, base, sets, repeats)
      row = dict(column=col.name, m=m, n=n, k=k, n_sets=n_sets,
                 ours_s=t_ours, ours_s_repeat=t_ours2, xla_s=t_base, xla_s_repeat=t_base2,
                 ours_tflops=flops / t_ours / 1e12, xla_tflops=flops / t_base / 1e12,
                 ratio=t_base / t_ours, ours_all_s=all_ours, xla_all_s=all_base)
      results.append(row)
      log(f"{col.name:9s} {m:6d}x{n:6d}x{k:6d}  ours {row['ours_tflops']:7.1f}  "
          f"xla {row['xla_tflops']:7.1f} TFLOP/s  ratio {row['ratio']:.3f}  "
          f"(2nd pass: ours {flops / t_ours2 / 1e12:7.1f} xla {flops / t_base2 / 1e12:7.1f}; "
          f"{n_sets} sets)")
      del sets
  summary = {}
  for col in columns:
    rows = [r for r in results if r["column"] == col.name]
    large = [r["ratio"] for r in rows if (r["m"], r["n"], r["k"]) in LARGE]
    summary[col.name] = dict(geomean_ratio=_geomean([r["ratio"] for r in rows]),
                             large_ratios=large)
  # Residual vs our plain matmul on the same shapes (target: within 3%).
  plain = {(r["m"], r["n"], r["k"]): r["ours_s"] for r in results if r["column"] == "bf16"}
  for r in results:
    if r["column"] == "residual" and (r["m"], r["n"], r["k"]) in plain:
      r["residual_over_plain"] = r["ours_s"] / plain[(r["m"], r["n"], r["k"])]
  meta = dict(device=dev.device_kind, platform=dev.platform,
              date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              git_commit=_git_commit(), jax_version=jax.__version__,
              backend=jax_sm100.backend(), repeats=repeats)
  doc = dict(meta=meta, summary=summary, results=results)
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "bench.json"), "w") as f:
    json.dump(doc, f, indent=1)
  _print_table(doc, log)
  try:
    _plot(doc, os.path.join(out_dir, "bench.png"))
  except Exception as e:  # matplotlib missing or headless trouble: numbers still written
    log(f"(no chart: {type(e).__name__}: {e})")
  return doc


def _print_table(doc, log):
  meta = doc["meta"]
  log("")
  log(f"device {meta['device']}  jax {meta['jax_version']}  commit {meta['git_commit'][:12]}  "
      f"{meta['date']}  backend {meta['backend']}")
  log(f"{'column':9s} {'M x N x K':>22s} {'ours':>8s} {'XLA':>8s} {'ratio':>7s} {'res/plain':>9s}")
  for r in doc["results"]:
    rp = r.get("residual_over_plain")
    log(f"{r['column']:9s} {r['m']:6d} x{r['n']:6d} x{r['k']:6d} {r['ours_tflops']:8.1f} "
        f"{r['xla_tflops']:8.1f} {r['ratio']:7.3f} {'' if rp is None else f'{rp:9.3f}'}")
  for name, s in doc["summary"].items():
    large = ", ".join(f"{x:.3f}" for x in s["large_ratios"])
    log(f"{name:9s} geomean ours/XLA {s['geomean_ratio']:.3f}   large shapes: {large}")


def _plot(doc, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  cols = list(doc["summary"].keys())
  fig, axes = plt.subplots(len(cols), 1, figsize=(12, 3.6 * len(cols)), squeeze=False)
  for ax, name in zip(axes[:, 0], cols):
    rows = [r for r in doc["results"] if r["column"] == name]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["ours_tflops"] for r in rows], 0.4, label="jax_sm100")
    ax.bar(x + 0.2, [r["xla_tflops"] for r in rows], 0.4, label="XLA")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['m']}x{r['n']}x{r['k']}" for r in rows], rotation=30,
                       ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{name}: geomean ours/XLA {doc['summary'][name]['geomean_ratio']:.3f}")
    ax.legend(fontsize=8)
  meta = doc["meta"]
  fig.suptitle(f"{meta['device']}, jax {meta['jax_version']}, {meta['date']}, "
               f"commit {meta['git_commit'][:10]}", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--quick", action="store_true", help="a few shapes, fewer repeats")
  p.add_argument("--out", default="bench_out", help="directory for bench.json / bench.png")
  p.add_argument("--only", default="", help="comma-separated columns (bf16,fp16,residual,...)")
  p.add_argument("--repeats", type=int, default=0)
  args = p.parse_args(argv)
  shapes = QUICK if args.quick else SUITE
  cols = COLUMNS
  if args.only:
    want = set(args.only.split(","))
    cols = [c for c in COLUMNS if c.name in want]
  repeats = args.repeats or (5 if args.quick else 10)
  import jax_sm100
  if jax_sm100.backend() == "reference":
    print("warning: jax_sm100.backend() is 'reference': 'ours' is the pure-JAX path",
          file=sys.stderr)
  run(shapes, cols, repeats, args.out)


if __name__ == "__main__":
  main()
