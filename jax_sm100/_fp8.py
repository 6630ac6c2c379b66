"""FP8 public ops: blockwise quantization, the blockwise-scaled matmul, and fp8_dot
(validation, custom_vjp, docstrings); launches and layouts are in _launch/."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _activations, _autodiff, _backend, _checks
from jax_sm100._launch import fp8 as _fp8_launch
from jax_sm100._launch import quantize as _quant
from jax_sm100._reference import FP8_BLOCK as BLOCK
from jax_sm100._util import cdiv

E4M3 = np.dtype(jnp.float8_e4m3fn)


# ----------------------------------------------------------------------------
# quantize_fp8_blockwise
# ----------------------------------------------------------------------------

def quantize_fp8_blockwise(x, *, block=(1, 128), dtype=jnp.float8_e4m3fn,
                           scale_transposed=False):
  """Quantize x (R, C) to FP8 with one float32 scale per (block[0], block[1]) tile.

  Returns (q, scale): q has x's shape and `dtype`; scale is float32 of shape
  (ceil(R/block[0]), ceil(C/block[1])) and x ~= q * scale per tile.
  scale_transposed=True returns that scale transposed, (ceil(C/block[1]),
  ceil(R/block[0])), the same values. With 1x128 blocks these are the transposed A
  scales fp8_blockwise_matmul(..., a_scale_transposed=True) reads as they are
  (cuBLASLt's and DeepGEMM's M-major scale layout); the quantize kernel writes them
  directly.

  Exact recipe (all float32, on x converted to float32; any kernel that
  implements it must agree with this reference bit for bit):
    amax  = max |x| over the tile (edge tiles: over the elements that exist)
    scale = amax * float32(1 / max)       (max: largest finite value of dtype)
    scale = 1.0 where scale == 0          (all-zero tile, or amax*(1/max)
                                           underflows: q is then 0 - never 0/0)
    q     = dtype(clip(x * (1.0 / scale), -max, max))   (saturating)
  so each tile's largest |x| maps to the format's max. A NaN in a tile gives
  that tile a NaN scale and NaN q (kept visible, not hidden).

  Not differentiable on any backend (a TypeError names the op when a derivative
  reaches it); fp8_dot quantizes inside a custom_vjp for training.
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

  def run(x):
    if not scale_transposed:
      return _quant.quantize(ctx, x, block, dt)
    if block == (1, BLOCK):  # transposed A scales, written so by the kernel
      return _quant.quantize(ctx, x, block, dt, scale_transposed=True)
    q, s = _quant.quantize(ctx, x, block, dt)
    return q, s.T

  return _autodiff.not_differentiable(
      op, "For training, fp8_dot quantizes inside a custom_vjp with an FP8 backward.", run, x)


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
      blocks along K; with a_scale_transposed=True, a_scale comes as the
      transposed A scales, (ceil(K/128), M): the layout the kernel reads
      (cuBLASLt's and DeepGEMM's M-major A scales, what quantize_fp8_blockwise(...,
      scale_transposed=True) returns), so no transpose runs before it (a pad when
      M % 4 != 0).
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
  a, b, a_scale, b_scale, m, n, k = _checks.fp8_operands(op, a, b, a_scale, b_scale)
  a_scale_transposed = _checks.static_bool(op, "a_scale_transposed", a_scale_transposed)
  if a_scale_transposed:
    _check_scale(op, "a_scale", a_scale, (cdiv(k, BLOCK), m),
                 "(ceil(K/128), M) with a_scale_transposed=True")
  else:
    _check_scale(op, "a_scale", a_scale, (m, cdiv(k, BLOCK)))
  _check_scale(op, "b_scale", b_scale, (cdiv(n, BLOCK), cdiv(k, BLOCK)))
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
  ctx = _backend.context()

  def run(a, a_scale, b, b_scale, c):
    return _fp8_launch.fp8_gemm(ctx, a, a_scale, b, b_scale,
                                a_scale_transposed=a_scale_transposed, c=c, beta=beta,
                                out_dtype=out_dtype)

  return _autodiff.not_differentiable(
      op, "Use fp8_dot (quantization inside, FP8 backward) to train.", run,
      a, a_scale, b, b_scale, c)


# ----------------------------------------------------------------------------
# fp8_dot (DeepSeek-V3 recipe)
# ----------------------------------------------------------------------------

def _plan(ctx, m: int, k: int, n: int, out_dtype, x_dtype, w_dtype):
  """Which of fp8_dot's products (y, dw, dx) take a's scales straight from the
  quantizer as a_scale_t (transposed A scales, the layout the FP8 GEMM reads; no XLA
  transpose in between): a static tuple of three bools, True where that product
  runs the kernel. y (M, N) contracts K, dw (K, N) contracts M, dx (M, K) contracts
  N. jax_sm100.tuning.override(fp8_fused_scales=False) turns it off: the GEMMs then
  transpose the scales with XLA."""
  if ctx.tuning is not None and not ctx.tuning.fp8_fused_scales:
    return (False, False, False)
  ok = _fp8_launch.kernel_ok
  return (ok(ctx, m, n, k, out_dtype), ok(ctx, k, n, m, w_dtype), ok(ctx, m, k, n, x_dtype))


def _product(ctx, aq, a_s, bq, b_s, out_dtype, a_scale_transposed: bool):
  """(aq*a_s) @ (bq*b_s)^T; a_s is a_scale_t (from a quantizer, for_gemm) when
  a_scale_transposed."""
  return _fp8_launch.fp8_gemm(ctx, aq, a_s, bq, b_s, a_scale_transposed=a_scale_transposed,
                              out_dtype=out_dtype)


def _quantize_weight(ctx, w):
  """w (K, N) in 128x128 blocks, both ways: ((wq (K, N), ws (K/128, N/128)), (wtq (N, K),
  wts (N/128, K/128))), the same tiles. With the dual kernel one read of w gives both
  (no XLA transpose of w); without it w^T is quantized and transposed back (exact)."""
  if ctx.can_call(_quant.DUAL_TARGET):
    return _quant.quantize_dual(ctx, w, BLOCK, block_rows=BLOCK)
  wtq, wts = _quant.quantize(ctx, w.T, (BLOCK, BLOCK), E4M3)
  return (wtq.T, wts.T), (wtq, wts)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _fp8_dot(ctx, out_dtype, x_dtype, w_dtype, plan, x2, w):
  del x_dtype, w_dtype
  # x in 1x128 blocks along K, w^T in 128x128 blocks: (N, K).
  xq, xs = _quant.quantize(ctx, x2, (1, BLOCK), E4M3, plan[0], for_gemm=True)
  _, (wtq, wts) = _quantize_weight(ctx, w)
  return _product(ctx, xq, xs, wtq, wts, out_dtype, plan[0])


def _fp8_dot_fwd(ctx, out_dtype, x_dtype, w_dtype, plan, x2, w):
  del x_dtype, w_dtype
  # x in 1x128 blocks along K for y, and x^T in 1x128 blocks along M for the
  # weight gradient: one pass over x. The residual is that FP8 copy (half the
  # bytes of a bf16 x), not x itself.
  (xq, xs), (xtq, xts) = _quant.quantize_dual(ctx, x2, 1, plan[0], plan[1])
  # w^T (N, K) for y, w (K, N) for dx: the same 128x128 tiles, quantized once.
  (wq, ws), (wtq, wts) = _quantize_weight(ctx, w)
  y = _product(ctx, xq, xs, wtq, wts, out_dtype, plan[0])
  return y, (xtq, xts, wq, ws)


def _fp8_dot_bwd(ctx, out_dtype, x_dtype, w_dtype, plan, res, g):
  del out_dtype
  xtq, xts, wq, ws = res
  # g in 1x128 blocks along N (dx's contraction) and g^T in 128x128 blocks
  # (dw's right operand): one pass over g.
  (gq, gs), (gtq, gts) = _quant.quantize_dual(ctx, g, BLOCK, plan[2])
  # dx (M, K) = g (M, N) @ w^T: the (K, N) operand is Q(w).
  dx = _product(ctx, gq, gs, wq, ws, x_dtype, plan[2])
  # dw (K, N) = x^T (K, M) @ g (M, N): contraction over M in both operands.
  dw = _product(ctx, xtq, xts, gtq, gts, w_dtype, plan[1])
  return dx, dw


_fp8_dot.defvjp(_fp8_dot_fwd, _fp8_dot_bwd)


# ---------------------------------------------------------------------------
# fp8_dot with the bias and activation fused into the FP8 kernel's epilogue
# (jax_sm100_fp8_gemm_bias: sm90, sm100 after its self-test, cpu_ffi). Forward: d =
# act(Q(x) @ Q(w) + bias) with z in fp32, rounded once. Under differentiation gelu/silu
# fuse the bias only and write z (bf16; this kernel has no epilogue writing both d and
# z), XLA applies the activation and z is saved; relu saves d; then, as for matmul_bias
# (_activations.epilogue_grads), dz = g * act'(z) in fp32 rounded to g's dtype, the bias
# gradient the fp32 sum of that dz over rows; dz feeds the FP8 backward. With an
# activation, dz is computed, quantized both ways and summed inside the dual quantizer
# (_launch/quantize.dact_quantize_dual: one pass over g and z, dz never written).
# ---------------------------------------------------------------------------

def _fused_forward(ctx, plan, name, x2, w, bias, for_grad: bool):
  """(d, FP8 residuals of the backward or None): the fused launch on Q(x), Q(w)."""
  if for_grad:
    (xq, xs), (xtq, xts) = _quant.quantize_dual(ctx, x2, 1, plan[0], plan[1])
    (wq, ws), (wtq, wts) = _quantize_weight(ctx, w)
    res = (xtq, xts, wq, ws)
  else:
    xq, xs = _quant.quantize(ctx, x2, (1, BLOCK), E4M3, plan[0], for_gemm=True)
    _, (wtq, wts) = _quantize_weight(ctx, w)
    res = None
  return _fp8_launch.fp8_gemm_bias(ctx, xq, xs, wtq, wts, bias, name), res


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4, 5, 6))
def _fp8_dot_fused(ctx, out_dtype, x_dtype, w_dtype, plan, name, has_bias, x2, w, bias):
  del out_dtype, x_dtype, w_dtype
  return _fused_forward(ctx, plan, name, x2, w, bias if has_bias else None, False)[0]


def _fp8_dot_fused_fwd(ctx, out_dtype, x_dtype, w_dtype, plan, name, has_bias, x2, w, bias):
  del out_dtype, x_dtype, w_dtype
  bias = bias if has_bias else None
  if name in _activations.NEEDS_PRE:
    z, res = _fused_forward(ctx, plan, "none", x2, w, bias, True)
    d = _activations.rounded(name, z)
    return d, (res, z)
  d, res = _fused_forward(ctx, plan, name, x2, w, bias, True)
  return d, (res, d if name == "relu" else None)


def _fp8_dot_fused_bwd(ctx, out_dtype, x_dtype, w_dtype, plan, name, has_bias, res, g):
  fp8_res, saved = res
  if name == "none":
    dz, dbias = _activations.epilogue_grads(name, saved, g, has_bias)
    dx, dw = _fp8_dot_bwd(ctx, out_dtype, x_dtype, w_dtype, plan, fp8_res, dz)
    return dx, dw, dbias
  # dz = g * act'(z) rounded to g's dtype, quantized both ways, and its column sums, in
  # the quantizer's one pass over g and z (dz is not written); the products as _fp8_dot_bwd.
  xtq, xts, wq, ws = fp8_res
  (gq, gs), (gtq, gts), dbias = _quant.dact_quantize_dual(ctx, g, saved, name, plan[2])
  dx = _product(ctx, gq, gs, wq, ws, x_dtype, plan[2])
  dw = _product(ctx, xtq, xts, gtq, gts, w_dtype, plan[1])
  return dx, dw, dbias if has_bias else jnp.zeros((0,), jnp.float32)


_fp8_dot_fused.defvjp(_fp8_dot_fused_fwd, _fp8_dot_fused_bwd)


def fp8_dot(x, w, *, bias=None, activation=None, out_dtype=None):
  """act(x @ w + bias) with x @ w computed in FP8 with blockwise scales (DeepSeek-V3 recipe).

  Args:
    x: (..., K) bfloat16, float16 or float32; quantized in 1x128 blocks along K.
    w: (K, N) bfloat16, float16 or float32; quantized in 128x128 blocks.
    bias: None, or shape (N,) of any float dtype (added in float32; its gradient comes
      back in its own dtype).
    activation: None (identity), "relu", "gelu" (tanh approximation, jax.nn.gelu's
      default; also "gelu_tanh"), "gelu_exact" (also "gelu_erf"), "silu" (also "swish"):
      matmul_bias's names.
    out_dtype: bfloat16, float16 or float32; defaults to the promoted input dtype.
  Returns:
    (..., N). Its custom_vjp runs the backward in FP8 too: dx = Q(g) @ Q(w)^T
    and dw = Q(x)^T @ Q(g), each operand quantized in 1x128 (activations and
    gradients) or 128x128 blocks along that product's contraction dim.

  With a bias or an activation: on sm90, sm100 (once the fp8_gemm_bias family's
  first-use self-test passed) and cpu_ffi, for a bfloat16 output, the FP8 kernel's
  epilogue fuses them: z = x @ w + bias in float32, act(z) rounded once (under
  differentiation gelu and silu fuse the bias only and XLA applies the activation to z
  rounded to out_dtype, as matmul_bias does). Elsewhere the FP8 product y = x @ w is rounded to
  out_dtype as without them, then z = y + bias and act(z) are evaluated in float32 and
  rounded once more (one XLA elementwise pass after the GEMM). Under differentiation
  g * act'(z) is the product's cotangent (rounded to out_dtype) and the bias gradient is
  the float32 sum of that rounded cotangent over rows.
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
  name = _activations.canonical(op, activation)
  bias = _checks.bias_vector(op, bias, w.shape[1])
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.promote_types(x.dtype, w.dtype))
  x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
  ctx = _backend.context()
  plan = _plan(ctx, x2.shape[0], x2.shape[1], w.shape[1], out_dtype, x.dtype, w.dtype)
  if ((bias is not None or name != "none") and plan[0]
      and _fp8_launch.bias_kernel_ok(ctx, x2.shape[0], w.shape[1], x2.shape[1], out_dtype)):
    bias32 = jnp.zeros((0,), jnp.float32) if bias is None else bias.astype(jnp.float32)
    with _autodiff.reverse_mode_only(op, x2, w, bias32):
      y = _fp8_dot_fused(ctx, out_dtype, x.dtype, w.dtype, plan, name, bias is not None, x2,
                         w, bias32)
    return y.reshape(x.shape[:-1] + (w.shape[1],))
  with _autodiff.reverse_mode_only(op, x2, w):
    y = _fp8_dot(ctx, out_dtype, x.dtype, w.dtype, plan, x2, w)
  if bias is not None or name != "none":
    z = y.astype(jnp.float32)
    if bias is not None:
      z = z + bias.astype(jnp.float32)
    y = _activations.apply(name, z).astype(out_dtype)
  return y.reshape(x.shape[:-1] + (w.shape[1],))
