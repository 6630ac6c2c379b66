"""A/B timing of two builds of jax_sm100 on one device (benchmarks/ab.sh drives it).

Two builds of one package cannot share a process (same module name, same FFI target
names registered with XLA), so each build is timed in its own processes: ab.sh
installs each into its own directory (pip install --target) and runs

  PYTHONPATH=<build dir> python benchmarks/ab.py measure --tag A --pass 1 --out ab.jsonl

once per build and pass, interleaving the builds (A B, then B A, ...) so that slow
drift of the machine hits both alike; then

  python benchmarks/ab.py summary ab.jsonl [--base A]

prints per shape the base's time over each other build's (> 1: that build is
faster), the same ratio normalised by XLA's time in the same process (jnp.dot in
bf16, the in-process drift reference), and the noise floor: the spread between
passes of one build (a ratio inside it is no difference).

Only jax_sm100's public API is used, so any two commits with the same public ops
compare. Suites (--suites): bf16 (matmul), residual (matmul_residual), fp8
(fp8_blockwise_matmul with transposed A scales), fp8_dot (the training step y, dx,
dw), quant (quantize_fp8_blockwise, 1x128 and 128x128). Timing: GPU time (CUPTI
kernel durations, through torch.profiler) when torch sees the GPU, else wall time
(differential jit). One JSON line per (suite, shape).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _torch, geomean, gpu_time_jax, n_sets_for, time_jax  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

SUITES = {
    "bf16": [(8192, 8192, 8192), (4096, 7168, 16384), (4096, 4096, 4096), (128, 7168, 4096),
             (3000, 5000, 2056)],
    "residual": [(4096, 4096, 4096), (3000, 5000, 2056)],
    "fp8": [(4096, 7168, 16384), (8192, 8192, 8192), (4096, 4096, 4096), (128, 7168, 4096)],
    "fp8_dot": [(4096, 7168, 2048), (4096, 2048, 7168)],   # (M, K, N)
    "quant": [(16384, 7168)],
}
ROUNDS = 3  # ours and the reference alternate, ROUNDS times; each reports its median


def _normal(key, shape, scale=1.0):
  return (scale * jax.random.normal(key, shape, jnp.float32)).astype(jnp.bfloat16)


def _cases(suite, shape):
  """(ours, reference, sets) for one shape of a suite: functions of one input set."""
  import jax_sm100
  keys = lambda n: jax.random.split(jax.random.PRNGKey(sum(shape)), n)  # noqa: E731
  if suite in ("bf16", "residual"):
    m, n, k = shape
    sets = [(_normal(a, (m, k)), _normal(b, (k, n)), _normal(c, (m, n)))
            for a, b, c in keys(3 * n_sets_for(m, n, k)).reshape(-1, 3, 2)]
    if suite == "bf16":
      return (lambda a, b, c: jax_sm100.matmul(a, b)), (lambda a, b, c: jnp.dot(a, b)), sets
    return ((lambda a, b, c: jax_sm100.matmul_residual(a, b, c)),
            (lambda a, b, c: jnp.dot(a, b) + c), sets)
  if suite == "fp8":
    m, n, k = shape
    q1 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)))
    q128 = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(128, 128)))
    sets = []
    for a, b in keys(2 * n_sets_for(m, n, k)).reshape(-1, 2, 2):
      x, w = _normal(a, (m, k)), _normal(b, (n, k))
      (xq, xs), (wq, ws) = q1(x), q128(w)
      sets.append((xq, xs.T, wq, ws, x, w.T))
    ours = lambda a, st, b, sb, x, wt: jax_sm100.fp8_blockwise_matmul(  # noqa: E731
        a, st, b, sb, a_scale_transposed=True)
    return ours, (lambda a, st, b, sb, x, wt: jnp.dot(x, wt)), sets
  if suite == "fp8_dot":
    m, k, n = shape

    def step(dot):
      def f(x, w, g):
        y, vjp = jax.vjp(dot, x, w)
        return (y,) + vjp(g)
      return f
    sets = [(_normal(a, (m, k)), _normal(b, (k, n), 0.05), _normal(c, (m, n)))
            for a, b, c in keys(3 * n_sets_for(m, n, k)).reshape(-1, 3, 2)]
    return step(jax_sm100.fp8_dot), step(jnp.dot), sets
  if suite == "quant":
    r, c = shape
    sets = [(_normal(a, (r, c)),) for a in keys(8)]
    ours = lambda x: (jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)),  # noqa: E731
                      jax_sm100.quantize_fp8_blockwise(x, block=(128, 128)))
    return ours, (lambda x: x + jnp.bfloat16(1)), sets
  raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")


def measure(args):
  import jax_sm100
  torch, why = _torch()
  timing = "gpu" if torch is not None else "wall"
  if torch is None:
    print(f"# no GPU time ({why}): wall time", file=sys.stderr)
  print(f"# {args.tag} pass {args.pass_}: jax_sm100 from {os.path.dirname(jax_sm100.__file__)}, "
        f"backend {jax_sm100.backend()}, {jax.devices()[0].device_kind}", file=sys.stderr)
  with open(args.out, "a") as out:
    for suite in args.suites.split(","):
      for shape in SUITES[suite]:
        ours, ref, sets = _cases(suite, shape)
        t = {"ours": [], "ref": []}
        for _ in range(ROUNDS):
          for name, fn in (("ours", ours), ("ref", ref)):
            sec = gpu_time_jax(torch, fn, sets) if torch is not None else time_jax(fn, sets, 5)
            t[name].append(sec * 1e6)
        row = {"tag": args.tag, "pass": args.pass_, "suite": suite, "shape": list(shape),
               "timing": timing, "ours_us": statistics.median(t["ours"]),
               "ref_us": statistics.median(t["ref"]), "ours_rounds_us": t["ours"]}
        out.write(json.dumps(row) + "\n")
        out.flush()
        print(f"{args.tag} pass {args.pass_} {suite:8s} {'x'.join(map(str, shape)):>17s}: "
              f"ours {row['ours_us']:9.1f} us, XLA reference {row['ref_us']:9.1f} us", flush=True)
        del sets


def summary(args):
  rows = [json.loads(line) for line in open(args.file) if line.startswith("{")]
  by = collections.defaultdict(lambda: collections.defaultdict(list))
  for r in rows:
    by[(r["suite"], tuple(r["shape"]))][r["tag"]].append(r)
  tags = sorted({r["tag"] for r in rows}, key=lambda t: (t != args.base, t))
  others = [t for t in tags if t != args.base]
  print(f"{'suite':8s} {'shape':>17s} " + " ".join(f"{t + ' us':>10s}" for t in tags) + "  " +
        " ".join(f"{args.base}/{t:<5s} {'(norm)':>7s}" for t in others) + "  noise")
  per_suite = collections.defaultdict(lambda: collections.defaultdict(list))
  for (suite, shape), t in by.items():
    med = {tag: statistics.median(x["ours_us"] for x in t[tag]) for tag in t}
    norm = {tag: statistics.median(x["ours_us"] / x["ref_us"] for x in t[tag]) for tag in t}
    # Noise floor: the spread of one build's passes, (max - min) / median, worst build.
    noise = max(((max(x["ours_us"] for x in t[tag]) - min(x["ours_us"] for x in t[tag]))
                 / med[tag] for tag in t if len(t[tag]) > 1), default=float("nan"))
    cells = []
    for o in others:
      if args.base in med and o in med:
        ratio, nratio = med[args.base] / med[o], norm[args.base] / norm[o]
        per_suite[suite][o].append((ratio, nratio))
        cells.append(f"{ratio:11.3f} {nratio:7.3f}")
      else:
        cells.append(f"{'-':>11s} {'-':>7s}")
    print(f"{suite:8s} {'x'.join(map(str, shape)):>17s} " +
          " ".join(f"{med[t]:10.1f}" if t in med else f"{'-':>10s}" for t in tags) + "  " +
          " ".join(cells) + f"  {noise:.3f}")
  for suite, res in per_suite.items():
    for o, pairs in res.items():
      print(f"{suite:8s} geomean {args.base}/{o}: {geomean([p[0] for p in pairs]):.3f} "
            f"(normalised by XLA in-process: {geomean([p[1] for p in pairs]):.3f})")
  print("(> 1: the build named after the slash is faster; noise: the spread between passes "
        "of one build, a difference inside it is none)")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = ap.add_subparsers(dest="cmd", required=True)
  m = sub.add_parser("measure", help="time the suites with the jax_sm100 on PYTHONPATH")
  m.add_argument("--tag", required=True)
  m.add_argument("--pass", dest="pass_", type=int, default=1)
  m.add_argument("--suites", default="bf16,residual,fp8,fp8_dot,quant")
  m.add_argument("--out", required=True, help="JSON lines file (appended)")
  s = sub.add_parser("summary", help="per-shape ratios from a measure file")
  s.add_argument("file")
  s.add_argument("--base", default="A")
  args = ap.parse_args(argv)
  return measure(args) if args.cmd == "measure" else summary(args)


if __name__ == "__main__":
  sys.exit(main())
