"""GPU tests of the short-K kernel (kernels/sm90/gemm_short_k.cuh: K <= 64, one 64x256 tile
per CTA, mma.sync), the tiling (64, 256, 1) of the fused-epilogue targets:

  jax_sm100_gemm_bias: (a, b, bias) -> (d, pre), z = op(a) @ op(b) + bias, d = act(z)
  jax_sm100_gemm_dact: (a, b, c) -> (d, dbias), x = (op(a) @ op(b)) * act'(c), d = x,
                       dbias = column sums of x

through the targets directly, with test_gemm_bias_kernel_gpu.py's element-by-element
float64 check for the forward and test_mlp_gpu.py's error measure for the backward.
Covered: every activation, both 16-bit dtypes, the four operand layouts, K from 8 to 64
(K = 10 where K is no operand's contiguous dimension: rows past K zero-filled), partial M
and N tiles, batches (broadcast operands included), more tiles than SMs, bias and pre
absent, dbias absent and zeroed per call, and the errors of calls the kernel does not take.
Marked `gpu` (skipped unless an sm_90 GPU is the default device).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import test_gemm_bias_kernel_gpu as bias_k  # noqa: E402
from conftest import act64_derivative  # noqa: E402
from test_matmul_bias_gpu import _f64, _rand, _rel_err, _rng  # noqa: E402  (fresh seeds)

SHORT_K = (64, 256, 1)
DACT = "jax_sm100_gemm_dact"
DACT_CODES = {"relu": 1, "gelu": 2, "gelu_exact": 3, "silu": 4}
LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]

pytestmark = pytest.mark.gpu


# ---------------------------------------------------------------------------
# The forward: bias, activation, pre
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("act", list(bias_k.ACTS))
@pytest.mark.parametrize("want_pre", [False, True], ids=["d", "d+pre"])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_forward_every_activation(act, want_pre, dtype):
  # 200 x 392: a partial M tile (8 rows) and a partial N tile (136 columns).
  bias_k._run(200, 392, 64, act=act, want_pre=want_pre, dtype=dtype, out_dtype=dtype,
              tiling=SHORT_K)


@pytest.mark.parametrize("trans_a,trans_b", LAYOUTS)
@pytest.mark.parametrize("k", [8, 16, 24, 40, 64])
def test_forward_layouts_and_k(trans_a, trans_b, k):
  bias_k._run(264, 520, k, act="gelu_tanh", trans_a=trans_a, trans_b=trans_b, tiling=SHORT_K)


def test_forward_k_not_a_multiple_of_8():
  # a (K, M) and b (K, N): K is neither's contiguous dimension.
  bias_k._run(136, 264, 10, act="silu", trans_a=True, trans_b=False, tiling=SHORT_K)


@pytest.mark.parametrize("batch_a,batch_b", [((2,), ()), ((), (3,)), ((2,), (2,))])
def test_forward_batches(batch_a, batch_b):
  bias_k._run(200, 264, 48, act="relu", batch_a=batch_a, batch_b=batch_b, tiling=SHORT_K)


def test_forward_without_bias_and_many_tiles():
  # 8192 x 4096: 2048 CTAs, about eight per SM over the launch.
  bias_k._run(8192, 4096, 64, act="gelu_tanh", with_bias=False, tiling=SHORT_K)


def test_forward_identities():
  d, pre = bias_k._run(264, 392, 32, act="none", tiling=SHORT_K)
  np.testing.assert_array_equal(np.asarray(d), np.asarray(pre))
  d, pre = bias_k._run(264, 392, 32, act="relu", tiling=SHORT_K)
  np.testing.assert_array_equal(np.asarray(d), np.asarray(jnp.maximum(pre, 0)))


@pytest.mark.parametrize("k,out_dtype,what", [(72, jnp.bfloat16, "K <= 64"),
                                              (64, jnp.float32, "inputs' dtype")])
def test_forward_refuses_what_it_does_not_take(k, out_dtype, what):
  with pytest.raises(Exception, match=what):
    bias_k._run(128, 256, k, act="relu", out_dtype=out_dtype, tiling=SHORT_K)


# ---------------------------------------------------------------------------
# The backward: act'(c), dbias
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _dact_fn(trans_a, trans_b, out_shape, dtype, act, want_dbias):
  d = jax.ShapeDtypeStruct(out_shape, dtype)
  db = jax.ShapeDtypeStruct((out_shape[-1],) if want_dbias else (0,), jnp.float32)
  attrs = dict(trans_a=trans_a, trans_b=trans_b, block_m=np.int32(SHORT_K[0]),
               block_n=np.int32(SHORT_K[1]), cluster_m=np.int32(SHORT_K[2]),
               group_m=np.int32(8), split_k=np.int32(1), activation=np.int32(DACT_CODES[act]))
  return jax.jit(lambda a, b, c: jax.ffi.ffi_call(DACT, (d, db))(a, b, c, **attrs))


def _dact(m, n, k, act="gelu", trans_a=False, trans_b=True, dtype=jnp.bfloat16, batch_a=(),
          batch_c=()):
  rng = _rng()
  a = _rand(tuple(batch_a) + ((k, m) if trans_a else (m, k)), dtype, rng)
  b = _rand((n, k) if trans_b else (k, n), dtype, rng, scale=k ** -0.5)
  c = _rand(tuple(batch_c) + (m, n), dtype, rng, scale=2.0)
  batch = tuple(np.broadcast_shapes(tuple(batch_a), tuple(batch_c)))
  d, dbias = _dact_fn(trans_a, trans_b, batch + (m, n), dtype, act, True)(a, b, c)
  a64 = np.swapaxes(_f64(a), -1, -2) if trans_a else _f64(a)
  b64 = _f64(b).T if trans_b else _f64(b)
  x = np.matmul(a64, b64) * act64_derivative(act, _f64(c))
  x = np.broadcast_to(x, batch + (m, n))
  u = 2.0**-8 if dtype == jnp.bfloat16 else 2.0**-11
  assert d.shape == x.shape and _rel_err(d, x) < 2 * u, _rel_err(d, x)
  col = x.reshape(-1, n).sum(axis=0)
  assert dbias.shape == (n,) and _rel_err(dbias, col) < 1e-4, _rel_err(dbias, col)
  d2, db2 = _dact_fn(trans_a, trans_b, batch + (m, n), dtype, act, False)(a, b, c)
  assert db2.shape == (0,)
  np.testing.assert_array_equal(_f64(d2), _f64(d))
  return d, dbias


@pytest.mark.parametrize("act", list(DACT_CODES))
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_dact_every_activation(act, dtype):
  _dact(1000, 776, 16, act=act, dtype=dtype)


@pytest.mark.parametrize("trans_a,trans_b", LAYOUTS)
@pytest.mark.parametrize("k", [8, 16, 40, 64])
def test_dact_layouts_and_k(trans_a, trans_b, k):
  _dact(264, 520, k, trans_a=trans_a, trans_b=trans_b)


def test_dact_one_partial_tile_and_k_not_a_multiple_of_8():
  _dact(72, 264, 10, act="silu", trans_a=True, trans_b=False)  # M: a's contiguous dim


@pytest.mark.parametrize("batch_a,batch_c", [((2,), ()), ((), (2,)), ((3,), (3,))])
def test_dact_batches(batch_a, batch_c):
  _dact(200, 264, 16, batch_a=batch_a, batch_c=batch_c)


def test_dact_many_tiles_and_dbias_zeroed_per_call():
  _dact(8192, 4096, 16)  # 2048 CTAs
  # The kernel adds into dbias: a second call on the same inputs must not accumulate.
  f = _dact_fn(False, True, (8192, 4096), jnp.bfloat16, "gelu", True)
  rng = _rng()
  a, b, c = (_rand((8192, 16), jnp.bfloat16, rng), _rand((4096, 16), jnp.bfloat16, rng),
             _rand((8192, 4096), jnp.bfloat16, rng))
  once = np.asarray(f(a, b, c)[1])
  twice = np.asarray(f(a, b, c)[1])
  np.testing.assert_allclose(twice, once, rtol=1e-5, atol=1e-5)


def test_dact_refuses_k_over_64():
  with pytest.raises(Exception, match="K <= 64"):
    _dact(128, 256, 72)
