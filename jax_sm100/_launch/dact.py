"""Launch of the activation-backward GEMM, or its formula.

  gemm_dact: (d, dbias) with x = (op(a) @ op(b)) * act'(c) in fp32,  target jax_sm100_gemm_dact
             d = round(x) to c's dtype, dbias = the fp32 column sums of x

The input gradient of a layer below an activation in one kernel: for y = act(z) feeding
a product with W, dz = (g @ W^T) * act'(z) and the bias gradient sum(dz) come out of the
GEMM that computes g @ W^T, instead of that GEMM's write of g and a pass of its own that
reads g and z and writes dz (jax_sm100.mlp's backward).

a, b, the transpose flags and TMA padding are gemm.py's (gemm._aligned_launch pads c with
d; the padded rows / columns of d and dbias are sliced off: padded K is exact and padded
rows or columns are zero products). Tile configuration: tuning.resolve_gemm's choice for
the product for group_m; the tile is the dact kernel's own, 128x256, in CTA pairs unless
M fits one tile (dact_config).

  * vmap: the formula on the batch (the kernel sums dbias over every batch entry; a
    vmapped call wants one row of sums per entry).
  * Partitioning: M (rows) and N shard; dbias is the psum of each shard's column sums
    over the mesh axes of M (partition.Spec.row_sums). K stays whole.
  * Backends without the kernel (CPUs without cpu_ffi; sm100 while the kernel's first-use
    self-test, family gemm_dact, has not passed) take the formula, `reference` below.
    The sm_100a kernel takes the same tilings.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jax_sm100 import _activations, _explain, tuning
from jax_sm100._backend import Context
from jax_sm100._launch import gemm as _gemm
from jax_sm100._launch import partition

TARGET = "jax_sm100_gemm_dact"


def _scaled_product(a, b, c, trans_a: bool, trans_b: bool, name: str):
  """x = (op(a) @ op(b), fp32 accumulation) * act'(c) in fp32."""
  if trans_a:
    a = jnp.swapaxes(a, -1, -2)
  if trans_b:
    b = jnp.swapaxes(b, -1, -2)
  return jnp.matmul(a, b, preferred_element_type=jnp.float32) * _activations.derivative(name, c)


def reference(a, b, c, trans_a: bool, trans_b: bool, name: str):
  """(d, dbias) in plain jax.numpy: x = _scaled_product, d = x rounded once to c's dtype,
  dbias = sum of x over every axis but the last."""
  x = _scaled_product(a, b, c, trans_a, trans_b, name)
  return x.astype(c.dtype), jnp.sum(x, axis=tuple(range(x.ndim - 1)))


def why_not_kernel(ctx: Context, a, b, c, name: str):
  """None when the call runs the kernel, else a function returning why it takes the
  formula: gemm.why_not_kernel's reasons, c of another dtype than the inputs, no
  activation."""
  why = _gemm.why_not_kernel(ctx, TARGET, a, b, c.dtype, c)
  if why is not None:
    return why
  if c.dtype != a.dtype:
    return lambda: f"c is {c.dtype.name}, the inputs {a.dtype.name}: the kernel writes their dtype"
  if name == "none":
    return lambda: "no activation: the plain GEMM computes dz"
  return None


def dact_config(cfg: tuning.GemmConfig, m: int):
  """The dact kernel's tiling: 128x256, in CTA pairs (B multicast) unless one 128-row
  tile holds M, with the plain product's group_m (every K: a short-K kernel of its own,
  persistent mma.sync over 64x256 tiles, measured slower once this kernel's column sums
  took a butterfly: docs/experiments.md). Measured on an H200
  (benchmarks/bench_dact.py, 8192x4096 by K 16 / 4096 and 4096x14336x4096): pairs and
  single CTAs within 1% of each other (pairs 0.3-3% faster with one atomic per warp, 0.1-0.8%
  slower with one per tile: noise at this size, single CTAs kept for one-tile M),
  128x128 tiles 6-12% slower (not compiled)."""
  return tuning.GemmConfig(128, 256, 2 if m > 128 else 1, cfg.group_m, 1)


def _spec(a, b, c, trans_a, trans_b, with_sums: bool):
  """gemm.py's factors with K whole, c sharing d's, dbias ("n",) summed over the rows
  (without the sums: an empty (0,) result, not sharded)."""
  m, n, _ = _gemm._dims(a, b, trans_a, trans_b)
  out = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])) + (m, n)
  base = partition.gemm_spec(a.shape, b.shape, out, trans_a, trans_b, c.shape)
  whole_k = lambda dims: tuple(None if d == "k" else d for d in dims)
  operands = tuple(whole_k(d) for d in base.operands)
  if not with_sums:
    return partition.Spec(operands, (base.results[0], (None,)), op="mlp")
  return partition.Spec(operands, (base.results[0], ("n",)), op="mlp", row_sums=(1,))


@_explain.launch_builder
def _kernel(trans_a: bool, trans_b: bool, name: str, with_sums: bool, settings):
  """The launch for one static configuration: (a, b, c) -> (d, dbias), dbias (0,) when
  the sums are not wanted (the kernel then skips them: no reduction, no atomics)."""
  code = _activations.CODES[name]

  def local(a, b, c):
    n = c.shape[-1]
    sums = []

    def launch(ops, out):  # gemm._aligned_launch's callback: ops padded, out d's struct
      dbias = jax.ShapeDtypeStruct((out.shape[-1] if with_sums else 0,), jnp.float32)
      d, db = _gemm._launch(TARGET, list(ops), (out, dbias), trans_a, trans_b, settings,
                            residual=True,
                            tiling=dact_config,
                            activation=np.int32(code))
      sums.append(db)
      return d

    d = _gemm._aligned_launch(a, b, c, trans_a, trans_b, c.dtype, launch)
    return d, sums[0][:n]

  @custom_vmap
  def call(a, b, c):
    return partition.sharded_call(local, _spec(a, b, c, trans_a, trans_b, with_sums), a, b, c)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b, c):
    if not any(in_batched):
      return call(a, b, c), (False, False)
    a, b, c = _gemm._to_front_batch(in_batched, [a, b, c])
    # One row of column sums per batch entry: the formula, summed over each entry's rows.
    x = _scaled_product(a, b, c, trans_a, trans_b, name)
    sums = (jnp.sum(x, axis=tuple(range(1, x.ndim - 1))) if with_sums
            else jnp.zeros((axis_size, 0), jnp.float32))
    return (x.astype(c.dtype), sums), (True, True)

  return call


def gemm_dact(ctx: Context, a, b, c, trans_a: bool, trans_b: bool, name: str,
              with_sums: bool = True):
  """(d, dbias) for (op(a) @ op(b)) * act'(c) (name: a canonical activation name; c the
  saved pre-activation, for relu z or act(z)): one kernel launch where supported, else
  the formula. with_sums=False: dbias is an empty (0,) array on the kernel path (no bias
  to differentiate; the kernel skips the column sums)."""
  why = why_not_kernel(ctx, a, b, c, name)
  if why is None:
    return _kernel(bool(trans_a), bool(trans_b), name, bool(with_sums), ctx.tuning)(a, b, c)
  _explain.note_reference(TARGET, [x.shape for x in (a, b, c)], why)
  return reference(a, b, c, trans_a, trans_b, name)
