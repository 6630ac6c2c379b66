"""GPU tests of the fused bias/activation epilogue of the sm90 GEMM (FFI target
jax_sm100_gemm_bias) and of jax_sm100.matmul_bias on it.

Every test is marked `gpu` and skipped unless the default device is an sm_90 GPU (conftest;
the measured dispatch is forced to the kernel there). References are float64 NumPy on fresh
random inputs; the error measure is ||out - ref|| / ||ref|| (bf16 outputs land near 3e-3),
NaN never passes. Two ways in: the target directly (every activation, the tile
configurations, partial tiles, layouts, batch broadcast, pre written or not, K == 0) and
the public op under jit, vmap and grad (with the compiled HLO calling the target).
"""
from __future__ import annotations

import functools
import os
import secrets

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from conftest import act64, act64_derivative  # noqa: E402

TARGET = "jax_sm100_gemm_bias"
CODES = {None: 0, "relu": 1, "gelu": 2, "gelu_exact": 3, "silu": 4}
ACTS = list(CODES)

pytestmark = pytest.mark.gpu

_seed = [int(os.environ.get("JAX_SM100_TEST_SEED", secrets.randbits(31)))]
print(f"test_matmul_bias_gpu: base seed {_seed[0]}")


def _rng():
  _seed[0] += 1
  return np.random.default_rng(_seed[0])


def _rand(shape, dtype, rng, scale=1.0):
  return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * scale).astype(dtype)


def _f64(x):
  return np.asarray(jnp.asarray(x).astype(jnp.float32), dtype=np.float64)


def _rel_err(out, ref):
  out = _f64(out)
  assert out.shape == ref.shape, (out.shape, ref.shape)
  assert np.all(np.isfinite(out)), f"{np.sum(~np.isfinite(out))} non-finite outputs"
  return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _op(x, trans):
  return np.swapaxes(x, -1, -2) if trans else x


def test_target_is_registered():
  assert TARGET in reg.registered_targets()


@functools.lru_cache(maxsize=None)
def _fn(trans_a, trans_b, out_shape, out_dtype, act, want_pre, tiling):
  bm, bn, cl, gm = tiling
  d = jax.ShapeDtypeStruct(out_shape, out_dtype)
  pre = jax.ShapeDtypeStruct(out_shape if want_pre else (0,), out_dtype)
  attrs = dict(trans_a=trans_a, trans_b=trans_b, block_m=np.int32(bm), block_n=np.int32(bn),
               cluster_m=np.int32(cl), group_m=np.int32(gm), split_k=np.int32(1),
               activation=np.int32(CODES[act]))
  return jax.jit(lambda a, b, c: jax.ffi.ffi_call(TARGET, (d, pre))(a, b, c, **attrs))


def _run(m, n, k, act, tiling=(128, 256, 1, 8), trans_a=False, trans_b=False,
         out_dtype=jnp.bfloat16, with_bias=True, want_pre=True, batch_a=(), batch_b=(),
         batch_d=(), dtype=jnp.bfloat16):
  """(error of d, error of pre or 0) of one direct launch. The kernel is compiled for an
  output of the input dtype or float32."""
  rng = _rng()
  a = _rand(tuple(batch_a) + ((k, m) if trans_a else (m, k)), dtype, rng)
  b = _rand(tuple(batch_b) + ((n, k) if trans_b else (k, n)), dtype, rng)
  bias = _rand((n,) if with_bias else (0,), jnp.float32, rng, scale=4.0)
  d, pre = _fn(trans_a, trans_b, tuple(batch_d) + (m, n), out_dtype, act, want_pre, tiling)(
      a, b, bias)
  z = np.matmul(_op(_f64(a), trans_a), _op(_f64(b), trans_b))
  z = np.broadcast_to(z + (_f64(bias) if with_bias else 0.0), tuple(batch_d) + (m, n))
  assert d.dtype == out_dtype
  if not want_pre:
    assert pre.shape == (0,)
  return _rel_err(d, act64(act, z)), (_rel_err(pre, z) if want_pre else 0.0)


_TILINGS = [(128, 256, 1, 8), (128, 128, 2, 8), (64, 128, 1, 8), (64, 64, 1, 3)]


@pytest.mark.parametrize("tiling", _TILINGS, ids=lambda t: "%dx%d_c%d_g%d" % t)
@pytest.mark.parametrize("act", ACTS, ids=str)
def test_every_activation_every_tiling_partial_tiles(act, tiling):
  # 328 x 600 x 456: partial tiles in every configuration, 3 M tiles of 128 (with clusters
  # of 2 one CTA's tile lies wholly past M), 8 K blocks.
  err_d, err_pre = _run(328, 600, 456, act, tiling)
  assert err_d <= 1e-2 and err_pre <= 1e-2, (err_d, err_pre)


@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("act", ["relu", "gelu_exact", "silu"])
def test_layouts(act, trans_a, trans_b):
  assert max(_run(136, 392, 328, act, trans_a=trans_a, trans_b=trans_b)) <= 1e-2


@pytest.mark.parametrize("dtype,out_dtype", [(jnp.float16, jnp.float16),
                                             (jnp.float16, jnp.float32),
                                             (jnp.bfloat16, jnp.float32)])
@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_dtypes_no_bias_and_pre_not_written(act, dtype, out_dtype):
  kw = dict(dtype=dtype, out_dtype=out_dtype)
  assert max(_run(200, 520, 136, act, **kw)) <= 1e-2
  assert max(_run(200, 520, 136, act, with_bias=False, **kw)) <= 1e-2
  assert max(_run(200, 520, 136, act, want_pre=False, **kw)) <= 1e-2


def test_f32_output_is_more_precise_than_bf16():
  # f32 d and pre are not rounded to bf16 anywhere in the epilogue.
  err32 = _run(264, 136, 72, "gelu", out_dtype=jnp.float32)
  assert max(err32) <= 1e-5, err32


@pytest.mark.parametrize("act", ["relu", "silu"])
def test_batched_broadcast_and_more_tiles_than_sms(act):
  assert max(_run(1160, 1800, 200, act, batch_a=(2,), batch_b=(), batch_d=(2,))) <= 1e-2
  assert max(_run(1160, 1800, 200, act, tiling=(128, 256, 2, 8), batch_a=(2,), batch_b=(2,),
                  batch_d=(2,))) <= 1e-2


def test_zero_k_writes_act_of_bias():
  rng = _rng()
  bias = _rand((24,), jnp.float32, rng)
  d, pre = _fn(False, False, (5, 24), jnp.float32, "silu", True, (128, 256, 1, 8))(
      jnp.ones((5, 0), jnp.bfloat16), jnp.ones((0, 24), jnp.bfloat16), bias)
  np.testing.assert_allclose(_f64(pre), np.broadcast_to(_f64(bias), (5, 24)))
  np.testing.assert_allclose(_f64(d), np.broadcast_to(act64("silu", _f64(bias)), (5, 24)),
                             rtol=1e-6)


def test_bad_activation_is_rejected_with_a_sentence():
  call = jax.ffi.ffi_call(TARGET, (jax.ShapeDtypeStruct((64, 64), jnp.bfloat16),
                                   jax.ShapeDtypeStruct((0,), jnp.bfloat16)))
  with pytest.raises(Exception, match="activation must be one of"):
    jax.block_until_ready(call(
        jnp.ones((64, 64), jnp.bfloat16), jnp.ones((64, 64), jnp.bfloat16),
        jnp.ones((64,), jnp.float32), trans_a=False, trans_b=False, block_m=np.int32(128),
        block_n=np.int32(256), cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1),
        activation=np.int32(9)))


# ---------------------------------------------------------------------------
# The public op on the kernel
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("act", ACTS, ids=str)
def test_matmul_bias_values_grads_and_hlo(act):
  rng = _rng()
  x = _rand((4, 100, 264), jnp.bfloat16, rng)    # batched x, 2-D w: folded into M
  w = _rand((264, 390), jnp.bfloat16, rng, scale=0.1)
  bias = _rand((390,), jnp.float32, rng)
  f = lambda x, w, c: jax_sm100.matmul_bias(x, w, c, activation=act)
  text = jax.jit(f).lower(x, w, bias).compile().as_text()
  assert f"{TARGET}" in text
  y = jax.jit(f)(x, w, bias)
  z = _f64(x) @ _f64(w) + _f64(bias)
  assert _rel_err(y, act64(act, z)) <= 1e-2

  g = _rand(y.shape, jnp.bfloat16, rng)
  _, vjp = jax.vjp(f, x, w, bias)
  dx, dw, dbias = jax.jit(vjp)(g)
  dz = _f64(g) * act64_derivative(act, z)
  assert _rel_err(dx, dz @ _f64(w).T) <= 2e-2
  assert _rel_err(dw, np.einsum("bmk,bmn->kn", _f64(x), dz)) <= 2e-2
  assert _rel_err(dbias, dz.sum(axis=(0, 1))) <= 2e-2


def test_matmul_bias_vmap_is_one_launch():
  rng = _rng()
  a = _rand((3, 130, 72), jnp.bfloat16, rng)
  b = _rand((3, 72, 200), jnp.bfloat16, rng)
  bias = _rand((200,), jnp.float32, rng)
  f = jax.jit(jax.vmap(lambda a, b: jax_sm100.matmul_bias(a, b, bias, activation="gelu")))
  text = f.lower(a, b).as_text()
  assert text.count(f"@{TARGET}(") == 1
  z = _f64(a) @ _f64(b) + _f64(bias)
  assert _rel_err(f(a, b), act64("gelu", z)) <= 1e-2
