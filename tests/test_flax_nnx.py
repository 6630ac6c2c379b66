"""flax.nnx models through jax_sm100 under nnx.jit and nnx.grad."""
import pytest

# flax/optax are optional dependencies (pip install jax_sm100[flax]); CI installs them.
pytest.importorskip("flax")
pytest.importorskip("optax")

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import jax_sm100
import jax_sm100.flax as jf
from conftest import f64, random_array


class MLP(nnx.Module):
  def __init__(self, linear, d_in, d_out, rngs, **kw):
    self.l1 = linear(d_in, 64, rngs=rngs, **kw)
    self.l2 = linear(64, d_out, rngs=rngs, **kw)

  def __call__(self, x):
    return self.l2(nnx.relu(self.l1(x)))


def _linear_with(dot_general):
  return lambda i, o, rngs, **kw: nnx.Linear(i, o, rngs=rngs, dot_general=dot_general, **kw)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_linear_dot_general_matches_stock(rng, dtype):
  x = random_array(rng, (8, 40), jnp.float32)
  ours = MLP(_linear_with(jax_sm100.dot_general), 40, 6, nnx.Rngs(0), dtype=dtype)
  stock = MLP(nnx.Linear, 40, 6, nnx.Rngs(0), dtype=dtype)
  loss = lambda m, x: jnp.mean(m(x).astype(jnp.float32) ** 2)
  y, g = nnx.jit(nnx.value_and_grad(loss))(ours, x)
  y0, g0 = nnx.jit(nnx.value_and_grad(loss))(stock, x)
  tol = 1e-5 if dtype == jnp.float32 else 3e-2
  np.testing.assert_allclose(float(y), float(y0), rtol=tol)
  for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g0)):
    np.testing.assert_allclose(f64(a), f64(b), rtol=tol, atol=tol * np.abs(f64(b)).max())


def test_fp8_linear_matches_fp8_dot_and_grads(rng):
  x = random_array(rng, (16, 200), jnp.bfloat16)
  lin = nnx.Linear(200, 24, dot_general=jax_sm100.fp8_dot_general, dtype=jnp.bfloat16,
                   rngs=nnx.Rngs(0))
  want = jax_sm100.fp8_dot(x, lin.kernel[...].astype(jnp.bfloat16)) + lin.bias[...].astype(
      jnp.bfloat16)
  np.testing.assert_array_equal(f64(nnx.jit(lambda m, x: m(x))(lin, x)), f64(want))
  g = nnx.grad(lambda m: jnp.sum(m(x).astype(jnp.float32) ** 2))(lin)
  gk = jax.grad(lambda k: jnp.sum((jax_sm100.fp8_dot(x, k.astype(jnp.bfloat16)) +
                                   lin.bias[...].astype(jnp.bfloat16)).astype(jnp.float32)
                                  ** 2))(lin.kernel[...])
  np.testing.assert_array_equal(f64(g["kernel"][...]), f64(gk))


@pytest.mark.parametrize("linear", [jf.Linear, jf.Fp8Linear])
def test_nnx_training_loop_reduces_loss(rng, linear):
  x = random_array(rng, (128, 32), jnp.float32)
  y = jnp.tanh(x @ random_array(rng, (32, 4), jnp.float32, scale=0.3))
  model = MLP(linear, 32, 4, nnx.Rngs(0), dtype=jnp.bfloat16)
  opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

  @nnx.jit
  def step(model, opt):
    loss_fn = lambda m: jnp.mean((m(x).astype(jnp.float32) - y) ** 2)
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  losses = [float(step(model, opt)) for _ in range(40)]
  assert losses[-1] < 0.5 * losses[0], losses[::8]
