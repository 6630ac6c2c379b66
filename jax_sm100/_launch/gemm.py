"""Launches of the bf16/fp16 GEMM targets, or the reference.

  gemm:           d = op(a) @ op(b)               target jax_sm100_gemm
  gemm_residual:  d = alpha*op(a)@op(b) + beta*c  target jax_sm100_gemm_residual

op(a) is a (..., M, K), or a (..., K, M) transposed when trans_a; op(b) is
b (..., K, N), or b (..., N, K) transposed when trans_b. Leading (batch) dims
broadcast; each operand's flattened batch count must be 1 or the output's on
the kernel path (otherwise the operand is broadcast in memory).

  * TMA needs (last dim * itemsize) % 16 == 0 for every operand and d. Where a
    call violates this, operands are zero-padded: padding K is exact; padded M
    rows / N columns are sliced off the result. Padding copies the operand, so
    aligned shapes are the fast case.
  * vmap does not loop: the launches are custom_vmap functions whose rule moves
    the vmapped axis to the front and makes it one more batch dim of the same
    launch (unbatched operands stay un-broadcast where their batch count is 1).
  * The tile configuration (jax_sm100.tuning.GemmConfig) is chosen per launch
    from the kernel's own shapes (padded M, N, the output's batch count) and
    passed as the attributes block_m, block_n, cluster_m, group_m.
  * On a backend never run on hardware by this project (sm100), a family's first
    launch waits for its known-answer self-test (jax_sm100.selftest); a family that
    failed it takes the reference.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jax_sm100 import _explain, _reference, _selftest_guard, tuning
from jax_sm100._backend import Context
from jax_sm100._launch import partition
from jax_sm100._util import pad_to, round_up

TARGET = "jax_sm100_gemm"
RESIDUAL_TARGET = "jax_sm100_gemm_residual"
KERNEL_IN = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))
KERNEL_OUT = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16), np.dtype(np.float32))


def _dims(a, b, trans_a, trans_b):
  m = a.shape[-1] if trans_a else a.shape[-2]
  k = a.shape[-2] if trans_a else a.shape[-1]
  n = b.shape[-2] if trans_b else b.shape[-1]
  return m, n, k


def _fit_batches(ops):
  """Broadcast operands in memory only where the kernel cannot broadcast them.

  The handler flattens each operand's leading dims into one batch count that
  must be 1 or the output's.
  """
  out_b = tuple(np.broadcast_shapes(*[x.shape[:-2] for x in ops]))
  fitted = []
  for x in ops:
    xb = x.shape[:-2]
    if math.prod(xb) != 1 and (1,) * (len(out_b) - len(xb)) + tuple(xb) != out_b:
      x = jnp.broadcast_to(x, out_b + x.shape[-2:])
    fitted.append(x)
  return fitted, out_b


def _to_front_batch(in_batched, ops):
  """custom_vmap rule helper: the vmapped axis (already at 0 for batched
  operands) becomes the first batch dim of every operand, with size-1 dims
  inserted so all operands have the same batch rank (free reshapes)."""
  nb = max(x.ndim - 2 - int(bt) for x, bt in zip(ops, in_batched))
  out = []
  for x, bt in zip(ops, in_batched):
    rest = x.shape[1:] if bt else x.shape
    lead = x.shape[0] if bt else 1
    out.append(x.reshape((lead,) + (1,) * (nb - (len(rest) - 2)) + tuple(rest)))
  return out


def _launch(target, ops, out, trans_a, trans_b, settings, *, residual=None, tiling=None,
            **scalars):
  """One ffi_call of `target` (every GEMM-family target: the product's layout attributes,
  the tile configuration, `scalars`) returning `out` (d's struct, or a tuple whose first
  is d's). The configuration is tuning.resolve_gemm's for the product (residual: its
  residual table, by default for RESIDUAL_TARGET), or tiling(that config, M) for a
  target with tilings of its own."""
  d = out[0] if isinstance(out, tuple) else out
  m, n = d.shape[-2:]
  batch = math.prod(d.shape[:-2])
  k = ops[0].shape[-2] if trans_a else ops[0].shape[-1]
  residual = target == RESIDUAL_TARGET if residual is None else residual
  cfg, why = tuning.resolve_gemm(settings, m, n, k, batch, residual=residual)
  if tiling is not None:
    cfg = tiling(cfg, m)
    why += f"; {target}'s tiling {cfg.block_m}x{cfg.block_n}"
  attrs = dict(trans_a=bool(trans_a), trans_b=bool(trans_b), **scalars, **cfg.attributes())
  _explain.note_launch(target, ops, attrs, f"{m}x{n}x{k}, batch {batch}: {why}")
  return jax.ffi.ffi_call(target, out, vmap_method="broadcast_all")(*ops, **attrs)


def _aligned_launch(a, b, c, trans_a, trans_b, out_dtype, launch):
  """Pads for TMA alignment, fits batch dims, launches, slices the padding off."""
  m, n, k = _dims(a, b, trans_a, trans_b)
  e_in = 16 // a.dtype.itemsize
  e_out = 16 // out_dtype.itemsize
  kp = round_up(k, e_in) if (not trans_a or trans_b) else k   # K is a last dim
  mp = round_up(m, e_in) if trans_a else m                   # M is a's last dim
  np_ = round_up(n, e_out if trans_b else max(e_in, e_out))  # d's (and b's) last dim
  a = pad_to(a, -2 if trans_a else -1, kp)
  a = pad_to(a, -1 if trans_a else -2, mp)
  b = pad_to(b, -1 if trans_b else -2, kp)
  b = pad_to(b, -2 if trans_b else -1, np_)
  ops = [a, b]
  if c is not None:
    ops.append(pad_to(pad_to(c, -2, mp), -1, np_))
  ops, out_b = _fit_batches(ops)
  d = launch(ops, jax.ShapeDtypeStruct(out_b + (mp, np_), out_dtype))
  if (mp, np_) != (m, n):
    d = d[..., :m, :n]
  return d


def _spec(a, b, c, trans_a, trans_b):
  """The partitioning factors of one launch (partition.py): batch, m, n, k."""
  m, n, _ = _dims(a, b, trans_a, trans_b)
  shapes = [x.shape[:-2] for x in (a, b, c) if x is not None]
  out = tuple(np.broadcast_shapes(*shapes)) + (m, n)
  return partition.gemm_spec(a.shape, b.shape, out, trans_a, trans_b,
                             None if c is None else c.shape,
                             "matmul" if c is None else "matmul_residual")


@_explain.launch_builder
def _gemm_kernel(trans_a: bool, trans_b: bool, out_dtype: np.dtype, settings):
  """The jax_sm100_gemm launch for one static configuration, vmap-able."""

  def launch(ops, out):
    return _launch(TARGET, ops, out, trans_a, trans_b, settings)

  def local(a, b):
    return _aligned_launch(a, b, None, trans_a, trans_b, out_dtype, launch)

  @custom_vmap
  def call(a, b):
    return partition.sharded_call(local, _spec(a, b, None, trans_a, trans_b), a, b)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b):
    del axis_size
    if not any(in_batched):
      return call(a, b), False
    return call(*_to_front_batch(in_batched, [a, b])), True

  return call


@_explain.launch_builder
def _gemm_residual_kernel(trans_a: bool, trans_b: bool, alpha: float, beta: float,
                          out_dtype: np.dtype, settings):
  """The jax_sm100_gemm_residual launch for one static configuration, vmap-able."""

  def launch(ops, out):
    return _launch(RESIDUAL_TARGET, ops, out, trans_a, trans_b, settings,
                   alpha=np.float32(alpha), beta=np.float32(beta))

  def local(a, b, c):
    return _aligned_launch(a, b, c, trans_a, trans_b, out_dtype, launch)

  @custom_vmap
  def call(a, b, c):
    return partition.sharded_call(local, _spec(a, b, c, trans_a, trans_b), a, b, c)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b, c):
    del axis_size
    if not any(in_batched):
      return call(a, b, c), False
    return call(*_to_front_batch(in_batched, [a, b, c])), True

  return call


def why_not_kernel(ctx: Context, target, a, b, out_dtype, c=None):
  """None when the call runs the kernel, else a function returning why it takes
  the reference (evaluated by explain() only)."""
  if not ctx.can_call(target):
    return lambda: ctx.why_not(target)
  if a.dtype != b.dtype or a.dtype not in KERNEL_IN:
    return lambda: (f"inputs {a.dtype.name} x {b.dtype.name}: the kernel takes bfloat16 "
                    "or float16 inputs of one dtype")
  if out_dtype not in KERNEL_OUT:
    return lambda: f"output {out_dtype.name}: the kernel writes bfloat16, float16 or float32"
  if c is not None and c.dtype != out_dtype:
    return lambda: f"c is {c.dtype.name}, the output {out_dtype.name}"
  if not all(s > 0 for s in (*a.shape, *b.shape)):
    return lambda: "an empty operand"
  # Kernels never run on hardware here (sm100): the family's known-answer self-test, run
  # on its first use in the process, decides.
  refused = _selftest_guard.refusal(ctx, target)
  if refused is not None:
    return lambda: refused
  return None


def _shapes(*xs):
  return [x.shape for x in xs if x is not None]


def gemm(ctx: Context, a, b, trans_a: bool, trans_b: bool, out_dtype):
  """op(a) @ op(b) -> out_dtype: one kernel launch when supported, else reference."""
  out_dtype = np.dtype(out_dtype)
  why = why_not_kernel(ctx, TARGET, a, b, out_dtype)
  if why is None:
    return _gemm_kernel(bool(trans_a), bool(trans_b), out_dtype, ctx.tuning)(a, b)
  _explain.note_reference(TARGET, _shapes(a, b), why)
  return _reference.gemm(a, b, trans_a, trans_b, out_dtype)


def gemm_residual(ctx: Context, a, b, c, trans_a: bool, trans_b: bool,
                  alpha: float, beta: float, out_dtype):
  """alpha*op(a)@op(b) + beta*c -> out_dtype (c unread when beta == 0)."""
  out_dtype = np.dtype(out_dtype)
  why = why_not_kernel(ctx, RESIDUAL_TARGET, a, b, out_dtype, c)
  if why is None:
    return _gemm_residual_kernel(bool(trans_a), bool(trans_b), float(alpha), float(beta),
                                 out_dtype, ctx.tuning)(a, b, c)
  _explain.note_reference(RESIDUAL_TARGET, _shapes(a, b, c), why)
  return _reference.gemm(a, b, trans_a, trans_b, out_dtype, c=c, alpha=alpha, beta=beta)
