"""GPU tests of the sm90 GEMM's fused bias/activation epilogue, through the FFI target
jax_sm100_gemm_bias directly (the kernel itself; the public op is test_matmul_bias_gpu.py's).

  (a, b, bias) -> (d, pre):  z = op(a) @ op(b) + bias[col] (fp32), pre = round(z),
                             d = round(act(z))

Every test is marked `gpu` (skipped unless an sm_90 GPU is the default device). References
are float64 NumPy on fresh random inputs, checked ELEMENT BY ELEMENT against a bound made of
the fp32 accumulation error (K * 2^-24 * (|op(a)| @ |op(b)|), times 4), the output's rounding
and the fp32 activation's own error; a large random bias (10 * N(0, 1)) makes a bias column
landing on the wrong output column fail. Covered: every compiled tiling x every activation,
with and without pre, with and without bias; the compiled (input, output) dtype pairs,
f32 outputs (two staging groups per warpgroup tile); the four operand layouts with batches;
more tiles than SMs (the bias slice restaged per tile); partial M / N tiles and K not a
multiple of 64 everywhere; exact identities (act none: pre == d bit for bit; relu:
d == max(pre, 0) bit for bit); the error of a dtype pair that has no kernel.
"""
from __future__ import annotations

import functools
import os
import secrets

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from jax_sm100 import _ffi_registry as reg  # noqa: E402
from conftest import act64  # noqa: E402

TARGET = "jax_sm100_gemm_bias"
ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
# block_m, block_n, cluster_m: every compiled tiling has bias kernels.
TILINGS = [(128, 256, 1), (128, 256, 2), (128, 128, 1), (128, 128, 2), (64, 128, 1), (64, 64, 1)]
# (input, output) pairs with bias kernels (sm90/gemm_launch.h kSm90BiasKernels).
PAIRS = [(jnp.bfloat16, jnp.bfloat16), (jnp.float16, jnp.float16), (jnp.bfloat16, jnp.float32),
         (jnp.float16, jnp.float32)]

pytestmark = pytest.mark.gpu

_seed = [int(os.environ.get("JAX_SM100_TEST_SEED", secrets.randbits(31)))]
print(f"test_gemm_bias_kernel_gpu: base seed {_seed[0]}")


def _rng():
  _seed[0] += 1
  return np.random.default_rng(_seed[0])


def _f64(x):
  return np.asarray(jnp.asarray(x).astype(jnp.float32), dtype=np.float64)


# Unit roundoff of the output type (round to nearest).
_U = {jnp.dtype(jnp.bfloat16): 2.0**-8, jnp.dtype(jnp.float16): 2.0**-11,
      jnp.dtype(jnp.float32): 2.0**-24}


@functools.lru_cache(maxsize=None)
def _fn(trans_a, trans_b, act, want_pre, out_shape, out_dtype, tiling):
  bm, bn, cm, *split = tiling  # a fourth entry: split_k (the split-K kernel)
  results = (jax.ShapeDtypeStruct(out_shape, out_dtype),
             jax.ShapeDtypeStruct(out_shape if want_pre else (0,), out_dtype))
  call = jax.ffi.ffi_call(TARGET, results)
  attrs = dict(trans_a=trans_a, trans_b=trans_b, block_m=np.int32(bm), block_n=np.int32(bn),
               cluster_m=np.int32(cm), group_m=np.int32(8),
               split_k=np.int32(split[0] if split else 1),
               activation=np.int32(ACTS[act]))
  return jax.jit(lambda a, b, bias: call(a, b, bias, **attrs))


def _run(m, n, k, *, act="gelu_tanh", want_pre=True, with_bias=True, trans_a=False,
         trans_b=False, dtype=jnp.bfloat16, out_dtype=jnp.bfloat16, batch_a=(), batch_b=(),
         tiling=(128, 256, 1)):
  """Runs the target once and checks d (and pre) element by element; returns (d, pre)."""
  rng = _rng()
  shape_a = tuple(batch_a) + ((k, m) if trans_a else (m, k))
  shape_b = tuple(batch_b) + ((n, k) if trans_b else (k, n))
  a = jnp.asarray(rng.standard_normal(shape_a, dtype=np.float32)).astype(dtype)
  b = jnp.asarray(rng.standard_normal(shape_b, dtype=np.float32)).astype(dtype)
  bias = jnp.asarray(10 * rng.standard_normal((n,) if with_bias else (0,), dtype=np.float32))
  batch = tuple(np.broadcast_shapes(tuple(batch_a), tuple(batch_b)))
  d, pre = _fn(trans_a, trans_b, act, want_pre, batch + (m, n), jnp.dtype(out_dtype),
               tiling)(a, b, bias)

  opa = np.swapaxes(_f64(a), -1, -2) if trans_a else _f64(a)
  opb = np.swapaxes(_f64(b), -1, -2) if trans_b else _f64(b)
  z = np.broadcast_to(np.matmul(opa, opb) + (_f64(bias) if with_bias else 0.0), batch + (m, n))
  acc_err = 4 * k * 2.0**-24 * np.broadcast_to(np.matmul(np.abs(opa), np.abs(opb)), z.shape)
  u = _U[jnp.dtype(out_dtype)]
  y = act64(act, z)
  # d: slope of act <= 1.13 times z's error, the output's rounding, the fp32 activation's
  # error (cancellation in 1 + tanh / 1 + erf for negative z: a few ulp of |z|).
  tol_d = 1.2 * acc_err + u * np.abs(y) + 2.0**-21 * (np.abs(z) + 1.0)
  _check("d", d, y, tol_d, out_dtype)
  if want_pre:
    _check("pre", pre, z, acc_err + u * np.abs(z) + 2.0**-24, out_dtype)
  else:
    assert pre.shape == (0,)
  return d, pre


def _check(what, out, ref, tol, out_dtype):
  assert out.dtype == jnp.dtype(out_dtype) and out.shape == ref.shape, (out.dtype, out.shape)
  got = _f64(out)
  bad = ~(np.abs(got - ref) <= tol)  # NaN fails
  if bad.any():
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements out of bounds; first "
                         f"at {idx}: got {got[idx]}, want {ref[idx]} +- {tol[idx]}")


def test_target_is_registered():
  assert TARGET in set(reg.registered_targets())


# 264 x 392: partial M tiles (64 and 128 rows) and partial N tiles (64, 128, 256 columns)
# in every tiling; K = 136: not a multiple of 64 and below stages * 64.
@pytest.mark.parametrize("tiling", TILINGS, ids=lambda t: "%dx%d_c%d" % t)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("want_pre", [False, True], ids=["d", "d+pre"])
def test_every_tiling_and_activation(tiling, act, want_pre):
  _run(264, 392, 136, act=act, want_pre=want_pre, tiling=tiling)


@pytest.mark.parametrize("dtype,out_dtype", PAIRS, ids=lambda t: jnp.dtype(t).name)
@pytest.mark.parametrize("act", ["none", "gelu_erf", "silu"])
def test_dtype_pairs(dtype, out_dtype, act):
  _run(200, 264, 200, act=act, dtype=dtype, out_dtype=out_dtype, tiling=(128, 128, 1))


@pytest.mark.parametrize("tiling", TILINGS, ids=lambda t: "%dx%d_c%d" % t)
def test_f32_output_two_groups(tiling):
  # f32 chunks are 32 columns: a 256-wide warpgroup tile takes two groups of 4 staging
  # buffers, each with its own pre store / wait / act(z) store.
  _run(264, 392, 136, act="gelu_tanh", out_dtype=jnp.float32, tiling=tiling)


@pytest.mark.parametrize("act", ["relu", "gelu_erf"])
def test_no_bias(act):
  _run(136, 264, 328, act=act, with_bias=False, tiling=(64, 128, 1))


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_layouts_and_batches(trans_a, trans_b):
  _run(136, 200, 264, act="silu", trans_a=trans_a, trans_b=trans_b, batch_a=(3,),
       batch_b=(), tiling=(128, 128, 2))
  _run(72, 136, 72, act="gelu_tanh", trans_a=trans_a, trans_b=trans_b, batch_a=(2,),
       batch_b=(2,), tiling=(64, 64, 1))


@pytest.mark.parametrize("tiling", [(128, 256, 2), (128, 128, 1), (64, 64, 1)],
                         ids=lambda t: "%dx%d_c%d" % t)
def test_more_tiles_than_sms(tiling):
  # Every CTA takes several tiles: the bias slice is restaged and the staging buffers
  # reused across tiles.
  _run(3008, 4104, 264, act="gelu_tanh", tiling=tiling)


@pytest.mark.parametrize("tiling", TILINGS, ids=lambda t: "%dx%d_c%d" % t)
@pytest.mark.parametrize("m", [1, 9, 63])
def test_a_box_stops_at_m(tiling, m):
  # One M tile with K-major A: A's box stops at round_up(M, 8) rows (gemm_inst.h,
  # short_a_rows); d and pre element by element, batched A.
  _run(m, 392, 264, act="gelu_tanh", batch_a=(2,), tiling=tiling)


def test_identities_exact():
  d, pre = _run(264, 392, 136, act="none", tiling=(128, 256, 2))
  assert np.array_equal(np.asarray(d), np.asarray(pre))  # the same staged bytes
  d, pre = _run(264, 392, 136, act="relu", tiling=(128, 128, 1))
  # round(max(z, 0)) == max(round(z), 0): rounding is monotone and keeps 0.
  assert np.array_equal(np.asarray(d), np.asarray(jnp.maximum(pre, 0)))


def test_pair_without_kernel_fails_clearly():
  a = jnp.ones((64, 64), jnp.bfloat16)
  bias = jnp.zeros((64,), jnp.float32)
  fn = _fn(False, False, "relu", False, (64, 64), jnp.dtype(jnp.float16), (128, 128, 1))
  # Refused by the handler's validation (common/gemm_bias_validate.h) before any launch.
  with pytest.raises(Exception, match="output must have the inputs' dtype or float32"):
    jax.block_until_ready(fn(a, a, bias))
