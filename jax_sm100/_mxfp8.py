"""MXFP8 (OCP Microscaling) public ops: quantize_mxfp8, mxfp8_matmul, mxfp8_dot and
mxfp8_dot_general.

MXFP8 stores e4m3 or e5m2 elements with one power-of-two scale (UE8M0, jnp.float8_e8m0fnu)
per 32 contiguous elements along the contraction dim. These ops have no kernel yet: they
run this module's pure-JAX reference (quantize with jax.numpy, dequantize to float32,
XLA dot with float32 accumulation) on every backend, sm90 and sm100 included.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_sm100 import _autodiff, _checks
from jax_sm100._dot_general import dense_or_lax
from jax_sm100._util import cdiv

# Elements per scale (the OCP MX block size k).
MX_BLOCK = 32
E8M0 = np.dtype(jnp.float8_e8m0fnu)
# emax_elem of the OCP spec: the exponent of the element format's largest normal
# (e4m3: 448 = 1.75 * 2^8, e5m2: 57344 = 1.75 * 2^15).
_EMAX_ELEM = {np.dtype(jnp.float8_e4m3fn): 8, np.dtype(jnp.float8_e5m2): 15}
# UE8M0 codes: value 2^(code - 127); 0 is 2^-127, 254 is 2^127, 255 is NaN (no zero, no Inf).
_CODE_MIN, _CODE_MAX, _CODE_NAN = 0, 254, 255


def _fp8_dtype(op: str, name: str, dtype) -> np.dtype:
  try:
    dt = np.dtype(dtype)
  except TypeError:
    dt = None
  if dt not in _checks.FP8_DTYPES:
    raise TypeError(f"jax_sm100.{op}: {name} must be float8_e4m3fn or float8_e5m2; "
                    f"got {dtype!r}.")
  return dt


# ----------------------------------------------------------------------------
# The reference recipe (no validation)
# ----------------------------------------------------------------------------

def _pow2(e):
  """2.0**e as float32 for int32 e in [-126, 127] (exact: built from the exponent bits)."""
  return lax.bitcast_convert_type((e + 127) << 23, jnp.float32)


def quantize_ref(x, dtype):
  """The MXFP8 quantization recipe along x's last axis: (q, scale). See quantize_mxfp8."""
  dtype = np.dtype(dtype)
  c = x.shape[-1]
  nb = cdiv(c, MX_BLOCK)
  x32 = x.astype(jnp.float32)
  pad = [(0, 0)] * (x.ndim - 1) + [(0, nb * MX_BLOCK - c)]
  xb = jnp.pad(x32, pad).reshape(x.shape[:-1] + (nb, MX_BLOCK))
  amax = jnp.max(jnp.abs(xb), axis=-1)
  # floor(log2(amax)) + 127 is amax's biased float32 exponent field (0 for zero and
  # subnormal amax: both clamp to the smallest scale below).
  biased = (lax.bitcast_convert_type(amax, jnp.int32) >> 23) & 0xFF
  code = jnp.clip(biased - _EMAX_ELEM[dtype], _CODE_MIN, _CODE_MAX)
  # NaN or +-Inf anywhere in a block (XLA CPU's max reduction can drop a NaN, so it is
  # tested directly): the NaN scale, and NaN elements.
  bad = jnp.any(~jnp.isfinite(xb), axis=-1)
  code = jnp.where(bad, _CODE_NAN, code)
  # x / 2^(code-127) as a multiplication by the exact reciprocal 2^(127-code), a
  # normal float32 for every code in [0, 246] that finite inputs produce.
  inv = _pow2(127 - jnp.minimum(code, _CODE_MAX))
  fmax = float(jnp.finfo(dtype).max)
  v = jnp.clip(xb * inv[..., None], -fmax, fmax)                   # saturate
  v = jnp.where(bad[..., None], np.float32(np.nan), v)
  q = v.astype(dtype).reshape(x.shape[:-1] + (nb * MX_BLOCK,))[..., :c]
  scale = lax.bitcast_convert_type(code.astype(jnp.uint8), E8M0)
  return q, scale


def dequantize_ref(q, scale):
  """q * 2^(code-127) per 32-element block along the last axis, float32.

  The scale 2^-127 (code 0) is a float32 subnormal, which XLA on CPU flushes to zero;
  it is applied as 2^-126 * 0.5 so a product that is a normal float32 stays exact on
  every backend. Code 255 (NaN) gives NaN."""
  c = q.shape[-1]
  code = lax.bitcast_convert_type(scale, jnp.uint8).astype(jnp.int32)
  code = jnp.repeat(code, MX_BLOCK, axis=-1)[..., :c]
  s = _pow2(jnp.clip(code, 1, _CODE_MAX) - 127)
  out = q.astype(jnp.float32) * s * jnp.where(code == 0, np.float32(0.5), np.float32(1.0))
  return jnp.where(code == _CODE_NAN, np.float32(np.nan), out)


def matmul_ref(a, a_scale, b, b_scale, out_dtype):
  """dequantize(a) @ dequantize(b)^T, float32 operands and accumulation, cast to out_dtype."""
  acc = lax.dot_general(dequantize_ref(a, a_scale), dequantize_ref(b, b_scale),
                        (((1,), (1,)), ((), ())), precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
  return acc.astype(out_dtype)


# ----------------------------------------------------------------------------
# quantize_mxfp8
# ----------------------------------------------------------------------------

def quantize_mxfp8(x, *, dtype=jnp.float8_e4m3fn):
  """Quantize x (..., C) to MXFP8: one UE8M0 scale per 32 contiguous elements of the
  last axis (OCP Microscaling Formats v1.0).

  Returns (q, scale): q has x's shape and `dtype` (float8_e4m3fn or float8_e5m2);
  scale has shape (..., ceil(C/32)) and dtype float8_e8m0fnu, and x ~= q * scale per
  block. Reference path on every backend (no kernel yet).

  Exact recipe (on x converted to float32):
    amax  = max |x| over the block (a partial last block: its missing elements are 0)
    e     = floor(log2(amax)) - emax_elem   (emax_elem: 8 for e4m3, 15 for e5m2; the
                                             OCP v1.0 rule, not jax.nn's round-up rule)
    e     = clip(e, -127, 127)              (the float8_e8m0fnu range; an all-zero
                                             block gets the smallest scale, 2^-127, q 0)
    scale = 2^e
    q     = dtype(clip(x / scale, -max, max))   (round to nearest even, saturating)
  Since amax / scale lies in [2^emax_elem, 2^(emax_elem+1)), the largest elements of a
  block whose amax has a significand above 1.75 saturate to the format max (448 or
  57344), as the spec's rule implies. (jax's cuDNN MXFP8 helper rounds amax / max up to
  a power of two instead: the same scale for all other blocks, twice it for these.)
  A NaN or +-Inf anywhere in a block gives that block the NaN scale (code 0xFF) and NaN
  elements. Backends that flush float32 subnormals (XLA on CPU) treat subnormal inputs
  as zero.

  Not differentiable (a TypeError names the op); mxfp8_dot quantizes inside a
  custom_vjp for training.
  """
  op = "quantize_mxfp8"
  x = _checks.as_array(op, "x", x)
  _checks.check_dtype(op, "x", x, _checks.FLOAT_DTYPES)
  _checks.check_rank(op, "x", x, 1, "(..., C)")
  dt = _fp8_dtype(op, "dtype", dtype)
  return _autodiff.not_differentiable(
      op, "For training, mxfp8_dot quantizes inside a custom_vjp with an MXFP8 backward.",
      lambda x: quantize_ref(x, dt), x)


# ----------------------------------------------------------------------------
# mxfp8_matmul
# ----------------------------------------------------------------------------

def _check_scale(op, name, s, want, layout):
  _checks.check_dtype(op, name, s, (E8M0,))
  if tuple(s.shape) != tuple(want):
    raise ValueError(f"jax_sm100.{op}: {name} must have shape {layout} = {tuple(want)}; "
                     f"got {tuple(s.shape)}.")


def mxfp8_matmul(a, a_scale, b, b_scale, *, out_dtype=jnp.bfloat16):
  """dequantize(a, a_scale) @ dequantize(b, b_scale)^T with MXFP8 (UE8M0) block scales.

  Args:
    a: (M, K) float8_e4m3fn or float8_e5m2, scaled by a_scale (M, ceil(K/32))
      float8_e8m0fnu: one scale per 32 contiguous elements along K (what
      quantize_mxfp8 returns).
    b: (N, K) float8_e4m3fn or float8_e5m2 (K-major, i.e. the weight transposed, as in
      fp8_blockwise_matmul), scaled by b_scale (N, ceil(K/32)) float8_e8m0fnu.
    out_dtype: bfloat16 (default), float16 or float32.
  Returns:
    (M, N) in out_dtype: the operands dequantized to float32 (exact), multiplied with
    float32 accumulation, rounded once to out_dtype. A NaN scale makes its block NaN.
    Reference path (dequantize + XLA dot) on every backend: no kernel yet. Not
    differentiable (its inputs are quantized); use mxfp8_dot for training.
  """
  op = "mxfp8_matmul"
  a, b, a_scale, b_scale, m, n, k = _checks.fp8_operands(op, a, b, a_scale, b_scale)
  _check_scale(op, "a_scale", a_scale, (m, cdiv(k, MX_BLOCK)), "(M, ceil(K/32))")
  _check_scale(op, "b_scale", b_scale, (n, cdiv(k, MX_BLOCK)), "(N, ceil(K/32))")
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.bfloat16)
  return _autodiff.not_differentiable(
      op, "Use mxfp8_dot (quantization inside, MXFP8 backward) to train.",
      lambda *o: matmul_ref(*o, out_dtype), a, a_scale, b, b_scale)


# ----------------------------------------------------------------------------
# mxfp8_dot
# ----------------------------------------------------------------------------

def _product(a, b, dt, out_dtype):
  """Q(a) @ Q(b)^T for a (M, C), b (N, C), each quantized along C (the contraction)."""
  aq, a_s = quantize_ref(a, dt)
  bq, b_s = quantize_ref(b, dt)
  return matmul_ref(aq, a_s, bq, b_s, out_dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _mxfp8_dot(out_dtype, x_dtype, w_dtype, dt, gdt, x2, w):
  del x_dtype, w_dtype, gdt
  return _product(x2, w.T, dt, out_dtype)          # contraction over K


def _mxfp8_dot_fwd(out_dtype, x_dtype, w_dtype, dt, gdt, x2, w):
  del x_dtype, w_dtype, gdt
  y = _product(x2, w.T, dt, out_dtype)
  # Residuals in MXFP8, quantized along the backward products' contraction dims:
  # x^T (K, M) along M for dw, w (K, N) along N for dx.
  return y, (quantize_ref(x2.T, dt), quantize_ref(w, dt))


def _mxfp8_dot_bwd(out_dtype, x_dtype, w_dtype, dt, gdt, res, g):
  del out_dtype
  (xtq, xts), (wq, ws) = res
  # dx (M, K) = g (M, N) @ w^T: contraction over N; g quantized along N.
  gq, gs = quantize_ref(g, gdt)
  dx = matmul_ref(gq, gs, wq, ws, x_dtype)
  # dw (K, N) = x^T (K, M) @ g (M, N): contraction over M; g^T quantized along M.
  gtq, gts = quantize_ref(g.T, gdt)
  dw = matmul_ref(xtq, xts, gtq, gts, w_dtype)
  return dx, dw


_mxfp8_dot.defvjp(_mxfp8_dot_fwd, _mxfp8_dot_bwd)


def mxfp8_dot(x, w, *, out_dtype=None, dtype=jnp.float8_e4m3fn, grad_dtype=None):
  """x @ w computed in MXFP8 (one UE8M0 scale per 32 elements along each product's
  contraction dim), with an MXFP8 backward.

  Args:
    x: (..., K) bfloat16, float16 or float32; quantized along K.
    w: (K, N) bfloat16, float16 or float32; quantized along K (its columns).
    out_dtype: bfloat16, float16 or float32; defaults to the promoted input dtype.
    dtype: element type of x and w (float8_e4m3fn or float8_e5m2).
    grad_dtype: element type of the incoming gradient; defaults to `dtype`
      (float8_e5m2 gives the "hybrid" recipe).
  Returns:
    (..., N). Forward Q(x) @ Q(w); its custom_vjp runs the backward in MXFP8 too:
    dx = Q(g) @ Q(w)^T with g and w quantized along N, dw = Q(x)^T @ Q(g) with x and g
    quantized along M (the quantize_mxfp8 recipe each time; x and w are kept in MXFP8
    between the passes). Reference path (dequantize + XLA dot) on every backend: no
    kernel yet. Reverse mode only (jax.grad, jax.vjp, jax.jacrev).
  """
  op = "mxfp8_dot"
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
  dt = _fp8_dtype(op, "dtype", dtype)
  gdt = dt if grad_dtype is None else _fp8_dtype(op, "grad_dtype", grad_dtype)
  x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
  with _autodiff.reverse_mode_only(op, x2, w):
    y = _mxfp8_dot(out_dtype, np.dtype(x.dtype), np.dtype(w.dtype), dt, gdt, x2, w)
  return y.reshape(x.shape[:-1] + (w.shape[1],))


def mxfp8_dot_general(lhs, rhs, dimension_numbers, precision=None,
                      preferred_element_type=None, **kwargs):
  """jax.lax.dot_general computed in MXFP8 (jax_sm100.mxfp8_dot, e4m3) for the
  dense-layer pattern: no batch dims, lhs contracting its trailing dims with rhs's
  leading dims. Everything else (batch dims, other layouts, precision or sharding
  requests) goes to lax.dot_general unchanged."""
  return dense_or_lax(mxfp8_dot, lhs, rhs, dimension_numbers, precision, preferred_element_type,
                      kwargs)
