"""The activation-backward GEMM (FFI target jax_sm100_gemm_dact) against the unfused
backward it replaces, side by side in one process (GPU time by CUPTI, with torch).

For dz = (g @ W^T) * act'(z) and db = sum(dz) over rows, per shape (M, N, K): g (M, K),
W (N, K) (so g @ W^T is trans_b), z (M, N):
  xla         XLA's dot, then XLA's pass for dz and its column sums (what an unfused
              backward runs where the dispatch sends the product to XLA)
  gemm        our plain GEMM (jax_sm100_gemm) then the same XLA pass
  formula     the launch layer's formula (what mlp runs without the kernel), as XLA
              compiles it: the fp32 product times act'(z), rounded, and its column sums
  dot_only    XLA's dot alone (the product without the activation's backward)
  dact:<tile> our dact kernel with the bias gradient, per tiling BMxBNcCLUSTER
  nodb:<tile> the same without the bias gradient (its column-sum atomics off)
  plain:<tile> our plain GEMM g @ W^T per tiling (what the epilogue adds to)
  bias:<tile> the forward layer's kernel on the same product: z = g @ W^T + b and
              act(z), both written (jax_sm100_gemm_bias with pre)

    python benchmarks/bench_dact.py [--shapes 8192x4096x4096,8192x4096x16] [--act gelu]
        [--out dact.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import git_commit, gpu_time_jax, normal_sets, require_torch  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _activations  # noqa: E402
from jax_sm100._launch import dact as _launch_dact  # noqa: E402

TILINGS = ((128, 256, 1), (128, 256, 2))


def _attrs(block_m, block_n, cluster_m, **kw):
  return dict(trans_a=False, trans_b=True, block_m=np.int32(block_m), block_n=np.int32(block_n),
              cluster_m=np.int32(cluster_m), group_m=np.int32(8), split_k=np.int32(1), **kw)


def variants(m, n, k, act):
  name = _activations.canonical("bench", act)
  code = np.int32(_activations.CODES[name])

  def unfused(prod):
    def f(g, w, z):
      x = prod(g, w).astype(jnp.float32) * _activations.derivative(name, z)
      dz = jax.lax.optimization_barrier(x.astype(z.dtype))
      return dz, jnp.sum(dz.astype(jnp.float32), axis=0)
    return f

  def xla_dot(g, w):
    return jnp.dot(g, w.T, preferred_element_type=jnp.float32).astype(g.dtype)

  def our_gemm(g, w):
    return jax.ffi.ffi_call("jax_sm100_gemm", jax.ShapeDtypeStruct((m, n), g.dtype))(
        g, w, **_attrs(128, 256, 2))

  formula = lambda g, w, z: _launch_dact.reference(g, w, z, False, True, name)
  out = {"xla": unfused(xla_dot), "gemm": unfused(our_gemm), "formula": formula,
         "dot_only": lambda g, w, z: xla_dot(g, w)}
  for t in TILINGS:
    tag_t = "%dx%dc%d" % t
    for wants, tag in ((True, "dact"), (False, "nodb")):
      res = (jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
             jax.ShapeDtypeStruct((n,) if wants else (0,), jnp.float32))
      out[f"{tag}:{tag_t}"] = (lambda res, t: lambda g, w, z: jax.ffi.ffi_call(
          "jax_sm100_gemm_dact", res)(g, w, z, **_attrs(*t, activation=code)))(res, t)
    out[f"plain:{tag_t}"] = (lambda t: lambda g, w, z: jax.ffi.ffi_call(
        "jax_sm100_gemm", jax.ShapeDtypeStruct((m, n), g.dtype))(g, w, **_attrs(*t)))(t)
    two = (jax.ShapeDtypeStruct((m, n), jnp.bfloat16),) * 2
    out[f"bias:{tag_t}"] = (lambda t: lambda g, w, z: jax.ffi.ffi_call("jax_sm100_gemm_bias", two)(
        g, w, z[0].astype(jnp.float32), **_attrs(*t, activation=code)))(t)
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--shapes", default="8192x4096x4096,8192x4096x16,4096x14336x4096")
  ap.add_argument("--act", default="gelu")
  ap.add_argument("--sets", type=int, default=3)
  ap.add_argument("--out", default="")
  args = ap.parse_args()
  torch = require_torch("bench_dact")
  rec = dict(device=jax.devices()[0].device_kind, commit=git_commit(), act=args.act,
             date=datetime.date.today().isoformat(), gpu_us={})
  for shape in args.shapes.split(","):
    m, n, k = map(int, shape.split("x"))
    sets = normal_sets(m + n + k, args.sets, [((m, k), jnp.bfloat16, 1.0),
                                              ((n, k), jnp.bfloat16, k ** -0.5),
                                              ((m, n), jnp.bfloat16, 1.0)])
    row = {}
    for name, f in variants(m, n, k, args.act).items():
      row[name] = gpu_time_jax(torch, f, sets) * 1e6
    rec["gpu_us"][shape] = row
    base = row["xla"]
    print(f"{shape}: " + "  ".join(f"{k} {v:.1f} us ({base / v:.3f}x)" for k, v in row.items()),
          flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump(rec, f, indent=1)


if __name__ == "__main__":
  main()
