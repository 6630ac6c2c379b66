"""Low-level GEMM dispatch: one FFI kernel launch, or the pure-JAX reference.

Everything here works on the kernels' own operand conventions (see the FFI
contract in DESIGN.md / issue 2):

  gemm:           d = op(a) @ op(b)               target jax_sm100_gemm
  gemm_residual:  d = alpha*op(a)@op(b) + beta*c  target jax_sm100_gemm_residual
  fp8_gemm:       d = (a*sa) @ (b*sb)^T (+beta*c) target jax_sm100_fp8_gemm[_residual]

where op(a) is a (..., M, K), or a (..., K, M) transposed when trans_a, and
op(b) is b (..., K, N), or b (..., N, K) transposed when trans_b. Leading
(batch) dims broadcast; each operand's flattened batch count must be 1 or the
output's on the kernel path (otherwise the operand is broadcast in memory).

Kernel path details:
  * TMA needs (last dim * itemsize) % 16 == 0 for every operand and d. Where a
    call violates this, operands are zero-padded: padding K is exact; padded M
    rows / N columns are sliced off the result. Padding copies the operand, so
    aligned shapes are the fast case.
  * vmap does not loop: the kernel calls are jax.custom_batching.custom_vmap
    functions whose rule moves the vmapped axis to the front and makes it one
    more batch dim of the same launch (unbatched operands stay un-broadcast
    where their batch count is 1).
The decision kernel/reference is made from a static Context (see _backend).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

from jax_sm100 import _ffi_registry as reg
from jax_sm100._backend import Context

F32 = np.dtype(np.float32)
BF16 = np.dtype(jnp.bfloat16)
E4M3 = np.dtype(jnp.float8_e4m3fn)
KERNEL_IN = (BF16, np.dtype(jnp.float16))
KERNEL_OUT = (BF16, np.dtype(jnp.float16), F32)
FP8_BLOCK = 128  # the fp8 kernels' scaling block (1x128 for a, 128x128 for b)
FP8_MAX_K = 65536  # the sm90 fp8 kernel keeps all of a row's K-block scales on chip


def _round_up(n: int, m: int) -> int:
  return -(-n // m) * m


def _pad_to(x, axis: int, size: int):
  """Zero-pad x along `axis` up to `size` (no-op when already that size)."""
  if x.shape[axis] == size:
    return x
  pads = [(0, 0)] * x.ndim
  pads[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, pads)


def _dims(a, b, trans_a, trans_b):
  m = a.shape[-1] if trans_a else a.shape[-2]
  k = a.shape[-2] if trans_a else a.shape[-1]
  n = b.shape[-2] if trans_b else b.shape[-1]
  return m, n, k


# ----------------------------------------------------------------------------
# Reference path (plain jax.numpy; fp32 accumulation, then cast).
# ----------------------------------------------------------------------------

def ref_gemm(a, b, trans_a, trans_b, out_dtype, c=None, alpha=1.0, beta=0.0):
  """alpha * op(a) @ op(b) + beta * c in fp32, cast to out_dtype.

  beta == 0 is a static branch: c is not read at all (NaN in c does not
  propagate), exactly like the kernel.
  """
  ct = jnp.promote_types(a.dtype, b.dtype)
  a, b = a.astype(ct), b.astype(ct)
  if trans_a:
    a = jnp.swapaxes(a, -1, -2)  # XLA folds these into the dot's dimensions
  if trans_b:
    b = jnp.swapaxes(b, -1, -2)
  acc = jnp.matmul(a, b, preferred_element_type=jnp.float32)
  if alpha != 1.0:
    acc = acc * np.float32(alpha)
  if c is not None and beta != 0.0:
    acc = acc + np.float32(beta) * c.astype(jnp.float32)
  return acc.astype(out_dtype)


def dequantize_blockwise(q, scale, block):
  """q * scale with each scale entry covering one (block[0], block[1]) tile; f32."""
  r, c = q.shape
  s = jnp.repeat(jnp.repeat(scale, block[0], axis=0), block[1], axis=1)[:r, :c]
  return q.astype(jnp.float32) * s


def ref_fp8_gemm(a, a_scale, b, b_scale, c, beta, out_dtype):
  """(a*a_scale) @ (b*b_scale)^T (+ beta*c), dequantized to f32, f32 dot."""
  a_deq = dequantize_blockwise(a, a_scale, (1, FP8_BLOCK))
  b_deq = dequantize_blockwise(b, b_scale, (FP8_BLOCK, FP8_BLOCK))
  acc = lax.dot_general(a_deq, b_deq, (((1,), (1,)), ((), ())),
                        precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
  if c is not None and beta != 0.0:
    acc = acc + np.float32(beta) * c.astype(jnp.float32)
  return acc.astype(out_dtype)


# ----------------------------------------------------------------------------
# Kernel path.
# ----------------------------------------------------------------------------

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


def _aligned_gemm_launch(a, b, c, trans_a, trans_b, out_dtype, launch):
  """Pads for TMA alignment, fits batch dims, launches, slices the padding off."""
  m, n, k = _dims(a, b, trans_a, trans_b)
  e_in = 16 // a.dtype.itemsize
  e_out = 16 // out_dtype.itemsize
  kp = _round_up(k, e_in) if (not trans_a or trans_b) else k   # K is a last dim
  mp = _round_up(m, e_in) if trans_a else m                   # M is a's last dim
  np_ = _round_up(n, e_out if trans_b else max(e_in, e_out))  # d's (and b's) last dim
  a = _pad_to(a, -2 if trans_a else -1, kp)
  a = _pad_to(a, -1 if trans_a else -2, mp)
  b = _pad_to(b, -1 if trans_b else -2, kp)
  b = _pad_to(b, -2 if trans_b else -1, np_)
  ops = [a, b]
  if c is not None:
    ops.append(_pad_to(_pad_to(c, -2, mp), -1, np_))
  ops, out_b = _fit_batches(ops)
  d = launch(ops, jax.ShapeDtypeStruct(out_b + (mp, np_), out_dtype))
  if (mp, np_) != (m, n):
    d = d[..., :m, :n]
  return d


@functools.lru_cache(maxsize=None)
def _gemm_kernel(trans_a: bool, trans_b: bool, out_dtype: np.dtype):
  """The jax_sm100_gemm launch for one (trans_a, trans_b, out_dtype), vmap-able."""

  def launch(ops, out):
    return jax.ffi.ffi_call(reg.GEMM, out, vmap_method="broadcast_all")(
        *ops, trans_a=bool(trans_a), trans_b=bool(trans_b))

  @custom_vmap
  def call(a, b):
    return _aligned_gemm_launch(a, b, None, trans_a, trans_b, out_dtype, launch)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b):
    del axis_size
    if not any(in_batched):
      return call(a, b), False
    return call(*_to_front_batch(in_batched, [a, b])), True

  return call


@functools.lru_cache(maxsize=None)
def _gemm_residual_kernel(trans_a: bool, trans_b: bool, alpha: float, beta: float,
                          out_dtype: np.dtype):
  """The jax_sm100_gemm_residual launch for one static configuration, vmap-able."""

  def launch(ops, out):
    return jax.ffi.ffi_call(reg.GEMM_RESIDUAL, out, vmap_method="broadcast_all")(
        *ops, trans_a=bool(trans_a), trans_b=bool(trans_b),
        alpha=np.float32(alpha), beta=np.float32(beta))

  @custom_vmap
  def call(a, b, c):
    return _aligned_gemm_launch(a, b, c, trans_a, trans_b, out_dtype, launch)

  @call.def_vmap
  def rule(axis_size, in_batched, a, b, c):
    del axis_size
    if not any(in_batched):
      return call(a, b, c), False
    return call(*_to_front_batch(in_batched, [a, b, c])), True

  return call


def _gemm_kernel_ok(ctx: Context, target, a, b, out_dtype, c=None) -> bool:
  return (ctx.can_call(target)
          and a.dtype == b.dtype and a.dtype in KERNEL_IN
          and out_dtype in KERNEL_OUT
          and (c is None or c.dtype == out_dtype)
          and all(s > 0 for s in (*a.shape, *b.shape)))


def gemm(ctx: Context, a, b, trans_a: bool, trans_b: bool, out_dtype):
  """op(a) @ op(b) -> out_dtype: one kernel launch when supported, else reference."""
  out_dtype = np.dtype(out_dtype)
  if _gemm_kernel_ok(ctx, reg.GEMM, a, b, out_dtype):
    return _gemm_kernel(bool(trans_a), bool(trans_b), out_dtype)(a, b)
  return ref_gemm(a, b, trans_a, trans_b, out_dtype)


def gemm_residual(ctx: Context, a, b, c, trans_a: bool, trans_b: bool,
                  alpha: float, beta: float, out_dtype):
  """alpha*op(a)@op(b) + beta*c -> out_dtype (c unread when beta == 0)."""
  out_dtype = np.dtype(out_dtype)
  if _gemm_kernel_ok(ctx, reg.GEMM_RESIDUAL, a, b, out_dtype, c):
    return _gemm_residual_kernel(bool(trans_a), bool(trans_b), float(alpha),
                                 float(beta), out_dtype)(a, b, c)
  return ref_gemm(a, b, trans_a, trans_b, out_dtype, c=c, alpha=alpha, beta=beta)


# ----------------------------------------------------------------------------
# FP8 blockwise kernel path (target registered by a later issue).
# ----------------------------------------------------------------------------

def fp8_kernel_a_scale(a_scale):
  """a's scales (M, ceil(K/128)) -> the fp8 kernel's layout (ceil(K/128), round_up(M, 4)):
  transposed so that one TMA box brings a stage's scales. Pad entries are 1, as the
  quantize kernels write them (the GEMM never reads them)."""
  return fp8_pad_a_scale_t(a_scale.T)


def fp8_pad_a_scale_t(a_scale_t):
  """a's scales transposed, (ceil(K/128), M) -> the fp8 kernel's layout: M padded to a
  multiple of 4 (16-byte TMA rows) with 1s; no copy when M % 4 == 0."""
  m = a_scale_t.shape[1]
  mp = _round_up(m, 4)
  return a_scale_t if mp == m else jnp.pad(a_scale_t, ((0, 0), (0, mp - m)),
                                           constant_values=1.0)


def fp8_documented_a_scale(a_scale_k, m: int):
  """Inverse of fp8_kernel_a_scale (leading batch dims allowed): -> (..., M, ceil(K/128))."""
  return jnp.swapaxes(a_scale_k, -1, -2)[..., :m, :]


def _fp8_launch(a, a_scale, b, b_scale, c, beta, a_scale_kernel_layout=False):
  """The one place that knows the fp8 kernels' operand layout.

  a (M, K) e4m3, a_scale (M, ceil(K/128)) f32, b (N, K) e4m3,
  b_scale (ceil(N/128), ceil(K/128)) f32, c (M, N) bf16 -> d (M, N) bf16.
  K is padded to a multiple of 16 (a's and b's rows are 16-byte aligned) and N
  to a multiple of 8 (d's and c's rows); both stay inside the last scale block,
  so the scale tensors are unchanged. a's scales go to the kernel transposed
  (fp8_kernel_a_scale: a small XLA transpose here), unless they already come in
  that layout (a_scale_kernel_layout: fp8_dot's quantizers write it directly).
  """
  m, k = a.shape
  n = b.shape[0]
  kp, np_ = _round_up(k, 16), _round_up(n, 8)
  if not a_scale_kernel_layout:
    a_scale = fp8_kernel_a_scale(a_scale)
  a = _pad_to(a, 1, kp)
  b = _pad_to(_pad_to(b, 1, kp), 0, np_)
  out = jax.ShapeDtypeStruct((m, np_), BF16)
  if c is None:
    d = jax.ffi.ffi_call(reg.FP8_GEMM, out)(a, a_scale, b, b_scale)
  else:
    c = _pad_to(c, 1, np_)
    d = jax.ffi.ffi_call(reg.FP8_GEMM_RESIDUAL, out)(
        a, a_scale, b, b_scale, c, beta=np.float32(beta))
  return d[:, :n] if np_ != n else d


@functools.lru_cache(maxsize=None)
def _fp8_kernel(residual: bool, beta: float):
  """The fp8 launch as a custom_vmap function.

  vmap rule: when only the a-side (a, a_scale, c) is batched, the vmapped axis
  is folded into M (one launch); when b or b_scale is batched the batched
  reference runs instead (one XLA batched dot, not a loop).
  """

  @custom_vmap
  def call(*ops):
    a, a_scale, b, b_scale = ops[:4]
    return _fp8_launch(a, a_scale, b, b_scale, ops[4] if residual else None, beta)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    if in_batched[2] or in_batched[3]:
      axes = [0 if bt else None for bt in in_batched]
      ref = lambda *o: ref_fp8_gemm(o[0], o[1], o[2], o[3],
                                    o[4] if residual else None, beta, BF16)
      return jax.vmap(ref, in_axes=axes)(*ops), True
    a_side = [0, 1] + ([4] if residual else [])
    ops = list(ops)
    for i in a_side:  # fold the vmapped axis into M
      x = ops[i] if in_batched[i] else jnp.broadcast_to(ops[i], (axis_size,) + ops[i].shape)
      ops[i] = x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])
    d = call(*ops)
    return d.reshape((axis_size, d.shape[0] // axis_size) + d.shape[1:]), True

  return call


@functools.lru_cache(maxsize=None)
def _fp8_kernel_scales_ready(residual: bool = False, beta: float = 0.0):
  """The fp8 launch with a's scales already in the kernel layout (ceil(K/128),
  round_up(M, 4)). vmap rule: the scales go back to the documented layout and the
  batched call takes _fp8_kernel's rule (fold into M, or reference)."""

  @custom_vmap
  def call(*ops):
    a, a_scale_k, b, b_scale = ops[:4]
    return _fp8_launch(a, a_scale_k, b, b_scale, ops[4] if residual else None, beta,
                       a_scale_kernel_layout=True)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    a, a_scale_k = ops[:2]
    a_scale = fp8_documented_a_scale(a_scale_k, a.shape[-2])
    axes = [0 if bt else None for bt in in_batched]
    d = jax.vmap(_fp8_kernel(residual, beta), in_axes=axes, axis_size=axis_size)(
        a, a_scale, *ops[2:])
    return d, True

  return call


def fp8_kernel_ok(ctx: Context, m: int, n: int, k: int, out_dtype, residual: bool = False) -> bool:
  """Whether an e4m3 x e4m3 product (M, K) @ (N, K)^T -> out_dtype runs the fp8 kernel."""
  target = reg.FP8_GEMM_RESIDUAL if residual else reg.FP8_GEMM
  return (ctx.can_call(target) and np.dtype(out_dtype) == BF16
          and min(m, n, k) > 0 and k <= FP8_MAX_K)


def fp8_gemm(ctx: Context, a, a_scale, b, b_scale, c, beta: float, out_dtype,
             a_scale_transposed: bool = False):
  """(a*a_scale) @ (b*b_scale)^T (+ beta*c): fp8 kernel when supported, else reference.
  a_scale_transposed: a_scale is (ceil(K/128), M), which the kernel reads without a
  transpose (only padded when M % 4 != 0)."""
  out_dtype = np.dtype(out_dtype)
  if beta == 0.0:
    c = None  # beta == 0: c is never read
  (m, k), n = a.shape, b.shape[0]
  if (a.dtype == E4M3 and b.dtype == E4M3 and (c is None or c.dtype == BF16)
      and fp8_kernel_ok(ctx, m, n, k, out_dtype, residual=c is not None)):
    residual, beta_k = ((), 0.0) if c is None else ((c,), float(beta))
    if a_scale_transposed:
      return _fp8_kernel_scales_ready(c is not None, beta_k)(
          a, fp8_pad_a_scale_t(a_scale), b, b_scale, *residual)
    return _fp8_kernel(c is not None, beta_k)(a, a_scale, b, b_scale, *residual)
  if a_scale_transposed:
    a_scale = a_scale.T
  return ref_fp8_gemm(a, a_scale, b, b_scale, c, beta, out_dtype)


def fp8_gemm_kernel_scales(a, a_scale_k, b, b_scale):
  """fp8_gemm's kernel path with a's scales already in the kernel layout
  (fp8_kernel_a_scale's); only for calls fp8_kernel_ok accepts (bf16 out, no residual)."""
  return _fp8_kernel_scales_ready()(a, a_scale_k, b, b_scale)
