"""FP8 blockwise quantization, the blockwise-scaled matmul, and fp8_dot."""
from __future__ import annotations

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from jax.custom_batching import custom_vmap

from jax_sm100 import _backend, _checks, _gemm
from jax_sm100 import _ffi_registry as reg

E4M3 = np.dtype(jnp.float8_e4m3fn)
BLOCK = _gemm.FP8_BLOCK


def _cdiv(a: int, b: int) -> int:
  return -(-a // b)


# ----------------------------------------------------------------------------
# quantize_fp8_blockwise
# ----------------------------------------------------------------------------

def _quantize(x, block, dtype):
  """Blockwise quantization (no validation); see quantize_fp8_blockwise."""
  r, c = x.shape
  br, bc = block
  nr, nc = _cdiv(r, br), _cdiv(c, bc)
  fmax = float(jnp.finfo(dtype).max)
  xb = jnp.pad(x.astype(jnp.float32), ((0, nr * br - r), (0, nc * bc - c)))
  xb = xb.reshape(nr, br, nc, bc)
  amax = jnp.max(jnp.abs(xb), axis=(1, 3))                      # (nr, nc)
  # XLA CPU's vectorized max reduction drops NaN (jax 0.10/0.11: a block with
  # one NaN gets a finite amax); make the documented NaN propagation explicit.
  amax = jnp.where(jnp.any(jnp.isnan(xb), axis=(1, 3)), np.float32(np.nan), amax)
  # amax * float32(1/max), not amax / max: XLA rewrites division by a constant
  # into this multiplication anyway, and spelling it out keeps every
  # implementation (XLA CPU/GPU, CUDA kernels) bit-identical.
  scale = amax * np.float32(1.0 / fmax)
  # All-zero block (or amax so small that amax/fmax underflows to 0): scale 1,
  # so q = x / 1 is exactly zero (or rounds to fp8 zero/subnormals) - never
  # 0/0. NaN in a block gives a NaN scale (kept visible, not hidden).
  scale = jnp.where(scale == 0, np.float32(1.0), scale)
  # x * (1/scale) with the reciprocal rounded once per tile: XLA rewrites
  # x / broadcast(scale) into this form inside fusions, so it is spelled out to
  # keep all implementations bit-identical.
  inv = np.float32(1.0) / scale
  q = jnp.clip(xb * inv[:, None, :, None], -fmax, fmax)       # saturate
  q = q.astype(dtype).reshape(nr * br, nc * bc)[:r, :c]
  return q, scale


# Kernel path: target jax_sm100_quantize_fp8 (e4m3, 1x128 or 128x128 blocks,
# bf16/fp16/f32 input), bit-identical to _quantize (tests/test_fp8_gpu.py).
_QUANT_KERNEL_BLOCKS = ((1, BLOCK), (BLOCK, BLOCK))
_QUANT_KERNEL_IN = tuple(np.dtype(t) for t in (jnp.bfloat16, jnp.float16, jnp.float32))


def _quantize_launch(x, block_rows: int, scale_transposed: bool = False):
  r, c = x.shape
  if scale_transposed:  # the fp8 GEMM's A-scale layout (1x128 only)
    scale_shape = (_cdiv(c, BLOCK), -(-r // 4) * 4)
  else:
    scale_shape = (r if block_rows == 1 else _cdiv(r, BLOCK), _cdiv(c, BLOCK))
  out = (jax.ShapeDtypeStruct((r, c), E4M3), jax.ShapeDtypeStruct(scale_shape, np.float32))
  return jax.ffi.ffi_call(reg.QUANTIZE_FP8, out)(
      x, block_rows=np.int32(block_rows), scale_transposed=np.int32(scale_transposed))


def _kernel_scale(s):
  """1x128 scales (..., R, ceil(C/128)) -> the fp8 GEMM's A-scale layout (per batch)."""
  return _gemm.fp8_kernel_a_scale(s) if s.ndim == 2 else jax.vmap(_gemm.fp8_kernel_a_scale)(s)


@functools.lru_cache(maxsize=None)
def _quantize_kernel(block_rows: int, scale_transposed: bool = False):
  """The quantize launch as a custom_vmap function (vmap never loops).

  vmap rule: the vmapped axis folds into R, one launch. 1x128 blocks never cross
  rows; for 128x128 blocks each example's rows are first zero-padded to a multiple
  of 128, which leaves every block's amax, scale and q unchanged (the batched XLA
  reference that ran here before could differ from the recipe in the last bit: XLA's
  GPU division is not the recipe's correctly rounded one). Transposed scales
  (scale_transposed) are made per example from the folded launch's.
  """

  @custom_vmap
  def call(x):
    return _quantize_launch(x, block_rows, scale_transposed)

  @call.def_vmap
  def rule(axis_size, in_batched, x):
    del axis_size
    if not in_batched[0]:
      return call(x), (False, False)
    if block_rows == 1:
      q, s = _quantize_kernel(1)(x.reshape((-1, x.shape[-1])))
      s = s.reshape(x.shape[:2] + s.shape[-1:])
      return (q.reshape(x.shape), _kernel_scale(s) if scale_transposed else s), (True, True)
    b, r, c = x.shape
    rp = _cdiv(r, BLOCK) * BLOCK
    xp = jnp.pad(x, ((0, 0), (0, rp - r), (0, 0))) if rp != r else x
    q, s = _quantize_kernel(block_rows)(xp.reshape((b * rp, c)))
    q = q.reshape((b, rp, c))[:, :r]
    return (q, s.reshape((b, rp // BLOCK) + s.shape[-1:])), (True, True)

  return call


def _quantize_op(ctx, x, block, dtype, scale_transposed: bool = False):
  """Blockwise quantization: the quantize kernel when usable, else _quantize.
  scale_transposed (1x128 blocks): the scale comes in the fp8 GEMM's A-scale layout
  (ceil(C/128), round_up(R, 4)), written by the kernel, else transposed by XLA."""
  assert not scale_transposed or tuple(block) == (1, BLOCK)
  if (ctx.can_call(reg.QUANTIZE_FP8) and np.dtype(dtype) == E4M3
      and tuple(block) in _QUANT_KERNEL_BLOCKS and np.dtype(x.dtype) in _QUANT_KERNEL_IN
      and x.size > 0):
    return _quantize_kernel(int(block[0]), bool(scale_transposed))(x)
  q, s = _quantize(x, tuple(block), dtype)
  return q, (_kernel_scale(s) if scale_transposed else s)


def quantize_fp8_blockwise(x, *, block=(1, 128), dtype=jnp.float8_e4m3fn,
                           scale_transposed=False):
  """Quantize x (R, C) to FP8 with one float32 scale per (block[0], block[1]) tile.

  Returns (q, scale): q has x's shape and `dtype`; scale is float32 of shape
  (ceil(R/block[0]), ceil(C/block[1])) and x ~= q * scale per tile.
  scale_transposed=True returns that scale transposed, (ceil(C/block[1]),
  ceil(R/block[0])), the same values. With 1x128 blocks this is the A-scale layout
  fp8_blockwise_matmul(..., a_scale_transposed=True) reads as it is (cuBLASLt's and
  DeepGEMM's M-major scale layout); the quantize kernel writes it directly.

  Exact recipe (all float32, on x converted to float32; any kernel that
  implements it must agree with this reference bit for bit):
    amax  = max |x| over the tile (edge tiles: over the elements that exist)
    scale = amax * float32(1 / max)       (max: largest finite value of dtype)
    scale = 1.0 where scale == 0          (all-zero tile, or amax*(1/max)
                                           underflows: q is then 0 - never 0/0)
    q     = dtype(clip(x * (1.0 / scale), -max, max))   (saturating)
  so each tile's largest |x| maps to the format's max. A NaN in a tile gives
  that tile a NaN scale and NaN q (kept visible, not hidden).
  """
  op = "quantize_fp8_blockwise"
  x = _checks.as_array(op, "x", x)
  _checks.check_dtype(op, "x", x, _checks.FLOAT_DTYPES)
  _checks.check_rank(op, "x", x, 2, "(R, C)", max_rank=2)
  if (not isinstance(block, (tuple, list)) or len(block) != 2 or
      not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
              for v in block)):
    raise ValueError(f"jax_sm100.{op}: block must be a pair of positive ints "
                     f"(rows, cols); got {block!r}.")
  try:
    dt = np.dtype(dtype)
  except TypeError:
    dt = None
  if dt not in _checks.FP8_DTYPES:
    raise TypeError(f"jax_sm100.{op}: dtype must be float8_e4m3fn or float8_e5m2; "
                    f"got {dtype!r}.")
  scale_transposed = _checks.static_bool(op, "scale_transposed", scale_transposed)
  block = (int(block[0]), int(block[1]))
  ctx = _backend.context()
  if not scale_transposed:
    return _quantize_op(ctx, x, block, dt)
  if block == (1, BLOCK):  # the kernel layout, less its pad columns (R % 4 != 0)
    q, s = _quantize_op(ctx, x, block, dt, scale_transposed=True)
    return q, s[:, :x.shape[0]]
  q, s = _quantize_op(ctx, x, block, dt)
  return q, s.T


def _quantize_dual_launch(x, t_block_rows: int, scale_transposed: bool = False,
                          scale_t_transposed: bool = False, block_rows: int = 1):
  r, c = x.shape
  r4, c4 = -(-r // 4) * 4, -(-c // 4) * 4
  if scale_transposed:
    s_shape = (_cdiv(c, BLOCK), r4)
  else:
    s_shape = (r if block_rows == 1 else _cdiv(r, BLOCK), _cdiv(c, BLOCK))
  if scale_t_transposed:
    st_shape = (_cdiv(r, BLOCK), c4)
  else:
    st_shape = (c if t_block_rows == 1 else _cdiv(c, BLOCK), _cdiv(r, BLOCK))
  out = (jax.ShapeDtypeStruct((r, c), E4M3),
         jax.ShapeDtypeStruct(s_shape, np.float32),
         jax.ShapeDtypeStruct((c, r), E4M3),
         jax.ShapeDtypeStruct(st_shape, np.float32))
  q, s, qt, st = jax.ffi.ffi_call(reg.QUANTIZE_FP8_DUAL, out)(
      x, block_rows=np.int32(block_rows), t_block_rows=np.int32(t_block_rows),
      scale_transposed=np.int32(scale_transposed),
      scale_t_transposed=np.int32(scale_t_transposed))
  return (q, s), (qt, st)


@functools.lru_cache(maxsize=None)
def _quantize_dual_kernel(t_block_rows: int, scale_transposed: bool, scale_t_transposed: bool,
                          block_rows: int):
  """The dual quantize launch as a custom_vmap function. A batched call (vmap of
  fp8_dot) runs the two single quantizations under vmap instead, which have
  their own batching rules (the 1x128 launch folds the batch into rows)."""

  @custom_vmap
  def call(x):
    return _quantize_dual_launch(x, t_block_rows, scale_transposed, scale_t_transposed, block_rows)

  @call.def_vmap
  def rule(axis_size, in_batched, x):
    del axis_size
    if not in_batched[0]:
      return call(x), ((False, False), (False, False))
    separate = lambda x: (_quantize_kernel(block_rows, scale_transposed)(x),
                          _quantize_kernel(t_block_rows, scale_t_transposed)(x.T))
    return jax.vmap(separate)(x), ((True, True), (True, True))

  return call


def _quantize_dual_op(ctx, x, t_block_rows: int, scale_transposed: bool = False,
                      scale_t_transposed: bool = False, block_rows: int = 1):
  """((q, s), (qt, st)) = (quantize(x, block_rows x 128), quantize(x^T, t_block_rows x 128)),
  block_rows 1, or 128 with t_block_rows 128 (x's 128x128 tiles are x^T's: a weight).

  One kernel reads x once for both when usable; otherwise the two quantizations
  run separately (x^T through an XLA transpose). Bit-identical either way.
  scale_transposed / scale_t_transposed (the latter with t_block_rows == 1): that
  1x128 scale comes in the fp8 GEMM's A-scale layout (see _quantize_op).
  """
  assert not scale_t_transposed or t_block_rows == 1
  assert block_rows == 1 or (t_block_rows == BLOCK and not scale_transposed)
  if (ctx.can_call(reg.QUANTIZE_FP8_DUAL) and np.dtype(x.dtype) in _QUANT_KERNEL_IN
      and x.size > 0):
    return _quantize_dual_kernel(int(t_block_rows), bool(scale_transposed),
                                 bool(scale_t_transposed), int(block_rows))(x)
  return (_quantize_op(ctx, x, (block_rows, BLOCK), E4M3, scale_transposed),
          _quantize_op(ctx, x.T, (t_block_rows, BLOCK), E4M3, scale_t_transposed))


# ----------------------------------------------------------------------------
# fp8_blockwise_matmul
# ----------------------------------------------------------------------------

def _check_scale(op, name, s, want, layout=""):
  _checks.check_dtype(op, name, s, (np.dtype(np.float32),))
  if tuple(s.shape) != tuple(want):
    raise ValueError(f"jax_sm100.{op}: {name} must have shape {tuple(want)}"
                     f"{' = ' + layout if layout else ''}; got {tuple(s.shape)}.")


def fp8_blockwise_matmul(a, a_scale, b, b_scale, *, c=None, beta=1.0,
                         out_dtype=jnp.bfloat16, a_scale_transposed=False):
  """(a * a_scale) @ (b * b_scale)^T (+ beta * c), DeepGEMM/cuBLASLt layout.

  Args:
    a: (M, K) float8_e4m3fn, scaled by a_scale (M, ceil(K/128)) float32 in 1x128
      blocks along K; with a_scale_transposed=True, a_scale comes transposed,
      (ceil(K/128), M): the layout the kernel reads (cuBLASLt's and DeepGEMM's
      M-major A scales, what quantize_fp8_blockwise(..., scale_transposed=True)
      returns), so no transpose runs before it (a pad when M % 4 != 0).
    b: (N, K) float8_e4m3fn (K-major, i.e. the weight transposed), scaled by
      b_scale (ceil(N/128), ceil(K/128)) float32 in 128x128 blocks.
    c: optional residual (M, N) with the output dtype; beta a finite Python real
      (beta == 0: c is not read).
    out_dtype: bfloat16 (the kernel's), float16 or float32 (reference only).
  Returns:
    (M, N) in out_dtype. Not differentiable (its inputs are quantized); use
    fp8_dot for training.
  """
  op = "fp8_blockwise_matmul"
  a = _checks.as_array(op, "a", a)
  b = _checks.as_array(op, "b", b)
  a_scale = _checks.as_array(op, "a_scale", a_scale)
  b_scale = _checks.as_array(op, "b_scale", b_scale)
  _checks.check_dtype(op, "a", a, _checks.FP8_DTYPES)
  _checks.check_dtype(op, "b", b, _checks.FP8_DTYPES)
  _checks.check_rank(op, "a", a, 2, "(M, K)", max_rank=2)
  _checks.check_rank(op, "b", b, 2, "(N, K)", max_rank=2)
  (m, k), (n, kb) = a.shape, b.shape
  if k != kb:
    raise ValueError(f"jax_sm100.{op}: a (M, K) and b (N, K) must have the same K; "
                     f"got a {tuple(a.shape)}, b {tuple(b.shape)}.")
  a_scale_transposed = _checks.static_bool(op, "a_scale_transposed", a_scale_transposed)
  if a_scale_transposed:
    _check_scale(op, "a_scale", a_scale, (_cdiv(k, BLOCK), m),
                 "(ceil(K/128), M) with a_scale_transposed=True")
  else:
    _check_scale(op, "a_scale", a_scale, (m, _cdiv(k, BLOCK)))
  _check_scale(op, "b_scale", b_scale, (_cdiv(n, BLOCK), _cdiv(k, BLOCK)))
  beta = _checks.static_scalar(op, "beta", beta)
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.bfloat16)
  if c is not None:
    c = _checks.as_array(op, "c", c)
    if c.dtype != out_dtype:
      raise TypeError(f"jax_sm100.{op}: c must have the output dtype "
                      f"{out_dtype.name}; got {c.dtype.name}.")
    if tuple(c.shape) != (m, n):
      raise ValueError(f"jax_sm100.{op}: c must have shape (M, N) = {(m, n)}; "
                       f"got {tuple(c.shape)}.")
  return _gemm.fp8_gemm(_backend.context(), a, a_scale, b, b_scale, c, beta, out_dtype,
                        a_scale_transposed)


# ----------------------------------------------------------------------------
# fp8_dot (DeepSeek-V3 recipe)
# ----------------------------------------------------------------------------

def _plan(ctx, m: int, k: int, n: int, out_dtype, x_dtype, w_dtype):
  """Which of fp8_dot's products (y, dw, dx) get a's scales straight from the
  quantizer in the fp8 kernel's transposed layout (no XLA transpose in between):
  a static tuple of three bools, True where that product runs the kernel.
  y (M, N) contracts K, dw (K, N) contracts M, dx (M, K) contracts N.
  JAX_SM100_FP8_FUSED_SCALES=0 (read at trace time) turns it off: the GEMM then
  transposes the scales itself."""
  if os.environ.get("JAX_SM100_FP8_FUSED_SCALES", "1") == "0":
    return (False, False, False)
  ok = _gemm.fp8_kernel_ok
  return (ok(ctx, m, n, k, out_dtype), ok(ctx, k, n, m, w_dtype), ok(ctx, m, k, n, x_dtype))


def _product(ctx, aq, a_s, bq, b_s, out_dtype, kernel_scales: bool):
  """(aq*a_s) @ (bq*b_s)^T; a_s in the kernel layout when kernel_scales."""
  if kernel_scales:
    return _gemm.fp8_gemm_kernel_scales(aq, a_s, bq, b_s)
  return _gemm.fp8_gemm(ctx, aq, a_s, bq, b_s, None, 0.0, out_dtype)


def _quantize_weight(ctx, w):
  """w (K, N) in 128x128 blocks, both ways: ((wq (K, N), ws (K/128, N/128)), (wq_t (N, K),
  ws_t (N/128, K/128))), the same tiles. With the dual kernel one read of w gives both
  (no XLA transpose of w); without it w^T is quantized and transposed back (exact)."""
  if ctx.can_call(reg.QUANTIZE_FP8_DUAL):
    return _quantize_dual_op(ctx, w, BLOCK, block_rows=BLOCK)
  wq_t, ws_t = _quantize_op(ctx, w.T, (BLOCK, BLOCK), E4M3)
  return (wq_t.T, ws_t.T), (wq_t, ws_t)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _fp8_dot(ctx, out_dtype, x_dtype, w_dtype, plan, x2, w):
  del x_dtype, w_dtype
  # x in 1x128 blocks along K, w^T in 128x128 blocks: (N, K).
  xq, xs = _quantize_op(ctx, x2, (1, BLOCK), E4M3, plan[0])
  _, (wq_t, ws_t) = _quantize_weight(ctx, w)
  return _product(ctx, xq, xs, wq_t, ws_t, out_dtype, plan[0])


def _fp8_dot_fwd(ctx, out_dtype, x_dtype, w_dtype, plan, x2, w):
  del x_dtype, w_dtype
  # x in 1x128 blocks along K for y, and x^T in 1x128 blocks along M for the
  # weight gradient: one pass over x. The residual is that FP8 copy (half the
  # bytes of a bf16 x), not x itself.
  (xq, xs), (xq_t, xs_t) = _quantize_dual_op(ctx, x2, 1, plan[0], plan[1])
  # w^T (N, K) for y, w (K, N) for dx: the same 128x128 tiles, quantized once.
  (wq, ws), (wq_t, ws_t) = _quantize_weight(ctx, w)
  y = _product(ctx, xq, xs, wq_t, ws_t, out_dtype, plan[0])
  return y, (xq_t, xs_t, wq, ws)


def _fp8_dot_bwd(ctx, out_dtype, x_dtype, w_dtype, plan, res, g):
  del out_dtype
  xq_t, xs_t, wq, ws = res
  # g in 1x128 blocks along N (dx's contraction) and g^T in 128x128 blocks
  # (dw's right operand): one pass over g.
  (gq, gs), (gq_t, gs_t) = _quantize_dual_op(ctx, g, BLOCK, plan[2])
  # dx (M, K) = g (M, N) @ w^T: the (K, N) operand is Q(w).
  dx = _product(ctx, gq, gs, wq, ws, x_dtype, plan[2])
  # dw (K, N) = x^T (K, M) @ g (M, N): contraction over M in both operands.
  dw = _product(ctx, xq_t, xs_t, gq_t, gs_t, w_dtype, plan[1])
  return dx, dw


_fp8_dot.defvjp(_fp8_dot_fwd, _fp8_dot_bwd)


def fp8_dot(x, w, *, out_dtype=None):
  """x @ w computed in FP8 with blockwise scales (DeepSeek-V3 recipe).

  Args:
    x: (..., K) bfloat16, float16 or float32; quantized in 1x128 blocks along K.
    w: (K, N) bfloat16, float16 or float32; quantized in 128x128 blocks.
    out_dtype: bfloat16, float16 or float32; defaults to the promoted input dtype.
  Returns:
    (..., N). Its custom_vjp runs the backward in FP8 too: dx = Q(g) @ Q(w)^T
    and dw = Q(x)^T @ Q(g), each operand quantized in 1x128 (activations and
    gradients) or 128x128 blocks along that product's contraction dim.
  """
  op = "fp8_dot"
  x = _checks.as_array(op, "x", x)
  w = _checks.as_array(op, "w", w)
  _checks.check_dtype(op, "x", x, _checks.FLOAT_DTYPES)
  _checks.check_dtype(op, "w", w, _checks.FLOAT_DTYPES)
  _checks.check_rank(op, "x", x, 1, "(..., K)")
  _checks.check_rank(op, "w", w, 2, "(K, N)", max_rank=2)
  if x.shape[-1] != w.shape[0]:
    raise ValueError(f"jax_sm100.{op}: x's last dim (K={x.shape[-1]}) must equal w's "
                     f"first dim; got x {tuple(x.shape)}, w {tuple(w.shape)}.")
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.promote_types(x.dtype, w.dtype))
  x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
  ctx = _backend.context()
  plan = _plan(ctx, x2.shape[0], x2.shape[1], w.shape[1], out_dtype, x.dtype, w.dtype)
  y = _fp8_dot(ctx, out_dtype, x.dtype, w.dtype, plan, x2, w)
  return y.reshape(x.shape[:-1] + (w.shape[1],))
