"""MXFP8 (OCP Microscaling) ops: quantize_mxfp8's scale rule and round trip,
mxfp8_matmul, mxfp8_dot (forward and MXFP8 backward), mxfp8_dot_general and the Flax
layers, against float64 NumPy and against jax's own MX helpers where this jax has them.
The GEMM's kernel path on its CPU handler (JAX_SM100_BACKEND=cpu_ffi) and its dispatch:
tests/test_sm100_mxfp8_launch.py."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_sm100
from conftest import assert_matmul_close, calc_diff, f64

E4M3, E5M2, E8M0 = jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e8m0fnu
# (emax_elem, largest finite, mantissa bits, smallest normal exponent) per element type.
FMT = {np.dtype(E4M3): (8, 448.0, 3, -6), np.dtype(E5M2): (15, 57344.0, 2, -14)}


# --------------------------------------------------------------------------
# float64 NumPy model of the documented recipe (written from the OCP rule, not
# from jax_sm100's code)
# --------------------------------------------------------------------------

def np_quantize(x, dtype):
  """(q as ml_dtypes array, codes uint8) along the last axis, blocks of 32."""
  emax, fmax, _, _ = FMT[np.dtype(dtype)]
  x = np.asarray(jnp.asarray(x).astype(jnp.float32), np.float64)
  c = x.shape[-1]
  nb = -(-c // 32)
  xb = np.zeros(x.shape[:-1] + (nb * 32,))
  xb[..., :c] = x
  xb = xb.reshape(x.shape[:-1] + (nb, 32))
  with np.errstate(invalid="ignore"):
    amax = np.abs(xb).max(axis=-1)
  bad = ~np.isfinite(xb).all(axis=-1)
  _, e = np.frexp(np.where(bad, 1.0, amax))          # amax = m 2^e, m in [0.5, 1)
  exp = np.where(amax > 0, e - 1, -1000) - emax      # floor(log2 amax) - emax_elem
  exp = np.clip(exp, -127, 127)
  v = np.clip(xb * 2.0 ** (-exp[..., None]), -fmax, fmax)
  v = np.where(bad[..., None], np.nan, v)
  q = v.reshape(x.shape[:-1] + (nb * 32,))[..., :c].astype(dtype)
  codes = np.where(bad, 255, exp + 127).astype(np.uint8)
  return q, codes


def codes_of(scale):
  assert scale.dtype == E8M0
  return np.asarray(scale).view(np.uint8)


def np_dequant(q, codes):
  """float64 q * 2^(code-127), NaN for code 255."""
  q64 = np.asarray(q).astype(np.float64)
  e = np.repeat(np.asarray(codes, np.int64), 32, axis=-1)[..., :q64.shape[-1]]
  return np.where(e == 255, np.nan, q64 * 2.0 ** (e - 127.0))


def spread(rng, shape, dtype=jnp.float32, decades=3):
  """Normal data whose magnitude varies by up to `decades` per 32-element block."""
  x = rng.standard_normal(shape)
  x = x * 10.0 ** rng.uniform(-decades, decades, size=shape[:-1] + (-(-shape[-1] // 32),)
                               ).repeat(32, axis=-1)[..., :shape[-1]]
  return jnp.asarray(x.astype(np.float32)).astype(dtype)


# --------------------------------------------------------------------------
# quantize_mxfp8
# --------------------------------------------------------------------------

SHAPES = [(1, 1), (3, 31), (5, 32), (4, 33), (2, 3, 100), (64, 257), (7,)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("xdt", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("dt", [E4M3, E5M2])
def test_quantize_matches_recipe_and_round_trip(rng, shape, xdt, dt):
  x = spread(rng, shape, xdt, decades=2 if xdt == jnp.float16 else 3)
  q, s = jax.jit(lambda v: jax_sm100.quantize_mxfp8(v, dtype=dt))(x)
  assert q.dtype == dt and q.shape == x.shape
  assert s.dtype == E8M0 and s.shape == shape[:-1] + (-(-shape[-1] // 32),)
  q_np, c_np = np_quantize(x, dt)
  np.testing.assert_array_equal(codes_of(s), c_np)
  np.testing.assert_array_equal(np.asarray(q).view(np.uint8), q_np.view(np.uint8))
  # Round trip, per element: |x - q X| <= X ulp(x/X) / 2 unless x/X is beyond the
  # format's max, where q is that max with x's sign.
  emax, fmax, mbits, emin = FMT[np.dtype(dt)]
  codes = np.repeat(codes_of(s).astype(np.int64), 32, axis=-1)[..., :shape[-1]]
  big_x = 2.0 ** (codes - 127.0)
  x64, q64 = f64(x), f64(q)
  v = x64 / big_x
  sat = np.abs(v) > fmax
  np.testing.assert_array_equal(q64[sat], np.sign(v[sat]) * fmax)
  with np.errstate(divide="ignore"):
    ulp = 2.0 ** (np.maximum(np.floor(np.log2(np.abs(v))), emin) - mbits)
  assert (np.abs(q64 - v)[~sat] <= ulp[~sat] / 2).all()
  assert (np.abs(x64 - q64 * big_x)[~sat] <= (big_x * ulp / 2)[~sat]).all()
  # The scale rule's consequence: each block's amax / X lies in [2^emax, 2^(emax+1)).
  xs = np.abs(x64)
  pad = np.zeros(shape[:-1] + (codes_of(s).shape[-1] * 32,))
  pad[..., :shape[-1]] = xs
  ratio = pad.reshape(codes_of(s).shape + (32,)).max(-1) / 2.0 ** (codes_of(s) - 127.0)
  assert ((ratio >= 2.0 ** emax) & (ratio < 2.0 ** (emax + 1))).all()


def _block(amax, n=32, sign=1.0):
  """n values whose largest magnitude is amax (at index 5 % n), the rest below it."""
  v = np.linspace(0.0, 0.9, n) * amax
  v[5 % n] = sign * amax
  return v


# (amax, expected exponent of the scale, expected |q| of the amax element)
CRAFTED = {
    np.dtype(E4M3): [
        (1.0, -8, 256.0), (448.0, 0, 448.0), (512.0, 1, 256.0),
        (np.nextafter(np.float32(512), np.float32(0)), 0, 448.0),     # just below 2^9
        (np.nextafter(np.float32(512), np.float32(1e9)), 1, 256.0),   # just above 2^9
        (7.0, -6, 448.0), (7.5, -6, 448.0), (0.125, -11, 256.0),
        (2.0 ** -120, -127, 128.0), (2.0 ** -119, -127, 256.0), (3.0e38, 119, 448.0)],
    np.dtype(E5M2): [
        (1.0, -15, 32768.0), (57344.0, 0, 57344.0), (65535.0, 0, 57344.0),
        (65536.0, 1, 32768.0), (2.0 ** -112, -127, 32768.0), (2.0 ** -113, -127, 16384.0)],
}


@pytest.mark.parametrize("dt", [E4M3, E5M2])
def test_scale_rule_crafted_blocks(dt):
  rows = CRAFTED[np.dtype(dt)]
  x = np.stack([_block(a, sign=-1.0 if i % 2 else 1.0) for i, (a, _, _) in enumerate(rows)])
  x = np.concatenate([x, np.zeros((len(rows), 32))], axis=1).astype(np.float32)
  q, s = jax_sm100.quantize_mxfp8(jnp.asarray(x), dtype=dt)
  codes, q64 = codes_of(s), f64(q)
  for i, (amax, exp, qmax) in enumerate(rows):
    assert codes[i, 0] == exp + 127, (amax, codes[i, 0] - 127, exp)
    assert q64[i, 5] == (-qmax if i % 2 else qmax), (amax, q64[i, 5])
  # The all-zero second block of every row: the smallest scale (2^-127), q = 0.
  assert (codes[:, 1] == 0).all() and (q64[:, 32:] == 0).all()
  q_np, c_np = np_quantize(x, dt)
  np.testing.assert_array_equal(codes, c_np)
  np.testing.assert_array_equal(np.asarray(q).view(np.uint8), q_np.view(np.uint8))
  # Dequantized (mxfp8_matmul against one-hot b): the amax element is qmax 2^exp,
  # exactly, also where the scale 2^-127 is a float32 subnormal.
  onehot = np.zeros((1, 64), np.float32); onehot[0, 5] = 1.0
  b, b_s = jax_sm100.quantize_mxfp8(jnp.asarray(onehot), dtype=dt)
  deq = np.asarray(jax_sm100.mxfp8_matmul(q, s, b, b_s, out_dtype=jnp.float32))[:, 0]
  want = [(-1 if i % 2 else 1) * qmax * 2.0 ** exp for i, (_, exp, qmax) in enumerate(rows)]
  np.testing.assert_array_equal(deq, np.float32(want))


def test_partial_blocks_and_padding(rng):
  # The padding of a partial last block is zero: it never raises amax, and a block
  # of negative values (max(x) < 0) still takes its amax from |x|.
  x = np.zeros((3, 40), np.float32)
  x[0, :32] = rng.uniform(-1, 1, 32); x[0, 32:] = -np.array([3, 1, 2, 0.5, 0, 0, 0, 0.25])
  x[1, 35] = 2.0 ** -20
  x[2, :] = -1e-3
  q, s = jax_sm100.quantize_mxfp8(jnp.asarray(x))
  codes = codes_of(s)
  assert s.shape == (3, 2)
  assert codes[0, 1] == 1 + 127 - 8 and f64(q)[0, 32] == -3 * 2.0 ** 7   # 3 = 1.5 * 2^1
  assert codes[1, 0] == 0 and codes[1, 1] == -20 - 8 + 127
  assert codes[2, 0] == codes[2, 1] == np.floor(np.log2(1e-3)) - 8 + 127
  q1, s1 = jax_sm100.quantize_mxfp8(jnp.asarray(x[:, 32:33]))   # C = 1
  assert codes_of(s1)[0, 0] == codes[0, 1] and f64(q1)[0, 0] == f64(q)[0, 32]


def test_leading_dims_and_vmap(rng):
  x = spread(rng, (2, 3, 70))
  q, s = jax_sm100.quantize_mxfp8(x)
  q2, s2 = jax_sm100.quantize_mxfp8(x.reshape(6, 70))
  qv, sv = jax.vmap(jax_sm100.quantize_mxfp8)(x)
  for a, b in ((q, q2.reshape(2, 3, 70)), (qv, q), (s, s2.reshape(2, 3, 3)), (sv, s)):
    np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("dt", [E4M3, E5M2])
def test_nan_and_inf_make_their_block_nan(rng, dt):
  x = np.array(spread(rng, (4, 96)))
  x[1, 40] = np.nan
  x[2, 3] = np.inf
  x[3, 70] = -np.inf
  q, s = jax.jit(lambda v: jax_sm100.quantize_mxfp8(v, dtype=dt))(jnp.asarray(x))
  codes, q64 = codes_of(s), f64(q)
  bad = np.zeros((4, 3), bool); bad[1, 1] = bad[2, 0] = bad[3, 2] = True
  np.testing.assert_array_equal(codes == 255, bad)
  assert np.isnan(np.asarray(s.astype(jnp.float32))[bad]).all()   # ml_dtypes: 0xFF is NaN
  np.testing.assert_array_equal(np.isnan(q64), np.repeat(bad, 32, axis=1))
  clean = np.where(np.isfinite(x), x, 0.0).astype(np.float32)
  qc, sc = jax_sm100.quantize_mxfp8(jnp.asarray(clean), dtype=dt)
  np.testing.assert_array_equal(codes[~bad], codes_of(sc)[~bad])
  keep = ~np.repeat(bad, 32, axis=1)
  np.testing.assert_array_equal(q64[keep], f64(qc)[keep])
  # The NaN blocks reach mxfp8_matmul's output rows, the others stay finite.
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (5, 96)), dtype=dt)
  y = np.asarray(jax_sm100.mxfp8_matmul(q, s, b, b_s, out_dtype=jnp.float32))
  np.testing.assert_array_equal(np.isnan(y).all(axis=1), bad.any(axis=1))
  assert np.isfinite(y[~bad.any(axis=1)]).all()


def _jax_mx_quantize():
  try:
    from jax._src.cudnn.scaled_matmul_stablehlo import BlockScaleConfig, quantize
  except ImportError:
    pytest.skip("this jax has no MXFP8 quantize helper (jax._src.cudnn.scaled_matmul_stablehlo)")
  return BlockScaleConfig, quantize


@pytest.mark.parametrize("dt", [E4M3, E5M2])
def test_scale_rule_against_jax_helper(rng, dt):
  # jax's cuDNN MXFP8 helper rounds amax / max up to a power of two; the OCP rule
  # takes floor(log2 amax) - emax_elem. Where amax's significand is <= 1.75 (= max's)
  # the two give the same scale and bit-identical elements; above it jax's scale is
  # twice ours (and ours saturates the block's largest elements).
  cfg_cls, quantize = _jax_mx_quantize()
  cfg = cfg_cls(mode="mxfp8", block_size=32, data_type=dt, scale_type=E8M0,
                global_scale=None, infer_only=False)
  x = spread(rng, (64, 256))
  qj, sj = quantize(x, cfg)
  q, s = jax_sm100.quantize_mxfp8(x, dtype=dt)
  x64 = f64(x).reshape(64, 8, 32)
  amax = np.abs(x64).max(-1)
  sig = amax / 2.0 ** np.floor(np.log2(amax))
  above = sig > 1.75
  assert above.any() and (~above).any()      # both cases are exercised
  np.testing.assert_array_equal(codes_of(sj).astype(int), codes_of(s).astype(int) + above)
  same = ~np.repeat(above, 32, axis=1)
  np.testing.assert_array_equal(np.asarray(qj).view(np.uint8)[same],
                                np.asarray(q).view(np.uint8)[same])
  # Both use ml_dtypes' float8_e8m0fnu: value 2^(code - 127).
  np.testing.assert_array_equal(np.asarray(s).astype(np.float64),
                                2.0 ** (codes_of(s) - 127.0))


# --------------------------------------------------------------------------
# mxfp8_matmul
# --------------------------------------------------------------------------

MNK = [(1, 1, 1), (3, 5, 31), (4, 6, 33), (17, 9, 100), (64, 48, 257), (40, 72, 128)]


@pytest.mark.parametrize("m,n,k", MNK)
@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("dts", [(E4M3, E4M3), (E5M2, E4M3)])
def test_mxfp8_matmul_matches_float64(rng, m, n, k, out_dtype, dts):
  a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (m, k)), dtype=dts[0])
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (n, k)), dtype=dts[1])
  got = jax.jit(lambda *o: jax_sm100.mxfp8_matmul(*o, out_dtype=out_dtype))(a, a_s, b, b_s)
  assert got.dtype == out_dtype and got.shape == (m, n)
  a64, b64 = np_dequant(a, codes_of(a_s)), np_dequant(b, codes_of(b_s))
  ref = a64 @ b64.T
  # Dequantizing to float32 is exact; the only roundings are the fp32 accumulation
  # and the final cast.
  assert_matmul_close(got, ref, np.abs(a64) @ np.abs(b64).T, k, out_dtype)
  assert calc_diff(f64(got), ref) < 1e-3


def test_mxfp8_matmul_arbitrary_scales(rng):
  # Scales and elements not made by the quantizer: random finite fp8 bit patterns
  # and random codes, including the subnormal scale 2^-127 (code 0).
  m, n, k = 24, 16, 96
  bits = rng.integers(0, 256, (m + n, k), dtype=np.uint8)
  bits[(bits & 0x7F) == 0x7F] = 0x3C                     # e4m3fn's NaNs -> 1.5
  bits[0, 0] = 0x7E                                       # 448
  ab = jnp.asarray(bits.view(ml_dtypes.float8_e4m3fn))
  codes = rng.integers(100, 150, (m + n, 3)).astype(np.uint8)
  codes[0, 0] = 0
  sc = jnp.asarray(codes.view(ml_dtypes.float8_e8m0fnu))
  got = jax_sm100.mxfp8_matmul(ab[:m], sc[:m], ab[m:], sc[m:], out_dtype=jnp.float32)
  a64, b64 = np_dequant(ab[:m], codes[:m]), np_dequant(ab[m:], codes[m:])
  assert_matmul_close(got, a64 @ b64.T, np.abs(a64) @ np.abs(b64).T, k, jnp.float32)
  # Row 0's first block has the scale 2^-127, a float32 subnormal: q 2^-127 is still
  # exact where it is a normal float32 (|q| >= 2). Summed against one-hot b it must
  # be the exact sum (the subnormal products flushed, as XLA on CPU does, or not).
  one = np.zeros((1, k), np.float32); one[0, :32] = 1.0
  b1, b1_s = jax_sm100.quantize_mxfp8(jnp.asarray(one))
  row = float(jax_sm100.mxfp8_matmul(ab[:1], sc[:1], b1, b1_s, out_dtype=jnp.float32)[0, 0])
  assert (np_dequant(b1, codes_of(b1_s))[0, :32] == 1).all()
  q0 = np.asarray(ab[0, :32]).astype(np.float64)
  big = np.abs(q0) >= 2
  exact_normal, exact_all = (q0[big] * 2.0 ** -127).sum(), (q0 * 2.0 ** -127).sum()
  # XLA on CPU flushes float32 subnormals, and where it does depends on how it fuses the
  # dequantization (jax 0.8: a few more intermediates, within 0.5% of the normal terms'
  # sum; some fusions flush the whole 2^-127 block to 0): never anything else.
  assert (row in (0.0, exact_normal, exact_all)
          or abs(row - exact_normal) <= 5e-3 * abs(exact_normal)), row


def test_mxfp8_matmul_agrees_with_lax_scaled_dot(rng):
  if not hasattr(jax.lax, "scaled_dot"):
    pytest.skip("this jax has no jax.lax.scaled_dot")
  a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (33, 128)))
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (20, 128)), dtype=E5M2)
  theirs = jax.lax.scaled_dot(a, b, lhs_scale=a_s, rhs_scale=b_s,
                              dimension_numbers=(((1,), (1,)), ((), ())),
                              preferred_element_type=jnp.float32)
  ours = jax_sm100.mxfp8_matmul(a, a_s, b, b_s, out_dtype=jnp.float32)
  a64, b64 = np_dequant(a, codes_of(a_s)), np_dequant(b, codes_of(b_s))
  absprod = np.abs(a64) @ np.abs(b64).T
  assert_matmul_close(theirs, a64 @ b64.T, absprod, 128, jnp.float32, what="scaled_dot")
  assert_matmul_close(ours, f64(theirs), 2 * absprod, 128, jnp.float32, what="ours")


# --------------------------------------------------------------------------
# Errors, differentiation, dispatch
# --------------------------------------------------------------------------

def _ops(m=4, n=3, k=64):
  a, a_s = jax_sm100.quantize_mxfp8(jnp.ones((m, k)))
  b, b_s = jax_sm100.quantize_mxfp8(jnp.ones((n, k)))
  return a, a_s, b, b_s


@pytest.mark.parametrize("call,exc,words", [
    (lambda: jax_sm100.quantize_mxfp8(jnp.ones((4, 4), jnp.int32)), TypeError, "x must"),
    (lambda: jax_sm100.quantize_mxfp8(jnp.float32(1)), ValueError, "x must have rank"),
    (lambda: jax_sm100.quantize_mxfp8(jnp.ones(4), dtype=jnp.float16), TypeError, "dtype"),
    (lambda: jax_sm100.quantize_mxfp8("x"), TypeError, "x must be an array"),
    (lambda: jax_sm100.mxfp8_matmul(_ops()[0].astype(jnp.bfloat16), *_ops()[1:]),
     TypeError, "a must have dtype"),
    (lambda: jax_sm100.mxfp8_matmul(_ops()[0], _ops()[1].astype(jnp.float32), *_ops()[2:]),
     TypeError, "a_scale must have dtype float8_e8m0fnu"),
    (lambda: jax_sm100.mxfp8_matmul(_ops()[0], _ops()[1][:, :1], *_ops()[2:]),
     ValueError, "a_scale must have shape (M, ceil(K/32)) = (4, 2)"),
    (lambda: jax_sm100.mxfp8_matmul(*_ops()[:3], _ops()[3].T), ValueError,
     "b_scale must have shape (N, ceil(K/32)) = (3, 2)"),
    (lambda: jax_sm100.mxfp8_matmul(*_ops()[:2], *_ops(k=96)[2:]), ValueError, "same K"),
    (lambda: jax_sm100.mxfp8_matmul(_ops()[0][None], *_ops()[1:]), ValueError, "rank 2"),
    (lambda: jax_sm100.mxfp8_matmul(*_ops(), out_dtype=jnp.int8), TypeError, "out_dtype"),
    (lambda: jax_sm100.mxfp8_dot(jnp.ones((4, 8)), jnp.ones((9, 3))), ValueError, "K=8"),
    (lambda: jax_sm100.mxfp8_dot(jnp.ones((4, 8)), jnp.ones((2, 8, 3))), ValueError, "w must"),
    (lambda: jax_sm100.mxfp8_dot(jnp.ones((4, 8), jnp.int8), jnp.ones((8, 3))), TypeError,
     "x must have dtype"),
    (lambda: jax_sm100.mxfp8_dot(jnp.ones((4, 8)), jnp.ones((8, 3)), grad_dtype="int8"),
     TypeError, "grad_dtype"),
])
def test_bad_arguments_raise_before_running(call, exc, words):
  with pytest.raises(exc) as e:
    call()
  assert words in str(e.value) and "jax_sm100." in str(e.value)


def test_quantized_ops_are_not_differentiable_and_dot_is_reverse_only():
  a, a_s, b, b_s = _ops()
  with pytest.raises(TypeError, match="quantize_mxfp8 is not differentiable"):
    jax.grad(lambda x: jax_sm100.quantize_mxfp8(x)[0].astype(jnp.float32).sum())(
        jnp.ones((2, 8)))
  with pytest.raises(TypeError, match="mxfp8_matmul is not differentiable"):
    jax.jvp(lambda a: jax_sm100.mxfp8_matmul(a, a_s, b, b_s), (a,), (a,))
  with pytest.raises(TypeError, match="mxfp8_dot supports reverse-mode"):
    jax.jvp(lambda x: jax_sm100.mxfp8_dot(x, jnp.ones((8, 3))), (jnp.ones((4, 8)),),
            (jnp.ones((4, 8)),))


def test_reference_path_even_where_kernels_would_run(fake_sm90, rng):
  # Hopper has no block-scaled MMA: on a (pretend) sm90 with every target registered
  # (the MXFP8 one included) the lowered programs hold no jax_sm100 custom call.
  x, w = spread(rng, (8, 64)), spread(rng, (64, 16))
  a, a_s, b, b_s = _ops()
  for f, args in ((jax_sm100.quantize_mxfp8, (x,)), (jax_sm100.mxfp8_matmul, (a, a_s, b, b_s)),
                  (jax.grad(lambda x, w: jax_sm100.mxfp8_dot(x, w).sum(), (0, 1)), (x, w))):
    text = jax.jit(f).lower(*args).as_text()
    assert "jax_sm100_" not in text


# --------------------------------------------------------------------------
# mxfp8_dot: forward and MXFP8 backward against a float64 model of the recipe
# --------------------------------------------------------------------------

def np_product(a, b, dt):
  """float64 Q(a) @ Q(b)^T with a (M, C), b (N, C) quantized along C; and |.| @ |.|."""
  a64 = np_dequant(*np_quantize(a, dt))
  b64 = np_dequant(*np_quantize(b, dt))
  return a64 @ b64.T, np.abs(a64) @ np.abs(b64).T


DOT_CASES = [  # (M, K, N, x dtype, out_dtype, grad_dtype)
    (1, 1, 1, jnp.float32, jnp.float32, None),
    (5, 33, 7, jnp.bfloat16, jnp.bfloat16, None),
    (40, 70, 48, jnp.float32, jnp.float32, E5M2),
    (64, 128, 96, jnp.bfloat16, jnp.float32, None),
    (33, 100, 65, jnp.float16, jnp.float16, None),
]


@pytest.mark.parametrize("m,k,n,xdt,odt,gdt", DOT_CASES)
def test_mxfp8_dot_forward_and_vjp_match_float64_recipe(rng, m, k, n, xdt, odt, gdt):
  x = spread(rng, (m, k), xdt, decades=1)
  w = spread(rng, (k, n), xdt, decades=1)
  g = spread(rng, (m, n), odt, decades=1)
  f = jax.jit(lambda x, w, g: (lambda y, vjp: (y, vjp(g)))(
      *jax.vjp(lambda x, w: jax_sm100.mxfp8_dot(x, w, out_dtype=odt, grad_dtype=gdt), x, w)))
  y, (dx, dw) = f(x, w, g)
  assert (y.dtype, dx.dtype, dw.dtype) == (np.dtype(odt), np.dtype(xdt), np.dtype(xdt))
  gd = E4M3 if gdt is None else gdt
  # y = Q(x) @ Q(w^T)^T, each along K.
  ref, absp = np_product(x, w.T, E4M3)
  assert_matmul_close(y, ref, absp, k, odt, what="y")
  # dx (M, K) = Q(g) @ Q(w)^T, along N; dw (K, N) = Q(x^T) @ Q(g^T)^T, along M.
  gq = np_dequant(*np_quantize(g, gd))
  wq = np_dequant(*np_quantize(w, E4M3))
  assert_matmul_close(dx, gq @ wq.T, np.abs(gq) @ np.abs(wq).T, n, xdt, what="dx")
  xtq = np_dequant(*np_quantize(x.T, E4M3))
  gtq = np_dequant(*np_quantize(g.T, gd))
  assert_matmul_close(dw, xtq @ gtq.T, np.abs(xtq) @ np.abs(gtq).T, m, xdt, what="dw")
  if m * n * k > 1000:   # against the exact product: the quantization error only
    x64, w64 = f64(x), f64(w)
    assert calc_diff(f64(y), x64 @ w64) < 1e-2


def test_mxfp8_dot_grad_vmap_and_leading_dims(rng):
  x = spread(rng, (3, 5, 64), decades=1)
  w = spread(rng, (64, 40), decades=1)
  r = spread(rng, (3, 5, 40), decades=1)

  def loss(x, w):
    return (jax_sm100.mxfp8_dot(x, w, out_dtype=jnp.float32) * r).sum()

  gx, gw = jax.jit(jax.grad(loss, (0, 1)))(x, w)
  # The same gradients from the float64 recipe (g = r, exactly, as out_dtype is f32).
  x2, g2 = x.reshape(15, 64), r.reshape(15, 40)
  gq, wq = np_dequant(*np_quantize(g2, E4M3)), np_dequant(*np_quantize(w, E4M3))
  assert_matmul_close(gx.reshape(15, 64), gq @ wq.T, np.abs(gq) @ np.abs(wq).T, 40,
                      jnp.float32, what="dx")
  xtq, gtq = np_dequant(*np_quantize(x2.T, E4M3)), np_dequant(*np_quantize(g2.T, E4M3))
  assert_matmul_close(gw, xtq @ gtq.T, np.abs(xtq) @ np.abs(gtq).T, 15, jnp.float32,
                      what="dw")
  # Leading dims are rows: (3, 5, K) gives what (15, K) gives.
  y = jax_sm100.mxfp8_dot(x, w, out_dtype=jnp.float32)
  y2 = jax_sm100.mxfp8_dot(x2, w, out_dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(y).reshape(15, 40), np.asarray(y2))
  # vmap over the batch: the same rows (quantization is per row along K).
  yv = jax.vmap(lambda xi: jax_sm100.mxfp8_dot(xi, w, out_dtype=jnp.float32))(x)
  np.testing.assert_allclose(np.asarray(yv), np.asarray(y), rtol=1e-6, atol=1e-6)
  # vmap of the per-example weight gradient: each example's own M (5 rows) blocks.
  per = jax.vmap(jax.grad(lambda xi, w, ri: (jax_sm100.mxfp8_dot(
      xi, w, out_dtype=jnp.float32) * ri).sum(), 1), in_axes=(0, None, 0))(x, w, r)
  for i in range(3):
    xt = np_dequant(*np_quantize(x[i].T, E4M3))
    gt = np_dequant(*np_quantize(r[i].T, E4M3))
    assert_matmul_close(per[i], xt @ gt.T, np.abs(xt) @ np.abs(gt).T, 5, jnp.float32)


# --------------------------------------------------------------------------
# mxfp8_dot_general and Flax
# --------------------------------------------------------------------------

def test_mxfp8_dot_general_routes_dense_pattern_only(rng):
  x, w = spread(rng, (2, 6, 64), decades=1), spread(rng, (64, 4, 5), decades=1)
  dn = (((2,), (0,)), ((), ()))
  got = jax.jit(lambda x, w: jax_sm100.mxfp8_dot_general(x, w, dn, out_sharding=None))(x, w)
  want = jax_sm100.mxfp8_dot(x.reshape(12, 64), w.reshape(64, 20)).reshape(2, 6, 4, 5)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  # A batched contraction is not the dense pattern: lax.dot_general, unchanged.
  xb, wb = spread(rng, (3, 4, 32)), spread(rng, (3, 32, 5))
  dnb = (((2,), (1,)), ((0,), (0,)))
  np.testing.assert_array_equal(np.asarray(jax_sm100.mxfp8_dot_general(xb, wb, dnb)),
                                np.asarray(jax.lax.dot_general(xb, wb, dnb)))


def test_flax_mxfp8_layers(rng):
  pytest.importorskip("flax")
  from flax import nnx
  import jax_sm100.flax as jf
  x = spread(rng, (8, 48), jnp.bfloat16, decades=1)
  model = jf.MxFp8Dense(16, dtype=jnp.bfloat16)
  params = model.init(jax.random.key(0), x)
  y = model.apply(params, x)
  p = params["params"]
  want = jax_sm100.mxfp8_dot(x, p["kernel"].astype(jnp.bfloat16)) + p["bias"].astype(
      jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(y), np.asarray(want))
  grads = jax.grad(lambda p: (model.apply(p, x).astype(jnp.float32) ** 2).mean())(params)
  gk = np.asarray(grads["params"]["kernel"])
  assert np.isfinite(gk).all() and np.abs(gk).max() > 0
  lin = jf.MxFp8Linear(48, 16, rngs=nnx.Rngs(0), dtype=jnp.bfloat16)
  want = jax_sm100.mxfp8_dot(x, lin.kernel[...].astype(jnp.bfloat16)) + lin.bias[...].astype(
      jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(lin(x)), np.asarray(want))
