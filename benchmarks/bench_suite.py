"""The bf16/fp16 GEMM suite (issue 31): XLA, ours as dispatched, and every compiled tiling of
ours forced, side by side in one process; and the dispatch table made from it.

    python benchmarks/bench_suite.py [--quick] [--ops matmul,matmul_residual,matmul_bias]
        [--dtypes bf16,fp16] [--shapes 4096x4096x4096,...] [--repeats 5] [--no-gpu-time]
        [--out suite.json] [--emit-table jax_sm100/_dispatch_data.json]
    python benchmarks/bench_suite.py --from suite.json[,more.json] [--replace-from newer.json,...]
        --emit-table jax_sm100/_dispatch_data.json
    python benchmarks/bench_suite.py --from-legacy docs/bench_sm90_h200.json --kinds H200,H100 \\
        --emit-table jax_sm100/_dispatch_data.json

Shapes (M x N x K): squares 512, 1000, 1024, 2048, 4096, 8192 and 3000x5000x700; LLM
projections with M in {1, 16, 64, 128, 512, 4096} and (N, K) in {(7168, 4096),
(4096, 7168), (2048, 7168), (28672, 4096), (1536, 7168), (24576, 1536)}; the narrow
products of a small MLP (examples/train_mlp.py: a 64-feature input layer, a 10-class
head and their gradients): 8192x4096x64, 8192x4096x10, 8192x10x4096, 4096x10x8192. Ops: matmul,
matmul_residual (alpha = beta = 1) and matmul_bias (bias + gelu: _dispatch_table
.BIAS_ACTIVATION), in bf16 and fp16. Columns of each row:

  xla         XLA's baseline: jnp.dot(a, b), for the residual jnp.dot(a, b) + c, for
              matmul_bias gelu(jnp.dot(a, b) + bias)
  xla_path    the residual / matmul_bias forced onto its XLA path (override(dispatch=
              "xla"): the reference formula, fp32 epilogue, one rounding); for matmul
              that path is the xla column's program, not timed twice
  dispatched  the op as the package dispatches it (shipped table; no autotune cache)
  128x256c1.. the op forced onto each tiling the device's GEMM kernel is compiled for

Wall time: jax_sm100.bench.time_runs (one jit over distinct input sets, the columns
alternating call by call, median of --repeats). GPU time (when torch with CUDA imports):
the kernels' own durations recorded by CUPTI (common.cupti_gpu_events), one profiling
window per row, the columns told apart by a marker kernel launched between them.
Ratios are XLA time / ours (> 1: ours is faster). --emit-table turns the rows into the
shipped dispatch table's entries for this GPU kind (jax_sm100._dispatch_table
.build_entries: per shape class, our best tiling where its worst ratio over the class
reaches --threshold, else XLA), keeping the other kinds already in the file.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (sets XLA_PYTHON_CLIENT_PREALLOCATE before jax starts)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _dispatch_table as dt  # noqa: E402
from jax_sm100 import bench, tuning  # noqa: E402
from jax_sm100.autotune import _op_and_sets as _autotune_op_and_sets  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQUARES = [(512, 512, 512), (1000, 1000, 1000), (1024, 1024, 1024), (2048, 2048, 2048),
           (3000, 5000, 700), (4096, 4096, 4096), (8192, 8192, 8192)]
LLM_M = (1, 16, 64, 128, 512, 4096)
LLM_NK = ((7168, 4096), (4096, 7168), (2048, 7168), (28672, 4096), (1536, 7168),
          (24576, 1536))
# Classes no square or projection reaches: short K (the input layer, the head's input
# gradient) and a 10-wide N (the head and its weight gradient).
NARROW = [(8192, 4096, 64), (8192, 4096, 10), (8192, 10, 4096), (4096, 10, 8192)]
SHAPES = SQUARES + [(m, n, k) for m in LLM_M for n, k in LLM_NK] + NARROW
QUICK = [(1000, 1000, 1000), (4096, 4096, 4096)] + [
    (m, n, k) for m in (16, 128, 4096) for n, k in ((7168, 4096), (24576, 1536))]
DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16}
OPS = dt.OPS


# XLA's baseline program per op (ours and the operand sets: jax_sm100.autotune's, so the
# suite and a user's autotune time the same calls on the same data).
XLA_BASELINE = {
    "matmul": jnp.dot,
    "matmul_residual": lambda a, b, c: jnp.dot(a, b) + c,
    "matmul_bias": lambda a, b, bias: jax.nn.gelu(jnp.dot(a, b) + bias),
}
assert dt.BIAS_ACTIVATION == "gelu"  # XLA_BASELINE["matmul_bias"] is XLA's bf16 gelu layer


def _op_and_sets(op, dtype, m, n, k):
  """(ours, XLA baseline, input sets) of one row."""
  ours, sets = _autotune_op_and_sets(op, dtype, m, n, k, 1)
  jax.block_until_ready(sets)
  return ours, XLA_BASELINE[op], sets


def _compile(fn, sets, settings):
  with tuning.override(**settings):
    return bench.over_sets(fn).lower(sets).compile()


def _decision(fn, args, **settings):
  """(path, GemmConfig or None, why) of the op's first product under settings."""
  with tuning.override(**settings):
    d = tuning.explain(fn, *args)[0]
  return d.path, d.config, d.why


def _name(cfg, shape):
  """The suite's column of a config on an m x n x k shape ('64x64c1k' for a split-K
  config whose split is split_k_for the shape's)."""
  if cfg is None:
    return None
  t = (cfg.block_m, cfg.block_n, cfg.cluster_m)
  if cfg.split_k > 1:
    auto = tuning.candidate_config(t + (0,), *shape, 1)
    t += (0 if auto.split_k == cfg.split_k else cfg.split_k,)
  return dt.tiling_name(t)


def split_at_markers(events, n):
  """Summed durations (us) of the GPU events between consecutive marker kernels (torch's
  at::native kernels; XLA never launches one), in time order; None unless there are
  exactly n markers."""
  out, acc = [], 0.0
  for e in sorted(events, key=lambda e: float(e["ts"])):
    if "at::native" in e.get("name", ""):
      out.append(acc)
      acc = 0.0
    else:
      acc += float(e["dur"])
  return out if len(out) == n else None


def gpu_times(torch, runs, sets, reps=3):
  """GPU seconds per call of each run, from one CUPTI window: after each run's calls
  (synchronized) a torch fill kernel marks the boundary."""
  marker = torch.zeros(1, device="cuda")

  def run_all():
    for i, run in enumerate(runs):
      for _ in range(reps):
        jax.block_until_ready(run(sets))
      marker.fill_(float(i + 1))
      torch.cuda.synchronize()
  us = split_at_markers(common.cupti_gpu_events(torch, run_all, 1), len(runs))
  return None if us is None else [t * 1e-6 / (reps * len(sets)) for t in us]


def run_row(op, dname, shape, tilings, repeats, torch, pool, log):
  m, n, k = shape
  dtype = DTYPES[dname]
  t0 = time.perf_counter()
  ours, base, sets = _op_and_sets(op, dtype, m, n, k)
  off = dict(autotune_cache=False)
  path, cfg, why = _decision(ours, sets[0], **off)
  heuristic = _name(_decision(ours, sets[0], dispatch="heuristic", **off)[1], shape)
  cols = [("xla", base, {})]
  if op != "matmul":
    cols.append(("xla_path", ours, dict(dispatch="xla", **off)))
  cols += [(dt.tiling_name(t), ours, dict(gemm=tuning.candidate_config(t, m, n, k), **off))
           for t in tilings]
  names = [c for c, _, _ in cols]
  # The dispatched program is one of the columns' (the XLA path, or a tiling with the
  # default group_m): its numbers are that column's, not compiled and timed twice.
  if path == "xla":
    same = "xla_path" if op != "matmul" else "xla"
  elif cfg is not None and cfg == tuning.GemmConfig(cfg.block_m, cfg.block_n, cfg.cluster_m,
                                                   split_k=cfg.split_k):
    same = _name(cfg, shape)
  else:
    same = None
  if same not in names:
    cols.append(("dispatched", ours, off))
    names.append("dispatched")
  futures = [pool.submit(_compile, f, sets, s) for _, f, s in cols]
  runs = [f.result() for f in futures]
  wall = dict(zip(names, bench.time_runs(runs, sets, repeats, warmup=1)))
  gpu = gpu_times(torch, runs, sets) if torch is not None else None
  gpu = None if gpu is None else dict(zip(names, gpu))
  if same in names:
    wall["dispatched"] = wall[same]
    if gpu is not None:
      gpu["dispatched"] = gpu[same]
  row = dict(op=op, dtype=np.dtype(dtype).name, shape=[m, n, k, 1], sets=len(sets),
             heuristic=heuristic, dispatch=dict(path=path, tiling=_name(cfg, shape), why=why,
                                                same_program_as=same if same in names else None),
             wall_us={c: t * 1e6 for c, t in wall.items()},
             seconds=round(time.perf_counter() - t0, 2))
  if gpu is not None:
    row["gpu_us"] = {c: t * 1e6 for c, t in gpu.items()}
  best = min((c for c in names if dt.parse_tiling(c)), key=lambda c: wall[c])
  row["ratio"] = dict(dispatched_wall=wall["xla"] / wall["dispatched"],
                      best_tiling=best, best_tiling_wall=wall["xla"] / wall[best])
  if gpu is not None:
    g = row["gpu_us"]
    row["ratio"]["dispatched_gpu"] = g["xla"] / g["dispatched"]
  log(_line(row))
  return row


def _line(r):
  m, n, k, _ = r["shape"]
  w, q = r["wall_us"], r["ratio"]
  gpu = f" gpu {q['dispatched_gpu']:.3f}" if "dispatched_gpu" in q else ""
  return (f"{r['op']:15s} {r['dtype']:8s} {f'{m}x{n}x{k}':>17s}  xla {w['xla']:9.1f} us  "
          f"dispatched {w['dispatched']:9.1f} us ({r['dispatch']['path']:6s}) "
          f"ratio {q['dispatched_wall']:.3f}{gpu}  best {q['best_tiling']} "
          f"{q['best_tiling_wall']:.3f}  heuristic {r['heuristic']}")


def summarize(rows, log=print):
  out = {}
  for op in OPS:
    for dname in ("bfloat16", "float16"):
      sel = [r for r in rows if r["op"] == op and r["dtype"] == dname]
      if not sel:
        continue
      ratios = [r["ratio"]["dispatched_wall"] for r in sel]
      s = dict(geomean_wall=dt.geomean(ratios), worst_wall=min(ratios),
               below_098=sum(x < 0.98 for x in ratios), shapes=len(sel))
      gr = [r["ratio"]["dispatched_gpu"] for r in sel if "dispatched_gpu" in r["ratio"]]
      if gr:
        s.update(geomean_gpu=dt.geomean(gr), worst_gpu=min(gr))
      out[f"{op}/{dname}"] = s
      log(f"{op:15s} {dname:8s} dispatched / XLA: geomean {s['geomean_wall']:.3f} (wall)"
          + (f", {s['geomean_gpu']:.3f} (gpu)" if gr else "")
          + f", worst {s['worst_wall']:.3f}, {s['below_098']} of {len(sel)} below 0.98")
  return out


def run_suite(args, log=print):
  dev = jax.devices()[0]
  backend = jax_sm100.backend()
  if backend not in ("sm90", "sm100"):
    raise SystemExit(f"bench_suite needs a GPU with the kernels; backend() is {backend!r}")
  shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
            if args.shapes else (QUICK if args.quick else SHAPES))
  tilings = tuning.gemm_candidates(dev)
  torch = None
  if not args.no_gpu_time:
    torch, why = common._torch()
    if torch is None:
      log(f"no GPU time: {why}")
  meta = dict(device=dev.device_kind, gpu_kind=dt.gpu_kind(dev), sms=tuning.sm_count(dev),
              backend=backend, jax_version=jax.__version__,
              jax_sm100_version=jax_sm100.__version__, git_commit=common.git_commit(),
              date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              repeats=args.repeats, tilings=[dt.tiling_name(t) for t in tilings],
              gpu_time=torch is not None)
  log(f"device {meta['device']} ({meta['gpu_kind']}, {meta['sms']} SMs)  jax {jax.__version__}"
      f"  backend {backend}  {len(shapes)} shapes")
  rows, t0 = [], time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(max(1, args.compile_threads)) as pool:
    for op in args.ops.split(","):
      for dname in args.dtypes.split(","):
        for shape in shapes:
          rows.append(run_row(op, dname, shape, tilings, args.repeats, torch, pool, log))
          if args.out:  # every row so far, so that a run cut short keeps what it measured
            _write(args.out, dict(meta=dict(meta, partial=True), rows=rows))
  meta["seconds"] = round(time.perf_counter() - t0, 1)
  return dict(meta=meta, summary=summarize(rows, log), rows=rows)


def _write(path, suite):
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(suite, f, indent=1)
  os.replace(tmp, path)


def merge_suites(suites, paths):
  """One suite of the rows of several, measured on one GPU kind (the first's meta; its
  source names every file)."""
  meta = dict(suites[0]["meta"])
  for s in suites[1:]:
    if (s["meta"]["gpu_kind"], s["meta"]["sms"]) != (meta["gpu_kind"], meta["sms"]):
      raise SystemExit(f"suites of different GPUs: {meta['gpu_kind']} and {s['meta']['gpu_kind']}")
  if len(suites) > 1:
    first = [meta["legacy"]] if meta.get("legacy") else []
    meta["legacy"] = " + ".join(first + [os.path.relpath(os.path.abspath(p), _REPO)
                                         for p in paths])
  return dict(meta=meta, rows=[r for s in suites for r in s["rows"]])


def _row_key(r):
  return (r["op"], r["dtype"], tuple(r["shape"][:3]), r["shape"][3] if len(r["shape"]) > 3 else 1)


def supersede(suite, newer, paths):
  """The suite with every row of a (op, dtype, shape) that `newer` measured replaced by
  newer's rows: re-measured shapes (after a kernel change) displace the older runs' rows
  of those shapes only. `newer`: suites of the same GPU kind, read from `paths`."""
  fresh = merge_suites(newer, paths)
  if (fresh["meta"]["gpu_kind"], fresh["meta"]["sms"]) != (suite["meta"]["gpu_kind"],
                                                           suite["meta"]["sms"]):
    raise SystemExit("--replace-from: suites of a different GPU")
  keys = {_row_key(r) for r in fresh["rows"]}
  meta = dict(suite["meta"])
  names = " + ".join(os.path.relpath(os.path.abspath(p), _REPO) for p in paths)
  meta["legacy"] = (f"{meta.get('legacy') or 'benchmarks/bench_suite.py'}, the rows of "
                    f"its shapes in {names} replaced by those")
  return dict(meta=meta, rows=[r for r in suite["rows"] if _row_key(r) not in keys]
              + fresh["rows"])


def from_legacy(path):
  """The rows of a `python -m jax_sm100.bench` JSON of the older full suite (our default
  configuration against XLA, wall time) in this suite's form: column 'heuristic' for
  ours; its residual baseline is not the op's XLA path, so no residual row gets one."""
  with open(path) as f:
    old = json.load(f)
  ops = {"bf16": ("matmul", "bfloat16"), "fp16": ("matmul", "float16"),
         "residual": ("matmul_residual", "bfloat16")}
  rows = []
  for r in old["results"]:
    if r["column"] not in ops:
      continue
    op, dname = ops[r["column"]]
    rows.append(dict(op=op, dtype=dname, shape=[r["m"], r["n"], r["k"], 1],
                     wall_us=dict(xla=r["xla_s"] * 1e6, heuristic=r["ours_s"] * 1e6)))
  m = old["meta"]
  meta = dict(device=m["device"], gpu_kind=dt.gpu_kind(_Dev(m["device"])), sms=132,
              git_commit=m.get("git_commit", "unknown"), date=m.get("date", ""),
              legacy=os.path.relpath(os.path.abspath(path), _REPO))
  return dict(meta=meta, rows=rows)


class _Dev:
  platform = "gpu"

  def __init__(self, kind):
    self.device_kind = kind


def dump_table(table) -> str:
  """The table as JSON with one line per class entry (readable diffs)."""
  one = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
  out = ["{"]
  for key in ("format", "about", "classes"):
    out.append(f" {one(key)}: {one(table[key])},")
  out.append(' "kinds": {')
  kinds = sorted(table["kinds"])
  for i, kind in enumerate(kinds):
    kt = table["kinds"][kind]
    out.append(f"  {one(kind)}: {{")
    for key in sorted(k for k in kt if k != "entries"):
      out.append(f"   {one(key)}: {one(kt[key])},")
    out.append('   "entries": {')
    ops = sorted(kt["entries"])
    for j, op in enumerate(ops):
      out.append(f"    {one(op)}: {{")
      dts = sorted(kt["entries"][op])
      for d, dname in enumerate(dts):
        out.append(f"     {one(dname)}: {{")
        cls = kt["entries"][op][dname]
        keys = sorted(cls)
        for c, ck in enumerate(keys):
          out.append(f"      {one(ck)}: {one(cls[ck])}" + ("," if c < len(keys) - 1 else ""))
        out.append("     }" + ("," if d < len(dts) - 1 else ""))
      out.append("    }" + ("," if j < len(ops) - 1 else ""))
    out.append("   }")
    out.append("  }" + ("," if i < len(kinds) - 1 else ""))
  out += [" }", "}", ""]
  text = "\n".join(out)
  assert json.loads(text) == json.loads(json.dumps(table))
  return text


def emit_table(suite, path, kinds, threshold, metric, log=print):
  """Writes the suite's entries into the dispatch table at `path` under `kinds` (default:
  the suite's GPU kind), keeping the other kinds."""
  meta = suite["meta"]
  table = (json.load(open(path)) if os.path.exists(path) else
           dict(format=dt.FORMAT, classes=dt.DEFAULT_CLASSES, kinds={}))
  table.setdefault("classes", dt.DEFAULT_CLASSES)
  entries = dt.build_entries(suite["rows"], sms=meta["sms"], classes=table["classes"],
                             threshold=threshold, metric=metric)
  src = (f"{meta.get('legacy') or 'benchmarks/bench_suite.py'} on {meta['device']}"
         f" at {meta.get('git_commit', 'unknown')} ({meta.get('date', '')}), {metric}")
  for kind in kinds or [meta["gpu_kind"]]:
    fp8 = table["kinds"].get(kind, {}).get("fp8")  # bench_fp8_suite.py's, kept
    table["kinds"][kind] = dict(measured_on=meta["gpu_kind"], source=src, metric=metric,
                                threshold=threshold, entries=entries)
    if fp8 is not None:
      table["kinds"][kind]["fp8"] = fp8
  table["about"] = ("jax_sm100's measured dispatch (jax_sm100/_dispatch_table.py): per GPU "
                    "kind, op and input dtype, the shape class's path (kernel with a tiling, "
                    "or xla), made by benchmarks/bench_suite.py --emit-table")
  problems = dt.check_table(table)
  if problems:
    raise SystemExit("invalid table: " + "; ".join(problems))
  with open(path, "w") as f:
    f.write(dump_table(table))
  n = sum(len(v) for d in entries.values() for v in d.values())
  xla = sum(e["path"] == "xla" for d in entries.values() for v in d.values() for e in v.values())
  log(f"wrote {path}: {', '.join(kinds or [meta['gpu_kind']])}: {n} classes, {xla} to xla")


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--quick", action="store_true", help="a few shapes")
  p.add_argument("--shapes", default="", help="MxNxK,... instead of the suite")
  p.add_argument("--ops", default=",".join(OPS))
  p.add_argument("--dtypes", default="bf16,fp16")
  p.add_argument("--repeats", type=int, default=5)
  p.add_argument("--compile-threads", type=int, default=8)
  p.add_argument("--no-gpu-time", action="store_true", help="wall time only (no torch)")
  p.add_argument("--out", default="", help="JSON file for every number")
  p.add_argument("--from", dest="src", default="", help="suite JSONs (comma-separated) instead "
                 "of running; with --from-legacy too, all their rows together")
  p.add_argument("--from-legacy", default="", help="an older `jax_sm100.bench` full JSON")
  p.add_argument("--replace-from", default="", help="suite JSONs (comma-separated) whose "
                 "shapes' rows replace those of --from (shapes re-measured after a change)")
  p.add_argument("--emit-table", default="", help="the dispatch table file to write")
  p.add_argument("--kinds", default="", help="GPU kinds to write (default: the measured one)")
  p.add_argument("--threshold", type=float, default=0.98)
  p.add_argument("--metric", default="wall_us", choices=("wall_us", "gpu_us"))
  args = p.parse_args(argv)
  suites = [from_legacy(args.from_legacy)] if args.from_legacy else []
  for path in filter(None, args.src.split(",")):
    with open(path) as f:
      suites.append(json.load(f))
  if suites:
    suite = merge_suites(suites, args.src.split(",") if args.src else [])
    if args.replace_from:
      paths = args.replace_from.split(",")
      suite = supersede(suite, [json.load(open(q)) for q in paths], paths)
  else:
    suite = run_suite(args)
    if args.out:
      _write(args.out, suite)
  if args.emit_table:
    emit_table(suite, args.emit_table, [k for k in args.kinds.split(",") if k],
               args.threshold, args.metric)


if __name__ == "__main__":
  main()
