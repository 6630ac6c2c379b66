"""FP8 blockwise quantization, fp8_blockwise_matmul and fp8_dot (forward and
DeepSeek-V3 backward) against float64 NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from conftest import (assert_matmul_close, assert_same_product, calc_diff, f64, np_dequantize,
                      np_quantize_f32, random_array)

E4M3 = jnp.float8_e4m3fn
E4M3_MAX = 448.0


def _spread(rng, shape, dtype):
  """Normal data with per-row magnitudes over 6 decades, so blocks differ."""
  x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, size=(shape[0], 1))
  return jnp.asarray(x.astype(np.float32)).astype(dtype)


# --------------------------------------------------------------------------
# quantize_fp8_blockwise
# --------------------------------------------------------------------------

QSHAPES = [(1, 1), (3, 5), (257, 129), (128, 256), (130, 300)]
BLOCKS = [(1, 128), (128, 128), (4, 3)]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
@pytest.mark.parametrize("shape", QSHAPES)
@pytest.mark.parametrize("block", BLOCKS)
def test_quantize_properties(rng, dtype, shape, block):
  x = _spread(rng, shape, dtype)
  if dtype == jnp.float16:  # keep inside fp16's range
    x = jnp.clip(x, -6e4, 6e4)
  q, s = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))(x)
  nr, nc = -(-shape[0] // block[0]), -(-shape[1] // block[1])
  assert q.dtype == E4M3 and q.shape == shape
  assert s.dtype == jnp.float32 and s.shape == (nr, nc)
  q64, s64, x64 = f64(q), np.asarray(s, np.float64), f64(x)
  assert np.isfinite(q64).all() and np.isfinite(s64).all() and (s64 > 0).all()
  # Each block's amax maps exactly to the format max (x is nowhere zero here).
  qb = np.zeros((nr * block[0], nc * block[1]))
  qb[:shape[0], :shape[1]] = np.abs(q64)
  np.testing.assert_array_equal(qb.reshape(nr, block[0], nc, block[1]).max(axis=(1, 3)),
                                E4M3_MAX)
  # Round trip: e4m3 keeps 3 mantissa bits (relative error <= 2^-4); below its
  # smallest normal (2^-6 * scale) the absolute error is <= half the subnormal
  # spacing, 2^-10 * scale.
  s_full = np.repeat(np.repeat(s64, block[0], 0), block[1], 1)[:shape[0], :shape[1]]
  err = np.abs(q64 * s_full - x64)
  assert (err <= 2.0**-4 * np.abs(x64) + 2.0**-10 * s_full).all()
  # Bit-exact against a NumPy float32 emulation of the documented recipe.
  q_np, s_np = np_quantize_f32(x, block)
  np.testing.assert_array_equal(np.asarray(s), s_np)
  np.testing.assert_array_equal(np.asarray(q).view(np.uint8), q_np.view(np.uint8))


def test_quantize_zero_blocks_give_zeros_not_nan(rng):
  x = np.asarray(rng.standard_normal((4, 384)), np.float32)
  x[:, 128:256] = 0.0       # a whole 1x128 block of zeros in every row
  x[2, :] = 0.0             # a whole row of zeros
  q, s = jax_sm100.quantize_fp8_blockwise(jnp.asarray(x))
  q64, s64 = f64(q), np.asarray(s)
  assert np.isfinite(q64).all() and np.isfinite(s64).all()
  np.testing.assert_array_equal(q64[:, 128:256], 0.0)
  np.testing.assert_array_equal(q64[2], 0.0)
  np.testing.assert_array_equal(s64[:, 1], 1.0)   # documented choice: scale 1
  np.testing.assert_array_equal(s64[2], 1.0)
  q, s = jax_sm100.quantize_fp8_blockwise(jnp.zeros((130, 130)), block=(128, 128))
  assert (f64(q) == 0).all() and (np.asarray(s) == 1).all()


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_quantize_nan_makes_its_block_nan(rng, block):
  # Documented: a NaN anywhere in a block gives that block a NaN scale and NaN q;
  # other blocks are untouched. (XLA CPU's max reduction alone drops the NaN.)
  x = np.asarray(rng.standard_normal((256, 256)), np.float32)
  x[200, 7] = np.nan
  q, s = jax.jit(lambda v: jax_sm100.quantize_fp8_blockwise(v, block=block))(jnp.asarray(x))
  s, q64 = np.asarray(s), f64(q)
  hit = (200 // block[0], 0)
  assert np.isnan(s[hit]) and np.isnan(s).sum() == 1
  rows = slice(200, 201) if block[0] == 1 else slice(128, 256)
  assert np.isnan(q64[rows, :128]).all() and np.isnan(q64).sum() == q64[rows, :128].size
  clean = x.copy(); clean[200, 7] = 0.0
  _, s_clean = jax_sm100.quantize_fp8_blockwise(jnp.asarray(clean), block=block)
  mask = np.ones(s.shape, bool); mask[hit] = False
  np.testing.assert_array_equal(s[mask], np.asarray(s_clean)[mask])


def test_quantize_saturates_and_handles_extremes():
  # Values at the ends of float32's range: scales stay finite and q saturates
  # at +-448 instead of overflowing e4m3 (which has no Inf: overflow is NaN).
  x = np.array([[3.0e38, -3.0e38, 1.0, 0.0], [1e-44, -1e-44, 0.0, 0.0]], np.float32)
  q, s = jax_sm100.quantize_fp8_blockwise(jnp.asarray(x), block=(1, 128))
  q64 = f64(q)
  assert np.isfinite(q64).all() and np.isfinite(np.asarray(s)).all()
  np.testing.assert_array_equal(q64[0, :2], [448.0, -448.0])
  # amax/448 underflows float32 for 1e-44: scale 1, q = x rounds to fp8 zero.
  assert np.asarray(s)[1, 0] == 1.0 and (q64[1] == 0).all()
  # e5m2 saturates at its own max.
  q, _ = jax_sm100.quantize_fp8_blockwise(jnp.asarray(x[:1]), dtype=jnp.float8_e5m2)
  np.testing.assert_array_equal(f64(q)[0, :2], [57344.0, -57344.0])


# --------------------------------------------------------------------------
# fp8_blockwise_matmul
# --------------------------------------------------------------------------

MNK = [(1, 1, 1), (3, 5, 7), (257, 129, 65), (64, 256, 384), (130, 200, 300)]


def _random_fp8_operands(rng, m, n, k):
  a, a_s = jax_sm100.quantize_fp8_blockwise(_spread(rng, (m, k), jnp.float32), block=(1, 128))
  b, b_s = jax_sm100.quantize_fp8_blockwise(_spread(rng, (n, k), jnp.float32),
                                            block=(128, 128))
  return a, a_s, b, b_s


@pytest.mark.parametrize("m,n,k", MNK)
@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("with_c", [False, True])
def test_fp8_blockwise_matmul_matches_float64(rng, m, n, k, out_dtype, with_c):
  a, a_s, b, b_s = _random_fp8_operands(rng, m, n, k)
  a64 = np_dequantize(a, a_s, (1, 128))
  b64 = np_dequantize(b, b_s, (128, 128))
  ref = a64 @ b64.T
  absprod = np.abs(a64) @ np.abs(b64).T
  kw, extra = {}, 0.0
  if with_c:
    c = random_array(rng, (m, n), out_dtype, scale=float(np.abs(ref).mean()) + 1.0)
    beta = -0.7
    ref = ref + beta * f64(c)
    kw = dict(c=c, beta=beta)
    extra = 4 * 2.0**-24 * (absprod + np.abs(beta * f64(c)))
  got = jax.jit(lambda *o: jax_sm100.fp8_blockwise_matmul(*o, out_dtype=out_dtype, **kw))(
      a, a_s, b, b_s)
  assert got.dtype == out_dtype and got.shape == (m, n)
  # The reference dequantizes to fp32 first (one fp32 rounding per element,
  # 2^-24 relative), then accumulates in fp32.
  assert_matmul_close(got, ref, absprod, k, out_dtype, extra=extra + 2 * 2.0**-24 * absprod)
  assert calc_diff(f64(got), ref) < 1e-3


def test_fp8_blockwise_matmul_beta_zero_does_not_read_c(rng):
  a, a_s, b, b_s = _random_fp8_operands(rng, 8, 16, 128)
  c = jnp.full((8, 16), jnp.nan, jnp.bfloat16)
  got = jax_sm100.fp8_blockwise_matmul(a, a_s, b, b_s, c=c, beta=0.0)
  assert np.isfinite(f64(got)).all()


@pytest.mark.parametrize("shape", [(3, 5), (257, 129), (130, 300)])
@pytest.mark.parametrize("block", BLOCKS)
def test_quantize_scale_transposed_is_the_transpose(rng, shape, block):
  x = _spread(rng, shape, jnp.bfloat16)
  q, s = jax_sm100.quantize_fp8_blockwise(x, block=block)
  qt, st = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(
      x, block=block, scale_transposed=True))(x)
  assert st.shape == s.shape[::-1]
  np.testing.assert_array_equal(np.asarray(st), np.asarray(s).T)
  np.testing.assert_array_equal(f64(qt), f64(q))


@pytest.mark.parametrize("m,n,k", MNK)
@pytest.mark.parametrize("with_c", [False, True])
def test_fp8_blockwise_matmul_a_scale_transposed_is_the_same_product(rng, m, n, k, with_c):
  a, a_s, b, b_s = _random_fp8_operands(rng, m, n, k)
  kw = dict(c=random_array(rng, (m, n), jnp.bfloat16), beta=0.5) if with_c else {}
  want = jax_sm100.fp8_blockwise_matmul(a, a_s, b, b_s, **kw)
  got = jax.jit(lambda a, st, b, sb: jax_sm100.fp8_blockwise_matmul(
      a, st, b, sb, a_scale_transposed=True, **kw))(a, a_s.T, b, b_s)
  assert_same_product(got, want, "transposed a scales")
  # vmap over a batch of a (its scales batched along their leading, K-block axis 0 too)
  a2, a2_s, _, _ = _random_fp8_operands(rng, m, n, k)
  f = lambda a, st: jax_sm100.fp8_blockwise_matmul(a, st, b, b_s, a_scale_transposed=True)
  got_v = jax.vmap(f)(jnp.stack([a, a2]), jnp.stack([a_s.T, a2_s.T]))
  for i, (ai, si) in enumerate(((a, a_s), (a2, a2_s))):
    assert_same_product(got_v[i], jax_sm100.fp8_blockwise_matmul(ai, si, b, b_s), f"vmap row {i}")


# --------------------------------------------------------------------------
# fp8_dot
# --------------------------------------------------------------------------

def _q64(x, block):
  q, s = jax_sm100.quantize_fp8_blockwise(x, block=block)
  return np_dequantize(q, s, block)


@pytest.mark.parametrize("m,n,k", MNK)
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_fp8_dot_forward_and_grads(rng, m, n, k, dtype):
  x = random_array(rng, (m, k), dtype)
  w = random_array(rng, (k, n), dtype, scale=0.1)
  y, vjp = jax.vjp(lambda x, w: jax_sm100.fp8_dot(x, w), x, w)
  g = random_array(rng, (m, n), dtype)
  dx, dw = jax.jit(vjp)(g)
  assert y.dtype == dtype and dx.dtype == dtype and dw.dtype == dtype

  # Forward: Q(x) in 1x128 blocks along K, Q(w) in 128x128 blocks.
  xq, wq = _q64(x, (1, 128)), _q64(w, (128, 128))
  ref = xq @ wq
  slack = 4 * 2.0**-24 * (np.abs(xq) @ np.abs(wq))  # fp32 dequantization
  assert_matmul_close(y, ref, np.abs(xq) @ np.abs(wq), k, dtype, extra=slack, what="y")
  assert calc_diff(f64(y), ref) < 1e-3
  # and close to the unquantized product (e4m3 is ~2^-4 relative per element)
  assert calc_diff(f64(y), f64(x) @ f64(w)) < 2e-2

  # dx = Q(g, 1x128 along N) @ Q(w, 128x128)^T
  gq = _q64(g, (1, 128))
  dx_ref = gq @ wq.T
  dx_abs = np.abs(gq) @ np.abs(wq).T
  assert_matmul_close(dx, dx_ref, dx_abs, n, dtype, extra=4 * 2.0**-24 * dx_abs, what="dx")
  # dw = Q(x^T, 1x128 along M) @ Q(g^T, 128x128 along M)^T
  xtq = _q64(jnp.asarray(x).T, (1, 128))
  gtq = _q64(jnp.asarray(g).T, (128, 128))
  dw_ref = xtq @ gtq.T
  dw_abs = np.abs(xtq) @ np.abs(gtq).T
  assert_matmul_close(dw, dw_ref, dw_abs, m, dtype, extra=4 * 2.0**-24 * dw_abs, what="dw")


def test_fp8_dot_batched_input_and_vmap(rng):
  x = random_array(rng, (2, 3, 40, 256), jnp.bfloat16)
  w = random_array(rng, (256, 72), jnp.bfloat16, scale=0.1)
  y = jax_sm100.fp8_dot(x, w)
  assert y.shape == (2, 3, 40, 72)
  flat = jax_sm100.fp8_dot(x.reshape(-1, 256), w).reshape(y.shape)
  np.testing.assert_array_equal(f64(y), f64(flat))  # 1x128 blocks are per row
  yv = jax.vmap(jax.vmap(jax_sm100.fp8_dot, (0, None)), (0, None))(x, w)
  xq, wq = _q64(x.reshape(-1, 256), (1, 128)), _q64(w, (128, 128))
  ref = (xq @ wq).reshape(y.shape)
  absprod = (np.abs(xq) @ np.abs(wq)).reshape(y.shape)
  assert_matmul_close(yv, ref, absprod, 256, jnp.bfloat16, extra=4 * 2.0**-24 * absprod)
  # vmap over w too (per-example weights)
  ws = random_array(rng, (2, 256, 72), jnp.bfloat16, scale=0.1)
  yw = jax.vmap(jax_sm100.fp8_dot)(x[:, 0], ws)
  for i in range(2):
    xi, wi = _q64(x[i, 0], (1, 128)), _q64(ws[i], (128, 128))
    ai = np.abs(xi) @ np.abs(wi)
    assert_matmul_close(yw[i], xi @ wi, ai, 256, jnp.bfloat16, extra=4 * 2.0**-24 * ai)


def test_fp8_dot_grad_under_jit_trains(rng):
  # A few SGD steps through fp8_dot must reduce a least-squares loss.
  x = random_array(rng, (64, 128), jnp.float32)
  w_true = random_array(rng, (128, 16), jnp.float32, scale=0.1)
  y = f64(x) @ f64(w_true)
  loss = lambda w: jnp.mean((jax_sm100.fp8_dot(x, w) - y) ** 2)
  step = jax.jit(lambda w: w - 0.5 * jax.grad(loss)(w))
  w = jnp.zeros((128, 16), jnp.float32)
  l0 = float(loss(w))
  for _ in range(20):
    w = step(w)
  assert float(loss(w)) < 0.2 * l0
