"""GPU tests of the short-K dact kernel (kernels/sm90/gemm_dact_short_k.cuh: K <= 64,
64x256 tiles, mma.sync, persistent CTAs loading the next tile under this one's epilogue),
the tiling (64, 256, 1) of the activation-backward target:

  jax_sm100_gemm_dact: (a, b, c) -> (d, dbias), x = (op(a) @ op(b)) * act'(c), d = x,
                       dbias = column sums of x

through the target directly, with test_mlp_gpu.py's error measure against float64.
Covered: every activation, both 16-bit dtypes, the four operand layouts, K from 8 to 64
(K = 10 where K is no operand's contiguous dimension: rows past K zero-filled), partial M
and N tiles, one partial tile, batches (broadcast operands included), more tiles than
CTAs (each CTA's loop and its double-buffered c), dbias absent and zeroed per call, and
the errors of calls the kernel does not take (K > 64; the bias target, which has no such
tiling). Marked `gpu` (skipped unless an sm_90 GPU is the default device).
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


def test_bias_target_has_no_short_k_tiling():
  with pytest.raises(Exception, match="no kernel for"):
    bias_k._run(128, 256, 64, act="relu", tiling=SHORT_K)


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
  _dact(8192, 4096, 16)  # 2048 tiles: several per CTA
  # The kernel adds into dbias: a second call on the same inputs must not accumulate
  # (the atomics' order varies: equal up to fp32 rounding of column sums near 100).
  f = _dact_fn(False, True, (8192, 4096), jnp.bfloat16, "gelu", True)
  rng = _rng()
  a, b, c = (_rand((8192, 16), jnp.bfloat16, rng), _rand((4096, 16), jnp.bfloat16, rng),
             _rand((8192, 4096), jnp.bfloat16, rng))
  once = np.asarray(f(a, b, c)[1])
  twice = np.asarray(f(a, b, c)[1])
  np.testing.assert_allclose(twice, once, rtol=1e-4, atol=1e-3)


def test_dact_refuses_k_over_64():
  with pytest.raises(Exception, match="K <= 64"):
    _dact(128, 256, 72)
