"""Timing of the bf16 GEMM under chosen tile configurations, against XLA's jnp.dot.

  python3 benchmarks/bf16_configs.py "M,N,K[,CONFIG[,residual]]" ...

CONFIG: "BLOCK_MxBLOCK_N[cCLUSTER_M][gGROUP_M]" (e.g. 128x256c2, 64x64, 128x128c2g16), or
"default" / omitted: the default choice (jax_sm100.tuning.gemm_config); residual: 1 times
matmul_residual (beta * c epilogue). Wall time, one jit over several input sets, median of 7;
ours is timed twice around XLA.
"""
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_sm100
from jax_sm100 import tuning


def parse_config(spec):
  if spec in ("", "default"):
    return None
  mt = re.fullmatch(r"(\d+)x(\d+)(?:c(\d+))?(?:g(\d+))?", spec)
  if not mt:
    raise SystemExit(f"bad config {spec!r}: expected e.g. 128x256c2 or 64x64g16")
  bm, bn, cl, g = mt.groups()
  return tuning.GemmConfig(int(bm), int(bn), int(cl or 1), int(g or 8))


def timeit(fn, sets, reps=7):
  run = jax.jit(lambda s: [fn(*x) for x in s])
  jax.block_until_ready(run(sets))
  jax.block_until_ready(run(sets))
  ts = []
  for _ in range(reps):
    t = time.perf_counter()
    jax.block_until_ready(run(sets))
    ts.append(time.perf_counter() - t)
  return float(np.median(ts)) / len(sets)


def main():
  for spec in sys.argv[1:]:
    parts = spec.split(",")
    m, n, k = (int(v) for v in parts[:3])
    cfg = parse_config(parts[3] if len(parts) > 3 else "")
    res = len(parts) > 4 and parts[4] == "1"
    n_sets = max(4, min(32, int(2e12 // (2 * m * n * k)),
                        int((3 << 30) // ((m * k + k * n + 2 * m * n) * 2))))
    ks = jax.random.split(jax.random.key(m + n + k), 3 * n_sets)
    sets = [(jax.random.normal(ks[3 * i], (m, k), jnp.bfloat16),
             jax.random.normal(ks[3 * i + 1], (k, n), jnp.bfloat16),
             jax.random.normal(ks[3 * i + 2], (m, n), jnp.bfloat16)) for i in range(n_sets)]
    if res:
      ours = lambda a, b, c: jax_sm100.matmul_residual(a, b, c)  # noqa: E731
      xla = lambda a, b, c: jnp.dot(a, b) + c  # noqa: E731
    else:
      ours = lambda a, b, c: jax_sm100.matmul(a, b)  # noqa: E731
      xla = lambda a, b, c: jnp.dot(a, b)  # noqa: E731
    with tuning.override(gemm=cfg):  # each timeit traces a fresh jit
      t1 = timeit(ours, sets)
      t2 = timeit(xla, sets)
      t3 = timeit(ours, sets)
    f = 2 * m * n * k
    used = cfg or tuning.gemm_config(m, n, k)
    print(f"{spec:28s} {used}: ours {f / t1 / 1e12:7.1f} / {f / t3 / 1e12:7.1f}  "
          f"xla {f / t2 / 1e12:7.1f} TF/s  ratio {t2 / t1:.3f}", flush=True)


if __name__ == "__main__":
  main()
