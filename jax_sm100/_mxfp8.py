"""MXFP8 (OCP Microscaling) public ops: quantize_mxfp8, mxfp8_matmul, mxfp8_dot and
mxfp8_dot_general, and the launch of their GEMM kernel.

MXFP8 stores e4m3 or e5m2 elements with one power-of-two scale (UE8M0, jnp.float8_e8m0fnu)
per 32 contiguous elements along the contraction dim. The GEMMs (mxfp8_matmul and
mxfp8_dot's three products) run the FFI target jax_sm100_mxfp8_gemm on backend 'sm100'
(the block-scaled tcgen05 kernel: compiled, SASS-checked, emulated, self-tested on first
use, never run on hardware here) and 'cpu_ffi' (its CPU handler); everywhere else,
sm90 included (Hopper has no block-scaled MMA), and for empty operands, this module's
pure-JAX reference (dequantize to float32, XLA dot with float32 accumulation). The
quantizer is the pure-JAX recipe on every backend.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax.custom_batching import custom_vmap

from jax_sm100 import _autodiff, _backend, _checks, _explain, _selftest_guard
from jax_sm100._dot_general import dense_or_lax
from jax_sm100._launch import partition
from jax_sm100._util import cdiv, pad_to, round_up

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
  # The barrier keeps q's FP8 rounding: XLA on GPU folds a convert pair f32 -> f8 -> f32
  # (quantize then dequantize in one program) into nothing (excess precision allowed),
  # which silently skipped the quantization inside mxfp8_dot on an H100.
  q = lax.optimization_barrier(q)
  out = q.astype(jnp.float32) * s * jnp.where(code == 0, np.float32(0.5), np.float32(1.0))
  return jnp.where(code == _CODE_NAN, np.float32(np.nan), out)


def matmul_ref(a, a_scale, b, b_scale, out_dtype):
  """dequantize(a) @ dequantize(b)^T, float32 operands and accumulation, cast to out_dtype."""
  acc = lax.dot_general(dequantize_ref(a, a_scale), dequantize_ref(b, b_scale),
                        (((1,), (1,)), ((), ())), precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
  return acc.astype(out_dtype)


# ----------------------------------------------------------------------------
# The GEMM launch (jax_sm100_mxfp8_gemm) or the reference
# ----------------------------------------------------------------------------

TARGET = "jax_sm100_mxfp8_gemm"
# Backends on which the GEMMs launch TARGET: 'sm100' (the block-scaled tcgen05 kernel)
# and 'cpu_ffi' (its CPU handler). On 'sm90' the target is registered (its handler
# answers kUnimplemented there) but never called: Hopper has no block-scaled MMA.
KERNEL_BACKENDS = ("sm100", "cpu_ffi")
# The kernel's output-tile widths (the attribute block_n): 128x128 and 128x256 tiles.
BLOCK_NS = (128, 256)
_GROUP_M = 8
# SMs of a B200, for the tile-width guess below.
_B200_SMS = 148
# Scale padding code (1.0): padded K blocks and rows meet zero elements, any code but NaN.
_PAD_CODE = 127
_INT32_HALF = 2**30 - 1


def tile_scales(scale, rows: int, k: int):
  """The op's scales (R, ceil(K/32)), R <= rows, -> the kernel's tiled layout
  (ceil(K/128), RT, 32, 16) float8_e8m0fnu, RT = round_up(ceil(rows/128), 2): per 128 rows
  and 128 elements of K a 512-byte chunk holding the scale of row 32c + i and K block j
  at byte 16i + 4c + j (the tensor core's TMEM scale layout, copied there by tcgen05.cp;
  kernels/sm100/mx_scale_layout.h). Padding rows and K blocks get code 127 (1.0)."""
  kt = cdiv(k, 4 * MX_BLOCK)
  rt = 2 * cdiv(cdiv(rows, 128), 2)
  codes = lax.bitcast_convert_type(scale, jnp.uint8)
  codes = pad_to(pad_to(codes, 0, rt * 128, _PAD_CODE), 1, kt * 4, _PAD_CODE)
  x = codes.reshape(rt, 4, 32, kt, 4)            # (row tile, c, i, K tile, j)
  x = x.transpose(3, 0, 2, 1, 4)                 # (K tile, row tile, i, c, j)
  return lax.bitcast_convert_type(x.reshape(kt, rt, 32, 16), E8M0)


def choose_block_n(m: int, n: int) -> int:
  """The output-tile width for an (M, N) product: 256 where the wider tiles still give
  every SM of a B200 a tile, else 128. A guess from the kernel's structure (wider tiles
  read A half as often; narrower ones keep two TMEM accumulators and more tiles), never
  measured: no Blackwell GPU was available."""
  return 256 if n > 128 and cdiv(m, 128) * cdiv(n, 256) >= _B200_SMS else 128


def _launch(a, a_scale, b, b_scale, out_dtype, block_n):
  """The one place that knows the kernel's operand layout: K padded to a multiple of 16
  (a's and b's TMA rows; zeros, inside the last scale block, so the scales stay), N to
  d's 16-byte rows (zero rows of b, sliced off), the scales tiled (tile_scales)."""
  (m, k), n = a.shape, b.shape[0]
  kp, np_ = round_up(k, 16), round_up(n, 16 // out_dtype.itemsize)
  a = pad_to(a, 1, kp)
  b = pad_to(pad_to(b, 1, kp), 0, np_)
  ops = [a, tile_scales(a_scale, m, kp), b, tile_scales(b_scale, np_, kp)]
  bn = block_n or choose_block_n(m, np_)
  attrs = dict(block_n=np.int32(bn), group_m=np.int32(_GROUP_M))
  _explain.note_launch(TARGET, ops, attrs,
                       f"{m}x{np_}x{kp}, tile 128x{bn}"
                       + ("" if block_n else " (choose_block_n: unmeasured guess)"))
  d = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((m, np_), out_dtype))(*ops, **attrs)
  return d[:, :n] if np_ != n else d


# Partitioning: a's scales shard with a (M, and K on 32-element block boundaries only),
# b's with b; a K-sharded product is summed over the shards in the output dtype.
_SPEC = partition.Spec(((("m", "k"), ("m", partition.Block("k", MX_BLOCK)), ("n", "k"),
                         ("n", partition.Block("k", MX_BLOCK)))), (("m", "n"),), exact=("k",),
                       op="mxfp8_matmul")


@_explain.launch_builder
def kernel(out_dtype, block_n: int | None = None):
  """The launch as a custom_vmap function of (a, a_scale, b, b_scale), partitioned by
  _SPEC; block_n None: choose_block_n per call. vmap rule: with only the a side batched
  the vmapped axis folds into M (one launch); with b or b_scale batched the batched
  reference runs (one XLA batched dot, never a loop)."""
  out_dtype = np.dtype(out_dtype)

  def local(a, a_scale, b, b_scale):
    return _launch(a, a_scale, b, b_scale, out_dtype, block_n)

  @custom_vmap
  def call(a, a_scale, b, b_scale):
    return partition.sharded_call(local, _SPEC, a, a_scale, b, b_scale)

  @call.def_vmap
  def rule(axis_size, in_batched, a, a_scale, b, b_scale):
    if not any(in_batched):
      return call(a, a_scale, b, b_scale), False
    if in_batched[2] or in_batched[3]:
      axes = [0 if bt else None for bt in in_batched]
      return jax.vmap(lambda *o: matmul_ref(*o, out_dtype), in_axes=axes)(
          a, a_scale, b, b_scale), True
    a, a_scale = (x if bt else jnp.broadcast_to(x, (axis_size,) + x.shape)
                  for x, bt in zip((a, a_scale), in_batched[:2]))
    m = a.shape[1]
    d = call(a.reshape(axis_size * m, a.shape[2]), a_scale.reshape(axis_size * m, a_scale.shape[2]),
             b, b_scale)
    return d.reshape(axis_size, m, d.shape[1]), True

  return call


def _why_reference(ctx, m: int, n: int, k: int):
  """None when an (M, K) x (N, K) product may launch TARGET on ctx, else why not."""
  if ctx.backend == "sm90":
    return ("Hopper (sm_90a) has no block-scaled MMA: the MXFP8 GEMMs take the reference "
            "path on sm90")
  if ctx.backend not in KERNEL_BACKENDS or not ctx.can_call(TARGET):
    return ctx.why_not(TARGET) or f"backend {ctx.backend!r} has no MXFP8 kernel"
  if min(m, n, k) == 0:
    return "an empty operand"
  if max(m, n, k) > _INT32_HALF:
    return "M, N or K beyond the kernel's 32-bit index range"
  return None


def gemm(ctx, a, a_scale, b, b_scale, out_dtype):
  """(a * a_scale) @ (b * b_scale)^T in out_dtype: the MXFP8 kernel where ctx allows it
  (after the first-use self-test on an unproven backend), else the reference."""
  out_dtype = np.dtype(out_dtype)
  (m, k), n = a.shape, b.shape[0]
  why = _why_reference(ctx, m, n, k)
  if why is None:
    why = _selftest_guard.refusal(ctx, TARGET)
    if why is None:
      return kernel(out_dtype)(a, a_scale, b, b_scale)
  _explain.note_reference(TARGET, [x.shape for x in (a, a_scale, b, b_scale)], why)
  return matmul_ref(a, a_scale, b, b_scale, out_dtype)


# ----------------------------------------------------------------------------
# The kernel's first-use self-test (jax_sm100.selftest family "mxfp8")
# ----------------------------------------------------------------------------
# A case is d = (a * a_scale) @ (b * b_scale)^T with a (M, K), b (N, K) as the op takes
# them (layout "NT"). The self-test draws a and b as N(0, 1) rounded to the case's
# in_dtype; b is then converted (on the host, with ml_dtypes) to the case's b_dtype, and
# the scales are read off the data's bits (one code in [121, 127], 2^-6 .. 1, per
# 32-element block), so they are fresh with the data, differ from block to block, and the
# launch and the float64 reference derive the same ones.

SELFTEST_TILINGS = ((128, 128, 1), (128, 256, 1))
# (M, N, K): partial M and N tiles, K off a multiple of 128 (and of 32); K = 16 (one
# partial scale block, one K stage); more K stages than the kernel's input stages; N off
# the launch layer's padding.
SELFTEST_SHAPES = ((300, 264, 336), (130, 136, 16), (257, 392, 1040), (72, 260, 200))
_SELFTEST_FORMATS = (("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"),
                     ("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e5m2"))
_SELFTEST_OUTS = ("bfloat16", "float32", "float16", "bfloat16")
_UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
_SHORT = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "bfloat16": "bf16", "float16": "f16",
          "float32": "f32"}


@functools.lru_cache(maxsize=None)
def _selftest_case_class(case_cls):
  """selftest.Case with b's element type (b_dtype; in_dtype is a's)."""

  @dataclasses.dataclass(frozen=True)
  class MxCase(case_cls):
    b_dtype: str = "float8_e4m3fn"

    def describe(self) -> str:
      return (f"{self.family} 128x{self.tiling[1]}, {_SHORT[self.in_dtype]} x "
              f"{_SHORT[self.b_dtype]}->{_SHORT[self.out_dtype]}, {self.shapes()}")

  return MxCase


def selftest_cases(case_cls, tilings) -> list:
  """The family's cases on `tilings`: each shape on each tiling, formats and output types
  rotated so that each tiling sees e4m3 / e5m2 in every mix and each output type."""
  cls = _selftest_case_class(case_cls)
  out = []
  for ti, tiling in enumerate(tilings):
    for si, (m, n, k) in enumerate(SELFTEST_SHAPES):
      fa, fb = _SELFTEST_FORMATS[(si + ti) % len(_SELFTEST_FORMATS)]
      odt = _SELFTEST_OUTS[(si + 2 * ti) % len(_SELFTEST_OUTS)]
      out.append(cls("mxfp8", tiling, False, True, fa, odt, (m, k), (n, k), b_dtype=fb))
  return out


def selftest_tilings(backend: str) -> tuple:
  """The kernel's tilings (block_m, block_n, cluster): the same on every backend."""
  del backend
  return SELFTEST_TILINGS


def _selftest_operands(case, a, b):
  """(a, a_scale, b, b_scale) as NumPy arrays (see the section comment)."""
  a = np.asarray(a)
  b = np.asarray(b).astype(np.float32).astype(np.dtype(jnp.dtype(case.b_dtype)))

  def scales(q):
    bits = q.view(np.uint8)[:, ::MX_BLOCK].astype(np.int32)
    return (121 + bits % 7).astype(np.uint8).view(E8M0)
  return a, scales(a), b, scales(b)


def selftest_kernel(case, a, b, c):
  """The case on the kernel (through the launch layer, the case's tile width)."""
  del c
  return jax.jit(kernel(np.dtype(jnp.dtype(case.out_dtype)), case.tiling[1]))(
      *_selftest_operands(case, a, b))


def selftest_reference(case, a, b, c):
  del c
  out = np.dtype(jnp.dtype(case.out_dtype))
  return jax.jit(lambda *o: matmul_ref(*o, out))(*_selftest_operands(case, a, b))


def selftest_expected(case, a, b, c):
  """(float64 product of the dequantized operands, scalar tolerance): one unit in the last
  place of the output type at the largest value (the final rounding, with margin) plus
  2^-12 of the largest sum of |terms| (fp32 accumulation, with room for a tensor core that
  keeps fewer bits inside one MMA). A scale from the wrong block or row, a dropped K block
  or a layout error moves elements by a fair fraction of their size."""
  del c
  a, a_s, b, b_s = _selftest_operands(case, a, b)

  def deq(q, s):
    codes = np.repeat(s.view(np.uint8).astype(np.float64), MX_BLOCK, axis=1)[:, :q.shape[1]]
    return q.astype(np.float64) * 2.0 ** (codes - 127.0)
  a64, b64 = deq(a, a_s), deq(b, b_s)
  want = a64 @ b64.T
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * float(np.abs(want).max())
         + 2.0**-12 * float((np.abs(a64) @ np.abs(b64).T).max()) + 1e-30)
  return want, tol


# ----------------------------------------------------------------------------
# quantize_mxfp8
# ----------------------------------------------------------------------------

def quantize_mxfp8(x, *, dtype=jnp.float8_e4m3fn):
  """Quantize x (..., C) to MXFP8: one UE8M0 scale per 32 contiguous elements of the
  last axis (OCP Microscaling Formats v1.0).

  Returns (q, scale): q has x's shape and `dtype` (float8_e4m3fn or float8_e5m2);
  scale has shape (..., ceil(C/32)) and dtype float8_e8m0fnu, and x ~= q * scale per
  block. The pure-JAX recipe on every backend (no quantize kernel).

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
    Backend 'sm100': the block-scaled tcgen05 kernel (never run on hardware here;
    self-tested on first use); 'cpu_ffi': its CPU handler; elsewhere, sm90 included,
    the reference (dequantize + XLA dot). Not differentiable (its inputs are
    quantized); use mxfp8_dot for training.
  """
  op = "mxfp8_matmul"
  a, b, a_scale, b_scale, m, n, k = _checks.fp8_operands(op, a, b, a_scale, b_scale)
  _check_scale(op, "a_scale", a_scale, (m, cdiv(k, MX_BLOCK)), "(M, ceil(K/32))")
  _check_scale(op, "b_scale", b_scale, (n, cdiv(k, MX_BLOCK)), "(N, ceil(K/32))")
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.bfloat16)
  ctx = _backend.context()
  return _autodiff.not_differentiable(
      op, "Use mxfp8_dot (quantization inside, MXFP8 backward) to train.",
      lambda *o: gemm(ctx, *o, out_dtype), a, a_scale, b, b_scale)


# ----------------------------------------------------------------------------
# mxfp8_dot
# ----------------------------------------------------------------------------

def _product(ctx, a, b, dt, out_dtype):
  """Q(a) @ Q(b)^T for a (M, C), b (N, C), each quantized along C (the contraction)."""
  aq, a_s = quantize_ref(a, dt)
  bq, b_s = quantize_ref(b, dt)
  return gemm(ctx, aq, a_s, bq, b_s, out_dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4, 5))
def _mxfp8_dot(ctx, out_dtype, x_dtype, w_dtype, dt, gdt, x2, w):
  del x_dtype, w_dtype, gdt
  return _product(ctx, x2, w.T, dt, out_dtype)     # contraction over K


def _mxfp8_dot_fwd(ctx, out_dtype, x_dtype, w_dtype, dt, gdt, x2, w):
  del x_dtype, w_dtype, gdt
  y = _product(ctx, x2, w.T, dt, out_dtype)
  # Residuals in MXFP8, quantized along the backward products' contraction dims:
  # x^T (K, M) along M for dw, w (K, N) along N for dx.
  return y, (quantize_ref(x2.T, dt), quantize_ref(w, dt))


def _mxfp8_dot_bwd(ctx, out_dtype, x_dtype, w_dtype, dt, gdt, res, g):
  del out_dtype
  (xtq, xts), (wq, ws) = res
  # dx (M, K) = g (M, N) @ w^T: contraction over N; g quantized along N.
  gq, gs = quantize_ref(g, gdt)
  dx = gemm(ctx, gq, gs, wq, ws, x_dtype)
  # dw (K, N) = x^T (K, M) @ g (M, N): contraction over M; g^T quantized along M.
  gtq, gts = quantize_ref(g.T, gdt)
  dw = gemm(ctx, xtq, xts, gtq, gts, w_dtype)
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
    between the passes). The three products run as mxfp8_matmul does (the kernel on
    'sm100' and 'cpu_ffi', else the reference); the quantizer is the pure-JAX recipe.
    Reverse mode only (jax.grad, jax.vjp, jax.jacrev).
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
  ctx = _backend.context()
  with _autodiff.reverse_mode_only(op, x2, w):
    y = _mxfp8_dot(ctx, out_dtype, np.dtype(x.dtype), np.dtype(w.dtype), dt, gdt, x2, w)
  return y.reshape(x.shape[:-1] + (w.shape[1],))


def mxfp8_dot_general(lhs, rhs, dimension_numbers, precision=None,
                      preferred_element_type=None, **kwargs):
  """jax.lax.dot_general computed in MXFP8 (jax_sm100.mxfp8_dot, e4m3) for the
  dense-layer pattern: no batch dims, lhs contracting its trailing dims with rhs's
  leading dims. Everything else (batch dims, other layouts, precision or sharding
  requests) goes to lax.dot_general unchanged."""
  return dense_or_lax(mxfp8_dot, lhs, rhs, dimension_numbers, precision, preferred_element_type,
                      kwargs)
