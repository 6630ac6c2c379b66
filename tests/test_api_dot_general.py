"""dot_general / fp8_dot_general: drop-in lax.dot_general replacements."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_sm100
from jax_sm100 import _dot_general
from conftest import assert_matmul_close, f64, random_array


@pytest.fixture
def spy(monkeypatch):
  """Counts the calls dot_general routes to matmul / fp8_dot."""
  calls = {"matmul": 0, "fp8_dot": 0}

  def wrap(name, fn):
    def counted(*a, **k):
      calls[name] += 1
      return fn(*a, **k)
    return counted

  monkeypatch.setattr(_dot_general, "matmul", wrap("matmul", _dot_general.matmul))
  monkeypatch.setattr(_dot_general, "fp8_dot", wrap("fp8_dot", _dot_general.fp8_dot))
  return calls


# (lhs shape, rhs shape, dimension_numbers, routed to matmul?)
CASES = [
    ((7, 5), (5, 3), (((1,), (0,)), ((), ())), True),               # Dense
    ((2, 7, 5), (5, 3), (((2,), (0,)), ((), ())), True),            # Dense on 3-D input
    ((5,), (5, 3), (((0,), (0,)), ((), ())), True),                 # vector @ matrix
    ((2, 7, 4, 5), (4, 5, 6, 3), (((2, 3), (0, 1)), ((), ())), True),  # DenseGeneral
    ((4, 7, 5), (4, 5, 3), (((2,), (1,)), ((0,), (0,))), True),     # batched matmul
    ((4, 7, 5), (4, 3, 5), (((2,), (2,)), ((0,), (0,))), False),    # q @ k^T layout
    ((5, 7), (5, 3), (((0,), (0,)), ((), ())), False),              # lhs contracts dim 0
    ((7, 5), (3, 5), (((1,), (1,)), ((), ())), False),              # rhs contracts last dim
]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("sl,sr,dn,routed", CASES)
def test_dot_general_matches_lax(rng, spy, dtype, sl, sr, dn, routed):
  lhs, rhs = random_array(rng, sl, dtype), random_array(rng, sr, dtype)
  got = jax.jit(lambda l, r: jax_sm100.dot_general(l, r, dn))(lhs, rhs)
  want = lax.dot_general(lhs, rhs, dn)
  assert got.shape == want.shape and got.dtype == want.dtype
  assert spy["matmul"] == int(routed)
  ref = lax.dot_general(jnp.asarray(f64(lhs)), jnp.asarray(f64(rhs)), dn,
                        precision=lax.Precision.HIGHEST)
  absref = lax.dot_general(jnp.abs(jnp.asarray(f64(lhs))), jnp.abs(jnp.asarray(f64(rhs))), dn,
                           precision=lax.Precision.HIGHEST)
  k = int(np.prod([sl[d] for d in dn[0][0]]))
  assert_matmul_close(got, np.asarray(ref, np.float64), np.asarray(absref, np.float64),
                      k, dtype, extra=2 * k * 2.0**-24 * np.asarray(absref, np.float64))


def test_dot_general_keywords(rng, spy):
  lhs = random_array(rng, (6, 16), jnp.bfloat16)
  rhs = random_array(rng, (16, 4), jnp.bfloat16)
  dn = (((1,), (0,)), ((), ()))
  # what nnx.Linear passes: out_sharding=None (+ preferred_element_type)
  y = jax_sm100.dot_general(lhs, rhs, dn, precision=None, out_sharding=None,
                            preferred_element_type=jnp.float32)
  assert y.dtype == jnp.float32 and spy["matmul"] == 1
  # a non-default precision or an unknown dtype request goes to lax unchanged
  y = jax_sm100.dot_general(lhs, rhs, dn, precision=lax.Precision.HIGHEST)
  assert spy["matmul"] == 1 and y.dtype == jnp.bfloat16
  y = jax_sm100.dot_general(lhs.astype(jnp.float32), rhs, dn)   # mixed dtypes
  assert spy["matmul"] == 1 and y.dtype == jnp.float32
  # positional precision, as lax.dot_general allows
  jax_sm100.dot_general(lhs, rhs, dn, lax.Precision.DEFAULT)
  assert spy["matmul"] == 2


def test_dot_general_grad(rng):
  x = random_array(rng, (3, 9, 20), jnp.float32)
  w = random_array(rng, (20, 6), jnp.float32)
  dn = (((2,), (0,)), ((), ()))
  f = lambda dg: lambda x, w: jnp.sum(jnp.sin(dg(x, w, dn)))
  got = jax.grad(f(jax_sm100.dot_general), (0, 1))(x, w)
  want = jax.grad(f(lax.dot_general), (0, 1))(x, w)
  for g, h in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-5, atol=1e-5)


def test_fp8_dot_general(rng, spy):
  x = random_array(rng, (2, 9, 200), jnp.bfloat16)
  w = random_array(rng, (200, 40), jnp.bfloat16, scale=0.1)
  dn = (((2,), (0,)), ((), ()))
  y = jax.jit(lambda x, w: jax_sm100.fp8_dot_general(x, w, dn, out_sharding=None))(x, w)
  assert spy["fp8_dot"] == 1 and y.shape == (2, 9, 40) and y.dtype == jnp.bfloat16
  np.testing.assert_array_equal(f64(y), f64(jax_sm100.fp8_dot(x, w)))
  # batch dims are not an fp8 pattern: plain lax.dot_general
  dnb = (((2,), (1,)), ((0,), (0,)))
  wb = random_array(rng, (2, 200, 40), jnp.bfloat16)
  got = jax_sm100.fp8_dot_general(x, wb, dnb)
  assert spy["fp8_dot"] == 1
  np.testing.assert_array_equal(f64(got), f64(lax.dot_general(x, wb, dnb)))
