"""Differentiation is the same on every backend (reference here; the kernel path under the
emulated FFI): reverse mode through the custom_vjp ops, a clear error naming the op for
forward mode, and a clear error for the ops documented as not differentiable."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100

FORWARD_MODE = {
    "jvp": lambda f, *a: jax.jvp(f, a, a),
    "jacfwd": lambda f, *a: jax.jacfwd(f, argnums=tuple(range(len(a))))(*a),
    "jit_jvp": lambda f, *a: jax.jit(lambda *b: jax.jvp(f, b, b))(*a),
}


def _ops(rng):
  a = jnp.asarray(rng.standard_normal((16, 128)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((128, 24)), jnp.float32)
  c = jnp.asarray(rng.standard_normal((16, 24)), jnp.float32)
  return {
      "matmul": (jax_sm100.matmul, (a, b)),
      "matmul_residual": (lambda a, b, c: jax_sm100.matmul_residual(a, b, c, beta=0.5),
                          (a, b, c)),
      "fp8_dot": (jax_sm100.fp8_dot, (a, b)),
  }


@pytest.mark.parametrize("mode", list(FORWARD_MODE))
@pytest.mark.parametrize("op", ["matmul", "matmul_residual", "fp8_dot"])
@pytest.mark.parametrize("path", ["reference", "emulated"])
def test_forward_mode_names_the_op(rng, request, path, op, mode):
  if path == "emulated":
    request.getfixturevalue("emulated_kernels")
  fn, args = _ops(rng)[op]
  if path == "emulated":
    args = tuple(x.astype(jnp.bfloat16) for x in args)
  with pytest.raises(TypeError, match=rf"jax_sm100\.{op} supports reverse-mode "
                                      r"differentiation only.*jax\.jacrev"):
    FORWARD_MODE[mode](fn, *args)


@pytest.mark.parametrize("op", ["matmul", "matmul_residual", "fp8_dot"])
def test_reverse_mode_still_works(rng, op):
  fn, args = _ops(rng)[op]
  grads = jax.grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums=tuple(range(len(args))))(*args)
  assert all(g.shape == x.shape and bool(jnp.all(jnp.isfinite(g))) for g, x in zip(grads, args))
  _, vjp = jax.vjp(fn, *args)
  assert all(g.shape == x.shape for g, x in zip(vjp(fn(*args)), args))


def _fp8_operands(rng):
  x = jnp.asarray(rng.standard_normal((16, 256)), jnp.float32)
  w = jnp.asarray(rng.standard_normal((24, 256)), jnp.float32)
  aq, sa = jax_sm100.quantize_fp8_blockwise(x)
  bq, sb = jax_sm100.quantize_fp8_blockwise(w, block=(128, 128))
  return x, aq, sa, bq, sb


@pytest.mark.parametrize("path", ["reference", "emulated"])
def test_fp8_blockwise_matmul_is_not_differentiable_anywhere(rng, request, path):
  if path == "emulated":
    request.getfixturevalue("emulated_kernels")
  x, aq, sa, bq, sb = _fp8_operands(rng)
  c = jnp.zeros((16, 24), jnp.bfloat16)
  f = lambda sa, c: jnp.sum(jax_sm100.fp8_blockwise_matmul(aq, sa, bq, sb, c=c)
                            .astype(jnp.float32))
  msg = r"jax_sm100\.fp8_blockwise_matmul is not differentiable.*fp8_dot"
  for attempt in (lambda: jax.grad(f)(sa, c), lambda: jax.grad(f, argnums=1)(sa, c),
                  lambda: jax.jvp(f, (sa, c), (sa, c)),
                  lambda: jax.jit(jax.grad(f))(sa, c)):
    with pytest.raises(TypeError, match=msg):
      attempt()
  # The plain call (and a derivative that does not reach the op) is unaffected.
  y = jax_sm100.fp8_blockwise_matmul(aq, sa, bq, sb)
  assert y.shape == (16, 24)
  g = jax.grad(lambda s: jnp.sum(s) + jnp.sum(jax.lax.stop_gradient(
      jax_sm100.fp8_blockwise_matmul(aq, sa, bq, sb)).astype(jnp.float32)))(sa)
  np.testing.assert_array_equal(np.asarray(g), np.ones(sa.shape, np.float32))


@pytest.mark.parametrize("path", ["reference", "emulated"])
def test_quantize_is_not_differentiable_anywhere(rng, request, path):
  if path == "emulated":
    request.getfixturevalue("emulated_kernels")
  x = jnp.asarray(rng.standard_normal((8, 256)), jnp.float32)
  f = lambda x: jnp.sum(jax_sm100.quantize_fp8_blockwise(x)[1])
  with pytest.raises(TypeError, match=r"jax_sm100\.quantize_fp8_blockwise is not differentiable"):
    jax.grad(f)(x)
  with pytest.raises(TypeError, match=r"jax_sm100\.quantize_fp8_blockwise is not differentiable"):
    jax.jvp(f, (x,), (x,))
  q, s = jax_sm100.quantize_fp8_blockwise(x)
  assert q.shape == x.shape and s.shape == (8, 2)
