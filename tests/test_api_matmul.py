"""matmul and matmul_residual against float64 NumPy, under jit / vmap / grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_sm100
from conftest import assert_matmul_close, f64, random_array, UNIT_ROUNDOFF

DTYPES = [jnp.bfloat16, jnp.float16, jnp.float32]
# (a shape, b shape): tiny, odd, not multiples of any tile, batched, broadcast.
SHAPES = [
    ((1, 1), (1, 1)),
    ((3, 7), (7, 5)),
    ((257, 65), (65, 129)),
    ((2, 3, 33, 17), (17, 9)),          # batched a, 2-D b (folded into M)
    ((4, 19, 24), (4, 24, 40)),         # batched both
    ((5, 1, 6, 7), (3, 7, 10)),         # broadcast batch dims
    ((12, 40), (3, 40, 8)),             # 2-D a, batched b
]


def _ref(a, b):
  a64, b64 = f64(a), f64(b)
  return a64 @ b64, np.abs(a64) @ np.abs(b64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_matches_float64(rng, dtype, sa, sb):
  a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
  got = jax.jit(lambda a, b: jax_sm100.matmul(a, b))(a, b)
  assert got.dtype == dtype
  ref, absprod = _ref(a, b)
  assert_matmul_close(got, ref, absprod, sa[-1], dtype, what=f"{sa}x{sb}")


@pytest.mark.parametrize("out_dtype", DTYPES)
def test_matmul_out_dtype(rng, out_dtype):
  a, b = random_array(rng, (9, 130), jnp.bfloat16), random_array(rng, (130, 11), jnp.bfloat16)
  got = jax_sm100.matmul(a, b, out_dtype=out_dtype)
  assert got.dtype == out_dtype
  ref, absprod = _ref(a, b)
  assert_matmul_close(got, ref, absprod, 130, out_dtype)


def test_matmul_zero_sized(rng):
  a = random_array(rng, (0, 4), jnp.bfloat16)
  assert jax_sm100.matmul(a, random_array(rng, (4, 3), jnp.bfloat16)).shape == (0, 3)
  z = jax_sm100.matmul(jnp.ones((2, 0), jnp.bfloat16), jnp.ones((0, 3), jnp.bfloat16))
  np.testing.assert_array_equal(f64(z), np.zeros((2, 3)))


def _vjp_refs(a, b, g):
  """float64 dA = g @ b^T, dB = a^T @ g summed over broadcast batch dims."""
  a64, b64, g64 = f64(a), f64(b), f64(g)
  da = g64 @ np.swapaxes(b64, -1, -2)
  db = np.swapaxes(a64, -1, -2) @ g64
  da_abs = np.abs(g64) @ np.abs(np.swapaxes(b64, -1, -2))
  db_abs = np.abs(np.swapaxes(a64, -1, -2)) @ np.abs(g64)

  def sum_to(x, shape):
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    return x.sum(axis=axes, keepdims=True).reshape(shape)

  return (sum_to(da, a.shape), sum_to(da_abs, a.shape),
          sum_to(db, b.shape), sum_to(db_abs, b.shape))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_vjp_matches_float64(rng, dtype, sa, sb):
  a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
  out, vjp = jax.vjp(jax_sm100.matmul, a, b)
  g = random_array(rng, out.shape, dtype)
  da, db = jax.jit(vjp)(g)
  assert da.dtype == a.dtype and db.dtype == b.dtype
  da_ref, da_abs, db_ref, db_abs = _vjp_refs(a, b, g)
  assert_matmul_close(da, da_ref, da_abs, np.prod(out.shape[:-2]) * sb[-1], dtype, what="dA")
  assert_matmul_close(db, db_ref, db_abs, np.prod(out.shape[:-2]) * sa[-2], dtype, what="dB")


@pytest.mark.parametrize("sa,sb", [((3, 7), (7, 5)), ((2, 4, 6), (6, 3)), ((2, 4, 6), (2, 6, 3))])
def test_matmul_check_grads_f32(rng, sa, sb):
  # Finite differences need float32. matmul is bilinear, so along any direction
  # it is a quadratic in the step and central differences are exact for every
  # step size; a large eps keeps the float32 rounding of f(x +- eps*v) (which
  # the difference divides by eps) far below check_grads' 2e-3 tolerance. With
  # the default eps=1e-4 that rounding alone was ~1e-3 and the test was flaky.
  a, b = random_array(rng, sa, jnp.float32), random_array(rng, sb, jnp.float32)
  check_grads(jax_sm100.matmul, (a, b), order=1, modes=["rev"], eps=0.25)


def test_matmul_vmap(rng):
  a = random_array(rng, (4, 5, 33, 20), jnp.bfloat16)
  b = random_array(rng, (20, 12), jnp.bfloat16)
  b_batched = random_array(rng, (20, 4, 12), jnp.bfloat16)   # vmapped on axis 1
  got = jax.vmap(jax.vmap(jax_sm100.matmul, (0, None)), (0, None))(a, b)
  ref, absprod = _ref(a, b)
  assert_matmul_close(got, ref, absprod, 20, jnp.bfloat16, what="nested vmap")
  got = jax.jit(jax.vmap(jax_sm100.matmul, (0, 1)))(a[:, 0], b_batched)
  ref, absprod = _ref(a[:, 0], np.moveaxis(f64(b_batched), 1, 0))
  assert_matmul_close(got, ref, absprod, 20, jnp.bfloat16, what="vmap in_axes=(0, 1)")


def test_matmul_vmap_of_grad(rng):
  a = random_array(rng, (3, 8, 16), jnp.float32)
  b = random_array(rng, (16, 8), jnp.float32)
  loss = lambda a, b: jnp.sum(jax_sm100.matmul(a, b) ** 2)
  got = jax.vmap(jax.grad(loss, argnums=1), (0, None))(a, b)
  # d/dB sum((aB)^2) = 2 a^T (a B)
  a64, b64 = f64(a), f64(b)
  ref = 2 * np.swapaxes(a64, -1, -2) @ (a64 @ b64)
  np.testing.assert_allclose(f64(got), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


# --------------------------------------------------------------------------
# matmul_residual
# --------------------------------------------------------------------------

RES_CASES = [
    ((1, 1), (1, 1), (1, 1)),
    ((3, 7), (7, 5), (3, 5)),
    ((257, 65), (65, 129), (257, 129)),
    ((2, 9, 24), (24, 16), (2, 9, 16)),      # folded into M
    ((2, 9, 24), (24, 16), (9, 16)),         # c broadcast over the batch
    ((2, 9, 24), (2, 24, 16), (2, 9, 16)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb,sc", RES_CASES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.75, -2.5), (-3, 0.0)])
def test_matmul_residual_matches_float64(rng, dtype, sa, sb, sc, alpha, beta):
  a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
  c = random_array(rng, sc, dtype)
  got = jax.jit(lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=alpha, beta=beta))(a, b, c)
  assert got.dtype == dtype
  prod, absprod = _ref(a, b)
  ref = alpha * prod + beta * f64(c)
  # alpha*acc and +beta*c are fp32 operations: 2 more fp32 roundings.
  extra = 4 * 2.0**-24 * (abs(alpha) * absprod + abs(beta) * np.abs(f64(c)))
  assert_matmul_close(got, ref, abs(alpha) * absprod, sa[-1], dtype, extra=extra)


def test_matmul_residual_beta_zero_does_not_read_c(rng):
  a, b = random_array(rng, (5, 16), jnp.bfloat16), random_array(rng, (16, 8), jnp.bfloat16)
  c = jnp.full((5, 8), jnp.nan, jnp.bfloat16)
  got = jax.jit(lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=2.0, beta=0))(a, b, c)
  assert np.isfinite(f64(got)).all()
  prod, absprod = _ref(a, b)
  assert_matmul_close(got, 2 * prod, 2 * absprod, 16, jnp.bfloat16)
  # and the gradient w.r.t. c is exactly zero (not NaN)
  dc = jax.grad(lambda c: jnp.sum(jax_sm100.matmul_residual(a, b, c, beta=0.0)
                                  .astype(jnp.float32)))(c)
  np.testing.assert_array_equal(f64(dc), np.zeros((5, 8)))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("sa,sb,sc", RES_CASES[1:])
def test_matmul_residual_vjp_matches_float64(rng, dtype, sa, sb, sc):
  alpha, beta = 0.3, -1.5
  a, b, c = (random_array(rng, s, dtype) for s in (sa, sb, sc))
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=alpha, beta=beta)
  out, vjp = jax.vjp(f, a, b, c)
  g = random_array(rng, out.shape, dtype)
  da, db, dc = jax.jit(vjp)(g)
  da_ref, da_abs, db_ref, db_abs = _vjp_refs(a, b, g)
  # alpha*g is rounded to g's dtype once before the products: one more
  # rounding of an input, bounded by u_in * |alpha| (|g| @ |b^T|).
  u = UNIT_ROUNDOFF[np.dtype(dtype)]
  batch = np.prod(out.shape[:-2])
  assert_matmul_close(da, alpha * da_ref, abs(alpha) * da_abs, batch * sb[-1], dtype,
                      extra=u * abs(alpha) * da_abs, what="dA")
  assert_matmul_close(db, alpha * db_ref, abs(alpha) * db_abs, batch * sa[-2], dtype,
                      extra=u * abs(alpha) * db_abs, what="dB")
  dc_ref, dc_abs = beta * f64(g), abs(beta) * np.abs(f64(g))
  if dc.shape != g.shape:  # c was broadcast over the batch: its cotangent sums
    dc_ref, dc_abs = dc_ref.sum(axis=0), dc_abs.sum(axis=0)
  # beta*g is one fp32 rounding per term before the (fp32) batch sum.
  assert_matmul_close(dc, dc_ref, dc_abs, batch, dtype, extra=2.0**-24 * dc_abs, what="dC")


def test_matmul_residual_check_grads_f32(rng):
  a, b, c = (random_array(rng, s, jnp.float32) for s in ((4, 6), (6, 3), (4, 3)))
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0)
  check_grads(f, (a, b, c), order=1, modes=["rev"], eps=0.25)  # see above


def test_matmul_residual_vmap(rng):
  a = random_array(rng, (3, 10, 24), jnp.float16)
  b = random_array(rng, (3, 24, 8), jnp.float16)
  c = random_array(rng, (10, 8), jnp.float16)
  f = lambda a, b: jax_sm100.matmul_residual(a, b, c, alpha=1.0, beta=0.5)
  got = jax.vmap(f)(a, b)
  prod, absprod = _ref(a, b)
  assert_matmul_close(got, prod + 0.5 * f64(c), absprod, 24, jnp.float16,
                      extra=4 * 2.0**-24 * (absprod + np.abs(f64(c))))
