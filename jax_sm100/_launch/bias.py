"""Launch of the fused bias/activation GEMM, or its reference.

  gemm_bias: (d, pre) with z = op(a) @ op(b) + bias (fp32),   target jax_sm100_gemm_bias
             pre = round(z), d = round(act(z))

a, b, the transpose flags, batch rules, TMA padding and batch fitting are gemm.py's
(gemm._aligned_launch does the padding; the bias is zero-padded with d's columns, and the
padded rows / columns of d and pre are sliced off). bias is f32 (N,), or (0,) for none;
pre is asked for (d's shape) only when the caller needs it, else the launch passes a
(0,) result and the kernel writes nothing there. Tile configuration: tuning.resolve_gemm,
the same choice as jax_sm100_gemm (attributes block_m, block_n, cluster_m, group_m), plus
the attribute `activation` (jax_sm100._activations.CODES).

  * vmap: one batched launch (custom_vmap moves the vmapped axis to the front as one more
    batch dim), except when the bias itself is vmapped: the kernel adds one (N,) row to
    every batch entry, so a per-entry bias takes the reference formula on the batch.
  * Partitioning: batch, M and N shard with no communication (the bias with N). K stays
    whole: act(sum of partial products) is not the sum of act(partials), so a K-sharded
    operand is gathered before the launch (visible in the HLO).
  * Backends without a kernel for the target take the reference (sm100 has one, run once
    the gemm_bias family's first-use self-test passed: gemm.why_not_kernel's guard); so do dtypes / shapes the kernel does not take (why_not_kernel: the plain
    GEMM's limits, and an output of the input dtype or float32).
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jax_sm100 import _activations, _explain
from jax_sm100._backend import Context
from jax_sm100._launch import gemm as _gemm
from jax_sm100._launch import partition
from jax_sm100._util import pad_to

TARGET = "jax_sm100_gemm_bias"


def why_not_kernel(ctx: Context, a, b, out_dtype):
  """None when the call runs the kernel, else a function returning why it takes the
  reference: gemm.why_not_kernel's reasons, and the dtype pairs the sm90 bias/activation
  epilogue is compiled for (bf16 -> bf16 or f32, f16 -> f16 or f32; the same on every
  backend, so that cpu_ffi runs what the GPU runs)."""
  why = _gemm.why_not_kernel(ctx, TARGET, a, b, out_dtype)
  if why is not None:
    return why
  if out_dtype not in (a.dtype, np.dtype(np.float32)):
    return lambda: (f"inputs {a.dtype.name}, output {out_dtype.name}: the bias/activation "
                    f"kernel writes its input dtype or float32")
  return None


def _spec(a, b, bias, want_pre, trans_a, trans_b):
  """gemm.py's factors with K whole (each operand's K its own factor, never sharded),
  the bias sharing N, pre sharing d's factors."""
  m, n, _ = _gemm._dims(a, b, trans_a, trans_b)
  out = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (m, n)
  base = partition.gemm_spec(a.shape, b.shape, out, trans_a, trans_b)
  whole_k = lambda dims: tuple(None if d == "k" else d for d in dims)
  operands = tuple(whole_k(d) for d in base.operands) + (("n",) if bias.shape[0] else (None,),)
  d_dims = base.results[0]
  return partition.Spec(operands, (d_dims, d_dims if want_pre else (None,)), op="matmul_bias")


@_explain.launch_builder
def _kernel(trans_a: bool, trans_b: bool, name: str, want_pre: bool, out_dtype: np.dtype,
            settings):
  """The launch for one static configuration, vmap-able: (a, b, bias) -> (d, pre)."""
  code = _activations.CODES[name]

  def local(a, b, bias):
    m, n, _ = _gemm._dims(a, b, trans_a, trans_b)
    pre_out = []

    def launch(ops, out):  # gemm._aligned_launch's callback: ops padded, out d's struct
      bias_p = pad_to(bias, 0, out.shape[-1]) if bias.shape[0] else bias
      pre = jax.ShapeDtypeStruct(out.shape if want_pre else (0,), out.dtype)
      d, pre = _gemm._launch(TARGET, list(ops) + [bias_p], (out, pre), trans_a, trans_b,
                             settings, residual=False, activation=np.int32(code))
      pre_out.append(pre)
      return d

    d = _gemm._aligned_launch(a, b, None, trans_a, trans_b, out_dtype, launch)
    pre = pre_out[0]
    if want_pre and tuple(pre.shape[-2:]) != (m, n):
      pre = pre[..., :m, :n]
    return d, pre

  @custom_vmap
  def call(a, b, bias):
    return partition.sharded_call(local, _spec(a, b, bias, want_pre, trans_a, trans_b),
                                  a, b, bias)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b, bias):
    del axis_size
    if not any(in_batched):
      return call(a, b, bias), (False, False)
    a, b = _gemm._to_front_batch(in_batched[:2], [a, b])
    if in_batched[2]:  # one bias row per batch entry: not the kernel's contract
      d, pre = _activations.reference(a, b, bias, trans_a, trans_b, name, out_dtype, want_pre)
      if pre is None:
        pre = jnp.zeros((0,), out_dtype)
      return (d, pre), (True, want_pre)
    return call(a, b, bias), (True, want_pre)

  return call


def gemm_bias(ctx: Context, a, b, bias, trans_a: bool, trans_b: bool, name: str,
              want_pre: bool, out_dtype):
  """(d, pre) of the fused epilogue for op(a) @ op(b) + bias (bias f32 (N,) or None;
  name: a canonical activation name): one kernel launch where supported, else the
  reference. pre is None unless want_pre."""
  out_dtype = np.dtype(out_dtype)
  why = why_not_kernel(ctx, a, b, out_dtype)
  if why is None:
    bias_arg = bias if bias is not None else jnp.zeros((0,), jnp.float32)
    d, pre = _kernel(bool(trans_a), bool(trans_b), name, bool(want_pre), out_dtype,
                     ctx.tuning)(a, b, bias_arg)
    return d, (pre if want_pre else None)
  _explain.note_reference(TARGET, [x.shape for x in (a, b, bias) if x is not None], why)
  return _activations.reference(a, b, bias, trans_a, trans_b, name, out_dtype, want_pre)
