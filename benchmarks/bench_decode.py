"""Decode-shape (small M) bandwidth of the bf16 GEMM: how close `matmul` streams B to the
memory bandwidth a device copy reaches, beside XLA's `jnp.dot`, in one process.

Per shape (M x N x K, B is K x N bf16, read once): GPU time (CUPTI) of XLA's dot, our op as
dispatched, and our kernel forced onto each candidate tiling (tuning.gemm_candidates; the
split-K ones at the split the dispatch would give them, tuning.split_k_for), over
distinct input sets (B never L2-resident).
Bandwidth = (bytes of A + B + D) / time, as a fraction of a device copy's
(read + write bytes / time of XLA's elementwise negation of a 1 GiB buffer, the same
CUPTI measure). Two ceilings for any kernel that reads B once, on the same sets:
  read_b   XLA's jnp.sum(B) into float32 (reads B, writes a scalar): B's bytes / time
  copy_b   XLA's -B (reads and writes B): twice B's bytes / time

Usage (device, package installed):
  python3 benchmarks/bench_decode.py [--out decode.json] [--shapes 1x7168x4096,...]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (_torch, copy_bandwidth, git_commit, gpu_time_jax,  # noqa: E402
                    gpu_time_jax_per_call)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import bench, tuning  # noqa: E402
from jax_sm100 import _dispatch_table as dt  # noqa: E402

SHAPES = [(m, n, k) for m in (1, 16) for n, k in ((7168, 4096), (4096, 7168), (2048, 7168),
                                                  (1536, 7168), (28672, 4096), (24576, 1536))]


def run_shape(torch, m, n, k, log):
  def make(key):
    k1, k2 = jax.random.split(key)
    return (bench._normal(k1, (m, k), jnp.bfloat16), bench._normal(k2, (k, n), jnp.bfloat16))
  sets = bench.input_sets(m, n, k, make)
  jax.block_until_ready(sets)
  off = dict(autotune_cache=False)
  cols = {"xla": (jnp.dot, {}), "dispatched": (jax_sm100.matmul, off)}
  for t in tuning.gemm_candidates():
    cfg = tuning.candidate_config(t, m, n, k)
    name = dt.tiling_name(t) + (str(cfg.split_k) if len(t) > 3 else "")
    cols[name] = (jax_sm100.matmul, dict(gemm=cfg, **off))
  times = {}
  for name, (fn, settings) in cols.items():
    with tuning.override(**settings):
      times[name] = gpu_time_jax(torch, fn, sets, reps=5)
  nbytes = 2 * (m * k + k * n + m * n)
  moved = {c: nbytes for c in times}
  b_sets = [(b,) for _, b in sets]
  times["read_b"] = gpu_time_jax_per_call(torch, lambda b: jnp.sum(b, dtype=jnp.float32), b_sets,
                                          reps=5)
  moved["read_b"] = 2 * k * n
  times["copy_b"] = gpu_time_jax_per_call(torch, lambda b: -b, b_sets, reps=5)
  moved["copy_b"] = 4 * k * n
  row = dict(shape=[m, n, k], sets=len(sets), bytes=nbytes, bytes_moved=moved,
             gpu_us={c: t * 1e6 for c, t in times.items()},
             bandwidth_tbs={c: moved[c] / t / 1e12 for c, t in times.items()})
  log(f"{m}x{n}x{k}: " + "  ".join(f"{c} {t * 1e6:.1f} us ({moved[c] / t / 1e12:.2f} TB/s)"
                                   for c, t in times.items()))
  return row


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default=None)
  ap.add_argument("--shapes", default=None, help="MxNxK,... (default: the decode set)")
  args = ap.parse_args()
  torch, why = _torch()
  if torch is None:
    raise SystemExit(f"bench_decode needs torch for CUPTI GPU time: {why}")
  shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
            if args.shapes else SHAPES)
  dev = jax.devices()[0]
  bw, t = copy_bandwidth(torch)
  print(f"device {dev.device_kind}: device copy {bw / 1e12:.2f} TB/s ({t * 1e6:.0f} us for "
        f"1 GiB read + written)", flush=True)
  rows = [run_shape(torch, m, n, k, lambda s: print(s, flush=True)) for m, n, k in shapes]
  for r in rows:
    r["fraction_of_copy"] = {c: v * 1e12 / bw for c, v in r["bandwidth_tbs"].items()}
  out = dict(meta=dict(device=dev.device_kind, gpu_kind=dt.gpu_kind(dev),
                       jax_version=jax.__version__, git_commit=git_commit(),
                       date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"),
                       copy_tbs=bw / 1e12),
             rows=rows)
  for r in rows:
    m, n, k = r["shape"]
    f = r["fraction_of_copy"]
    print(f"{m}x{n}x{k}: of copy bandwidth: " + "  ".join(f"{c} {v:.2f}" for c, v in f.items()))
  if args.out:
    with open(args.out, "w") as fh:
      json.dump(out, fh, indent=1)


if __name__ == "__main__":
  main()
