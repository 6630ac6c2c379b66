"""What a fused bias + GELU epilogue costs: ours against cuBLASLt's, the public fused
epilogue on Hopper (torch._addmm_activation, CUBLASLT_EPILOGUE_GELU_BIAS), side by side in
one process (GPU time by CUPTI, distinct input sets).

Per shape (M, N, K), bf16, x (M, K), w (K, N), b (N,), gelu = the tanh form:
  ours:plain    jax_sm100.matmul(x, w)
  ours:fused    jax_sm100.matmul_bias(x, w, b, activation="gelu")
  ours:unfused  jax.nn.gelu(jax_sm100.matmul(x, w) + b): our GEMM, XLA's pass
                (the ours:* rows traced under tuning.override(dispatch="kernel"): our
                kernels, whatever the measured dispatch would pick)
  xla:fused     jax.nn.gelu(jnp.dot(x, w) + b): XLA end to end (its own fusion)
  lt:plain      torch.mm(x, w)
  lt:fused      torch._addmm_activation(b, x, w, use_gelu=True)
  lt:unfused    torch.nn.functional.gelu(torch.addmm(b, x, w), approximate="tanh")
Printed per shape: each library's fused time over its plain GEMM (the epilogue's cost),
its unfused time over its fused (what fusing saves), and cuBLASLt's fused time over ours.
Outputs are checked against each other first (relative error).

    python benchmarks/bench_epilogue_cublaslt.py [--shapes 8192x4096x4096,...] [--out F]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (_to_torch, git_commit, gpu_time_jax, gpu_time_torch,  # noqa: E402
                    normal_sets, require_torch)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import tuning  # noqa: E402

SHAPES = "8192x4096x4096,4096x14336x4096,4096x4096x14336,8192x4096x64"


def _kernel(f):
  """f traced with the measured dispatch forced to our kernel (the H200 table sends some
  of these plain products to XLA's dot)."""
  def g(*args):
    with tuning.override(dispatch="kernel"):
      return f(*args)
  return g


def jax_variants():
  return {"ours:plain": _kernel(lambda x, w, b: jax_sm100.matmul(x, w)),
          "ours:fused": _kernel(lambda x, w, b: jax_sm100.matmul_bias(x, w, b, activation="gelu")),
          "ours:unfused": _kernel(lambda x, w, b: jax.nn.gelu(jax_sm100.matmul(x, w) + b)),
          "xla:fused": lambda x, w, b: jax.nn.gelu(jnp.dot(x, w) + b)}


def torch_variants(torch):
  gelu = torch.nn.functional.gelu
  return {"lt:plain": lambda x, w, b: torch.mm(x, w),
          "lt:fused": lambda x, w, b: torch._addmm_activation(b, x, w, use_gelu=True),
          "lt:unfused": lambda x, w, b: gelu(torch.addmm(b, x, w), approximate="tanh")}


def rel_err(got, ref):
  got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
  return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--shapes", default=SHAPES)
  ap.add_argument("--sets", type=int, default=6)
  ap.add_argument("--out", default="")
  args = ap.parse_args()
  torch = require_torch("bench_epilogue_cublaslt")
  rec = dict(device=jax.devices()[0].device_kind, commit=git_commit(), torch=torch.__version__,
             date=datetime.date.today().isoformat(), gpu_us={}, rel_err={})
  for shape in args.shapes.split(","):
    m, n, k = map(int, shape.split("x"))
    sets = normal_sets(m + 3 * n + 7 * k, args.sets, [((m, k), jnp.bfloat16, 1.0),
                                                      ((k, n), jnp.bfloat16, k ** -0.5),
                                                      ((n,), jnp.bfloat16, 1.0)])
    # bf16 through float32 (exact): torch takes no ml_dtypes array.
    tsets = [tuple(_to_torch(torch, t.astype(jnp.float32)).to(torch.bfloat16) for t in s)
             for s in sets]
    jv, tv = jax_variants(), torch_variants(torch)
    ref = np.asarray(jax.jit(jv["ours:fused"])(*sets[0]).astype(jnp.float32))
    errs = {name: rel_err(jax.jit(f)(*sets[0]).astype(jnp.float32), ref)
            for name, f in jv.items() if name != "ours:plain"}
    errs.update({name: rel_err(f(*tsets[0]).float().cpu().numpy(), ref)
                 for name, f in tv.items() if name != "lt:plain"})
    row = {name: gpu_time_jax(torch, f, sets) * 1e6 for name, f in jv.items()}
    row.update({name: gpu_time_torch(torch, f, tsets) * 1e6 for name, f in tv.items()})
    rec["gpu_us"][shape], rec["rel_err"][shape] = row, errs
    print(f"{shape}: " + "  ".join(f"{v} {t:.1f}" for v, t in row.items()), flush=True)
    print(f"  epilogue cost (fused / plain): ours {row['ours:fused'] / row['ours:plain']:.3f}  "
          f"cuBLASLt {row['lt:fused'] / row['lt:plain']:.3f};  fusing saves (unfused / fused): "
          f"ours {row['ours:unfused'] / row['ours:fused']:.3f}  cuBLASLt "
          f"{row['lt:unfused'] / row['lt:fused']:.3f};  cuBLASLt fused / ours fused "
          f"{row['lt:fused'] / row['ours:fused']:.3f};  xla fused / ours fused "
          f"{row['xla:fused'] / row['ours:fused']:.3f}", flush=True)
    print("  rel err vs ours:fused: " + "  ".join(f"{k} {v:.1e}" for k, v in errs.items()), flush=True)
    del sets, tsets
  if args.out:
    with open(args.out, "w") as f:
      json.dump(rec, f, indent=1)


if __name__ == "__main__":
  main()
