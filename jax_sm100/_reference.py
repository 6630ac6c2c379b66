"""Reference math: what every kernel computes, in plain jax.numpy.

The ops take these paths on CPU, unsupported devices and unsupported calls, and
the tests compare the kernels against them. Layouts are the documented ones: a's
FP8 scales are (M, ceil(K/128)) here; the transposed layout the GEMM kernel
reads (`a_scale_t`) is the launch layer's business.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_sm100._util import cdiv

# The FP8 kernels' scaling block: 1x128 for activations, 128x128 for weights.
FP8_BLOCK = 128


def gemm(a, b, trans_a, trans_b, out_dtype, c=None, alpha=1.0, beta=0.0):
  """alpha * op(a) @ op(b) + beta * c in fp32, cast to out_dtype.

  op(a) is a (..., M, K), or a (..., K, M) transposed when trans_a; op(b) is
  b (..., K, N), or b (..., N, K) transposed when trans_b. beta == 0 is a static
  branch: c is not read at all (NaN in c does not propagate), as in the kernel.
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
  # The barrier keeps q's FP8 rounding: XLA on GPU folds a convert pair f32 -> f8 -> f32
  # (quantize then dequantize in one program) into nothing (excess precision allowed).
  return lax.optimization_barrier(q).astype(jnp.float32) * s


def fp8_gemm(a, a_scale, b, b_scale, c, beta, out_dtype):
  """(a*a_scale) @ (b*b_scale)^T (+ beta*c), dequantized to f32, f32 dot.

  a (M, K) with a_scale (M, ceil(K/128)) in 1x128 blocks; b (N, K) with
  b_scale (ceil(N/128), ceil(K/128)) in 128x128 blocks.
  """
  a_deq = dequantize_blockwise(a, a_scale, (1, FP8_BLOCK))
  b_deq = dequantize_blockwise(b, b_scale, (FP8_BLOCK, FP8_BLOCK))
  acc = lax.dot_general(a_deq, b_deq, (((1,), (1,)), ((), ())),
                        precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32)
  if c is not None and beta != 0.0:
    acc = acc + np.float32(beta) * c.astype(jnp.float32)
  return acc.astype(out_dtype)


def quantize_blockwise(x, block, dtype):
  """The blockwise FP8 quantization recipe (no validation): (q, scale).

  See jax_sm100.quantize_fp8_blockwise for the recipe; every kernel that
  implements it agrees with this function bit for bit.
  """
  r, c = x.shape
  br, bc = block
  nr, nc = cdiv(r, br), cdiv(c, bc)
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
