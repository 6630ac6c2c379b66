"""flax.linen models through jax_sm100 under jit and grad."""
import pytest

# flax/optax are optional dependencies (pip install jax_sm100[flax]); CI installs them.
pytest.importorskip("flax")

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

import jax_sm100
import jax_sm100.flax as jf
from conftest import f64, random_array


class MLP(nn.Module):
  dense: type
  dtype: object = jnp.float32
  kwargs: dict = None

  @nn.compact
  def __call__(self, x):
    kw = self.kwargs or {}
    x = nn.relu(self.dense(48, dtype=self.dtype, **kw)(x))
    return self.dense(10, dtype=self.dtype, **kw)(x)


def _loss(model):
  return lambda p, x: jnp.mean(model.apply(p, x).astype(jnp.float32) ** 2)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dense_with_our_dot_general_matches_stock(rng, dtype):
  x = random_array(rng, (4, 7, 33), jnp.float32)
  ours = MLP(nn.Dense, dtype, {"dot_general": jax_sm100.dot_general})
  stock = MLP(nn.Dense, dtype)
  params = stock.init(jax.random.key(0), x)
  y, g = jax.jit(jax.value_and_grad(_loss(ours)))(params, x)
  y0, g0 = jax.jit(jax.value_and_grad(_loss(stock)))(params, x)
  # f32: same math, fp32 accumulation both ways. bf16: both round to bf16
  # after fp32 accumulation, ordering differences move a few ulps (2^-8).
  tol = 1e-5 if dtype == jnp.float32 else 3e-2
  np.testing.assert_allclose(float(y), float(y0), rtol=tol)
  for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g0)):
    np.testing.assert_allclose(f64(a), f64(b), rtol=tol, atol=tol * np.abs(f64(b)).max())


def test_jax_sm100_flax_dense_is_the_same_layer(rng):
  x = random_array(rng, (5, 20), jnp.float32)
  params = nn.Dense(12).init(jax.random.key(1), x)
  np.testing.assert_array_equal(np.asarray(jf.Dense(12).apply(params, x)),
                                np.asarray(nn.Dense(12, dot_general=jax_sm100.dot_general)
                                           .apply(params, x)))


def test_dense_general_routes(rng):
  x = random_array(rng, (3, 4, 5, 6), jnp.float32)
  m = nn.DenseGeneral(features=(2, 7), axis=(-2, -1), dot_general=jax_sm100.dot_general)
  stock = nn.DenseGeneral(features=(2, 7), axis=(-2, -1))
  p = stock.init(jax.random.key(0), x)
  np.testing.assert_allclose(np.asarray(m.apply(p, x)), np.asarray(stock.apply(p, x)),
                             rtol=1e-5, atol=1e-5)


def test_fp8_dense_trains(rng):
  # Regression onto a random linear map through Fp8Dense: loss must drop.
  x = random_array(rng, (128, 64), jnp.float32)
  y = x @ random_array(rng, (64, 8), jnp.float32, scale=0.2)
  model = jf.Fp8Dense(8, dtype=jnp.bfloat16)
  params = model.init(jax.random.key(0), x)
  loss = lambda p: jnp.mean((model.apply(p, x).astype(jnp.float32) - y) ** 2)
  step = jax.jit(lambda p: jax.tree.map(lambda a, g: a - 0.2 * g, p, jax.grad(loss)(p)))
  l0 = float(loss(params))
  for _ in range(30):
    params = step(params)
  assert float(loss(params)) < 0.3 * l0


def test_fp8_dense_output_is_fp8_dot(rng):
  x = random_array(rng, (6, 130), jnp.bfloat16)
  model = jf.Fp8Dense(20, dtype=jnp.bfloat16)
  p = model.init(jax.random.key(0), x)
  k, b = p["params"]["kernel"], p["params"]["bias"]
  want = jax_sm100.fp8_dot(x, k.astype(jnp.bfloat16)) + b.astype(jnp.bfloat16)
  np.testing.assert_array_equal(f64(model.apply(p, x)), f64(want))


def test_linen_model_lowers_to_the_kernels(fake_sm90):
  import re
  x = jnp.ones((16, 64), jnp.float32)
  for dense, target in ((jf.Dense, "jax_sm100_gemm"), (jf.Fp8Dense, "jax_sm100_fp8_gemm")):
    model = MLP(dense, jnp.bfloat16)
    params = jax.eval_shape(model.init, jax.random.key(0), x)  # nothing runs
    text = jax.jit(jax.grad(_loss(model))).lower(params, x).as_text()
    # 2 layers: forward + dx + dw each, except the first layer's dx (x is not
    # differentiated, so it is dead code).
    assert len(re.findall(rf"custom_call @{target}\(", text)) == 5
