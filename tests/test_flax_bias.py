"""jax_sm100.flax.DenseAct (linen) and LinearAct (nnx): act(x @ kernel + bias) through
jax_sm100.matmul_bias, with nn.Dense's / nnx.Linear's parameters."""
import pytest

# flax is an optional dependency (pip install jax_sm100[flax]); CI installs it.
pytest.importorskip("flax")

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx

import jax_sm100.flax as jf
from jax_sm100 import _activations
from conftest import UNIT_ROUNDOFF, f64, random_array

BF16, F32 = jnp.bfloat16, jnp.float32
ACTS = [None, "relu", "gelu", "gelu_exact", "silu"]


@pytest.fixture(autouse=True)
def _f32_matmuls_at_f32():
  """float32 products at float32 precision: on a GPU XLA's default precision for them is
  TF32-class (about 1e-3 relative), for the layer's reference path and the stock layer
  alike, while these tests check the layer's wiring against float64 at float32 rounding."""
  with jax.default_matmul_precision("highest"):
    yield


def stock_act(name, y):
  """The activation a user would apply after the stock layer."""
  return _activations.apply(_activations.canonical("test", name), y)


def formula64(x, kernel, bias, act, dtype):
  """act(x @ kernel + bias) in float64 from the operands as the layer promotes them."""
  cast = lambda v: f64(jnp.asarray(v).astype(dtype))
  z = cast(x) @ cast(kernel) + (cast(bias) if bias is not None else 0.0)
  return f64(_activations.apply(_activations.canonical("test", act), jnp.asarray(z, F32)))


def _close(got, want, dtype, scale):
  u = UNIT_ROUNDOFF[np.dtype(dtype)]
  np.testing.assert_allclose(f64(got), want, rtol=4 * u, atol=4 * u * scale + 1e-6)


# ---------------------------------------------------------------------------
# linen
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_act_params_are_dense_params(rng, use_bias):
  x = random_array(rng, (3, 5, 20), F32)
  key = jax.random.key(7)
  ours = jf.DenseAct(12, activation="gelu", use_bias=use_bias).init(key, x)
  stock = nn.Dense(12, use_bias=use_bias).init(key, x)
  assert jax.tree.structure(ours) == jax.tree.structure(stock)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(stock)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # same initializers
  assert set(ours["params"]) == ({"kernel", "bias"} if use_bias else {"kernel"})


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("act", ACTS)
def test_dense_act_output_and_grads(rng, act, dtype):
  x = random_array(rng, (4, 7, 33), F32)
  layer = jf.DenseAct(24, activation=act, dtype=dtype)
  params = nn.Dense(24).init(jax.random.key(0), x)   # a stock checkpoint loads as is
  params = jax.tree.map(lambda p: p + 0.1 * jnp.ones_like(p), params)  # a non-zero bias
  y = jax.jit(layer.apply)(params, x)
  assert y.dtype == dtype and y.shape == (4, 7, 24)
  p = params["params"]
  want = formula64(x, p["kernel"], p["bias"], act, dtype)
  _close(y, want, dtype, np.abs(want).max())

  # Gradients against the stock layer followed by the activation (the same function).
  stock = nn.Dense(24, dtype=dtype)
  ours_loss = lambda p, x: jnp.mean(layer.apply(p, x).astype(F32) ** 2)
  stock_loss = lambda p, x: jnp.mean(stock_act(act, stock.apply(p, x).astype(F32)) ** 2)
  g = jax.jit(jax.grad(ours_loss))(params, x)
  g0 = jax.jit(jax.grad(stock_loss))(params, x)
  tol = 1e-4 if dtype == F32 else 5e-2
  for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g0)):
    np.testing.assert_allclose(f64(a), f64(b), rtol=tol, atol=tol * np.abs(f64(b)).max())


def test_dense_act_1d_input_and_bad_arguments(rng):
  x = random_array(rng, (20,), F32)
  layer = jf.DenseAct(6, activation="silu")
  params = layer.init(jax.random.key(1), x)
  y = layer.apply(params, x)
  assert y.shape == (6,)
  p = params["params"]
  np.testing.assert_allclose(f64(y), formula64(x, p["kernel"], p["bias"], "silu", F32),
                             rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="unknown activation 'tanh'"):
    jf.DenseAct(6, activation="tanh")
  with pytest.raises(ValueError, match="dot_general"):
    jf.DenseAct(6, dot_general=jax.lax.dot_general)


# ---------------------------------------------------------------------------
# nnx
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("use_bias", [True, False])
def test_linear_act_params_are_linear_params(use_bias):
  ours = jf.LinearAct(20, 12, activation="relu", use_bias=use_bias, rngs=nnx.Rngs(3))
  stock = nnx.Linear(20, 12, use_bias=use_bias, rngs=nnx.Rngs(3))
  s, s0 = nnx.state(ours, nnx.Param), nnx.state(stock, nnx.Param)
  assert jax.tree.structure(s) == jax.tree.structure(s0)
  for a, b in zip(jax.tree.leaves(s), jax.tree.leaves(s0)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("act", ACTS)
def test_linear_act_output_and_grads(rng, act, dtype):
  x = random_array(rng, (2, 9, 40), F32)
  ours = jf.LinearAct(40, 16, activation=act, dtype=dtype, rngs=nnx.Rngs(0))
  stock = nnx.Linear(40, 16, dtype=dtype, rngs=nnx.Rngs(0))
  for m in (ours, stock):
    m.bias[...] = 0.1 * jnp.arange(16, dtype=F32) - 0.5
  y = nnx.jit(lambda m, x: m(x))(ours, x)
  assert y.dtype == dtype and y.shape == (2, 9, 16)
  want = formula64(x, ours.kernel[...], ours.bias[...], act, dtype)
  _close(y, want, dtype, np.abs(want).max())

  g = nnx.grad(lambda m: jnp.mean(m(x).astype(F32) ** 2))(ours)
  g0 = nnx.grad(lambda m: jnp.mean(stock_act(act, m(x).astype(F32)) ** 2))(stock)
  tol = 1e-4 if dtype == F32 else 5e-2
  for name in ("kernel", "bias"):
    a, b = f64(g[name][...]), f64(g0[name][...])
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=name)


def test_linear_act_bad_arguments():
  with pytest.raises(ValueError, match="unknown activation 'sigmoid'"):
    jf.LinearAct(4, 4, activation="sigmoid", rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="dot_general"):
    jf.LinearAct(4, 4, dot_general=jax.lax.dot_general, rngs=nnx.Rngs(0))


def test_linear_act_runs_the_fused_target_on_cpu_ffi(rng, cpu_ffi):
  x = random_array(rng, (8, 40), BF16)
  layer = jf.LinearAct(40, 24, activation="gelu", dtype=BF16, rngs=nnx.Rngs(0))
  y = nnx.jit(lambda m, x: m(x))(layer, x)
  want = formula64(x, layer.kernel[...], layer.bias[...], "gelu", BF16)
  _close(y, want, BF16, np.abs(want).max())
  assert "jax_sm100_gemm_bias" in {c[0] for c in cpu_ffi}
