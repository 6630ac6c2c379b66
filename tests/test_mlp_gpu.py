"""GPU tests of the activation-backward GEMM (FFI target jax_sm100_gemm_dact: the sm90
residual kernel whose epilogue multiplies by act'(C) and sums columns into dbias) and of
jax_sm100.mlp on it.

Marked `gpu`: skipped unless the default device is an sm_90 GPU (conftest forces the
measured dispatch to the kernel there). References are float64 NumPy on fresh random
inputs; the error measure is ||out - ref|| / ||ref||, NaN never passes.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from conftest import act64, act64_derivative  # noqa: E402
from test_matmul_bias_gpu import _f64, _rand, _rel_err, _rng  # noqa: E402  (fresh seeds)

TARGET = "jax_sm100_gemm_dact"
CODES = {"relu": 1, "gelu": 2, "gelu_exact": 3, "silu": 4}

pytestmark = pytest.mark.gpu


def test_target_is_registered():
  assert TARGET in reg.registered_targets()


@functools.lru_cache(maxsize=None)
def _fn(trans_a, trans_b, out_shape, dtype, act, cluster_m, want_dbias):
  d = jax.ShapeDtypeStruct(out_shape, dtype)
  db = jax.ShapeDtypeStruct((out_shape[-1],) if want_dbias else (0,), jnp.float32)
  attrs = dict(trans_a=trans_a, trans_b=trans_b, block_m=np.int32(128),
               block_n=np.int32(256), cluster_m=np.int32(cluster_m), group_m=np.int32(8),
               split_k=np.int32(1), activation=np.int32(CODES[act]))
  return jax.jit(lambda a, b, c: jax.ffi.ffi_call(TARGET, (d, db))(a, b, c, **attrs))


@pytest.mark.parametrize("act", list(CODES))
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("m,n,k,trans_a,trans_b,cluster_m", [
    (4096, 2048, 1024, False, True, 2),   # dz @ W^T, full tiles, CTA pairs
    (1000, 776, 520, False, True, 1),     # partial tiles everywhere
    (1000, 776, 520, False, True, 2),     # ... with an odd number of M tiles in pairs
    (70, 264, 384, False, True, 1),       # one M tile: A's box stops at M (stale rows)
    (384, 512, 256, True, False, 2),      # the other layouts
    (256, 320, 16, False, False, 1),      # K = 16 (the MLP's logits gradient, padded)
])
def test_dact_target_matches_float64(act, dtype, m, n, k, trans_a, trans_b, cluster_m):
  rng = _rng()
  a = _rand((k, m) if trans_a else (m, k), dtype, rng)
  b = _rand((n, k) if trans_b else (k, n), dtype, rng, scale=k ** -0.5)
  c = _rand((m, n), dtype, rng, scale=2.0)
  d, dbias = _fn(trans_a, trans_b, (m, n), dtype, act, cluster_m, True)(a, b, c)
  a64 = _f64(a).T if trans_a else _f64(a)
  b64 = _f64(b).T if trans_b else _f64(b)
  x = (a64 @ b64) * act64_derivative(act, _f64(c))
  u = 2.0**-8 if dtype == jnp.bfloat16 else 2.0**-11
  assert _rel_err(d, x) < 2 * u
  assert dbias.shape == (n,) and dbias.dtype == np.float32
  col = x.sum(axis=0)
  assert _rel_err(dbias, col) < 1e-4, _rel_err(dbias, col)
  # dbias not wanted: the same d.
  d2, db2 = _fn(trans_a, trans_b, (m, n), dtype, act, cluster_m, False)(a, b, c)
  assert db2.shape == (0,)
  np.testing.assert_array_equal(_f64(d2), _f64(d))


def test_dact_dbias_is_zeroed_every_call():
  # The kernel adds into dbias: a second call on the same shapes must not accumulate.
  rng = _rng()
  a, b, c = (_rand((256, 128), jnp.bfloat16, rng), _rand((256, 128), jnp.bfloat16, rng),
             _rand((256, 256), jnp.bfloat16, rng))
  f = _fn(False, True, (256, 256), jnp.bfloat16, "gelu", 2, True)
  first = np.asarray(f(a, b, c)[1])
  second = np.asarray(f(a, b, c)[1])
  np.testing.assert_allclose(second, first, rtol=1e-5, atol=1e-5)


def _loss(op, t):
  def loss(x, ws, bs):
    y = op(x, ws, bs).astype(jnp.float32)
    return jnp.sum((y - t) ** 2) / y.shape[0]
  return loss


@pytest.mark.parametrize("act", ["gelu", "silu", "relu"])
def test_mlp_grads_on_the_kernel_match_float64(act):
  rng = _rng()
  dims = [64, 1024, 768, 10]
  x = _rand((1000, dims[0]), jnp.bfloat16, rng)
  ws = [_rand((dims[i], dims[i + 1]), jnp.bfloat16, rng, scale=dims[i] ** -0.5)
        for i in range(3)]
  bs = [_rand((dims[i + 1],), jnp.float32, rng, scale=0.5) for i in range(3)]
  t = _rand((1000, dims[-1]), jnp.float32, rng)
  op = lambda x, ws, bs: jax_sm100.mlp(x, ws, bs, activation=act)
  g = jax.jit(jax.grad(_loss(op, t), (0, 1, 2)))
  text = g.lower(x, ws, bs).compile().as_text()
  assert text.count(f'custom_call_target="{TARGET}"') == 2
  grads = jax.tree_util.tree_leaves(g(x, ws, bs))

  # float64 forward and backward by hand, each layer's output rounded to bf16 once as the
  # op's (relu's mask then sees the same zeros).
  y, zs, ys = _f64(x), [], [_f64(x)]
  for l, w in enumerate(ws):
    z = y @ _f64(w) + _f64(bs[l])
    zs.append(z)
    y = _f64(jnp.asarray(act64(act, z) if l < 2 else z, jnp.float32).astype(jnp.bfloat16))
    ys.append(y)
  gy = 2 * (y - _f64(t)) / y.shape[0]
  dws, dbs = [None] * 3, [None] * 3
  dz = gy
  for l in range(2, -1, -1):
    dws[l], dbs[l] = ys[l].T @ dz, dz.sum(0)
    gx = dz @ _f64(ws[l]).T
    dz = gx * act64_derivative(act, ys[l] if act == "relu" else zs[l - 1]) if l > 0 else gx
  ref = [dz] + dws + dbs
  for i, (got, want) in enumerate(zip(grads, ref)):
    assert _rel_err(got, want) < 3e-2, (i, _rel_err(got, want))
