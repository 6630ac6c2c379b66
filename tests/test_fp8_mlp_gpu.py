"""GPU tests of the quantizers with a prologue (FFI targets jax_sm100_quantize_fp8_act_dual
and jax_sm100_quantize_fp8_dact_dual: the dual quantizer applying a layer's activation,
or its backward with the bias gradient's column sums, as it reads its input) and of
jax_sm100.fp8_mlp on them.

Marked `gpu`: skipped unless the default device is an sm_90 GPU. The quantizers are
compared with the unfused sequence (XLA's activation pass rounding to the input dtype,
then the dual quantize kernel) and their sums with float64; fp8_mlp with the stack of
fp8_dot layers it is documented to equal.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _backend  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from jax_sm100._launch import quantize as quant  # noqa: E402
from conftest import act64, f64, random_array  # noqa: E402
from test_api_fp8_mlp import (CANON, close_fp8, deq, loss_fn, network, rel,  # noqa: E402
                              stack)

pytestmark = pytest.mark.gpu
BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


@pytest.fixture
def rng():
  return np.random.default_rng()


def test_targets_are_registered():
  assert quant.ACT_DUAL_TARGET in reg.registered_targets()
  assert quant.DACT_DUAL_TARGET in reg.registered_targets()


@pytest.mark.parametrize("act", list(CANON))
@pytest.mark.parametrize("dtype,r,c", [(BF16, 8192, 4096), (BF16, 1000, 264), (F16, 256, 384),
                                       (F32, 130, 136), (BF16, 77, 40)])
def test_act_dual_kernel(rng, act, dtype, r, c):
  z = random_array(rng, (r, c), dtype, scale=3.0)
  ctx = _backend.context()
  name = CANON[act]
  (q, s), (qt, st) = jax.jit(lambda z: quant.act_quantize_dual(ctx, z, name, True, True))(z)
  d = jax.jit(lambda z: quant._act_values(z, name))(z)
  (rq, rs), (rqt, rst) = jax.jit(lambda d: quant.quantize_dual(ctx, d, 1))(d)
  s = np.asarray(s)[:, :r].T
  st = np.asarray(st)[:, :c].T
  close_fp8(deq(q, s, 1), deq(rq, rs, 1), "q")
  close_fp8(deq(qt, st, 1), deq(rqt, rst, 1), "qt")
  got, scale = deq(q, s, 1)
  ref = act64(name, f64(z))
  assert np.all(np.abs(got - ref) <= 2.0**-3 * np.abs(ref) + 2.0**-8 * scale)


@pytest.mark.parametrize("act", list(CANON) + [None])
@pytest.mark.parametrize("dtype,r,c", [(BF16, 8192, 4096), (BF16, 300, 136), (F16, 256, 384),
                                       (F32, 130, 72), (BF16, 77, 40)])
def test_dact_dual_kernel(rng, act, dtype, r, c):
  g = random_array(rng, (r, c), dtype)
  z = random_array(rng, (r, c), dtype, scale=3.0)
  ctx = _backend.context()
  name = CANON.get(act, "none")
  (q, s), (qt, st), db = jax.jit(lambda g, z: quant.dact_quantize_dual(ctx, g, z, name, True))(g, z)
  dz = jax.jit(lambda g, z: quant._dact_values(g, z, name))(g, z)
  (rq, rs), (rqt, rst) = jax.jit(lambda d: quant.quantize_dual(ctx, d, 128))(dz)
  s = np.asarray(s)[:, :r].T
  close_fp8(deq(q, s, 1), deq(rq, rs, 1), "q")
  close_fp8(deq(qt, st, 128), deq(rqt, rst, 128), "qt")
  d64 = f64(dz)
  tol = (r + 2) * 2.0**-24 * np.abs(d64).sum(0) + 2.0**-8 * np.abs(d64).sum(0) * (act is not None)
  assert np.all(np.abs(f64(db) - d64.sum(0)) <= tol), np.abs(f64(db) - d64.sum(0)).max()


@pytest.mark.parametrize("act", ["gelu", "silu", "relu"])
def test_fp8_mlp_matches_the_stack_of_fp8_dot_layers(rng, act):
  x, ws, bs, t = network(rng, [512, 1024, 768, 16], (2, 640))
  op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation=act)
  y, ref = jax.jit(op)(x, ws, bs), jax.jit(stack(act, None))(x, ws, bs)
  assert rel(y, ref) < 1e-2, rel(y, ref)
  text = jax.jit(jax.grad(loss_fn(op), (0, 1, 2))).lower(x, ws, bs, t).compile().as_text()
  assert text.count(f'custom_call_target="{quant.ACT_DUAL_TARGET}"') == 2
  assert text.count(f'custom_call_target="{quant.DACT_DUAL_TARGET}"') == 2
  grads = jax.jit(jax.grad(loss_fn(op), (0, 1, 2)))(x, ws, bs, t)
  want = jax.jit(jax.grad(loss_fn(stack(act, None)), (0, 1, 2)))(x, ws, bs, t)
  for g, w in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want)):
    assert np.isfinite(f64(g)).all()
    assert rel(g, w) < 2e-2, rel(g, w)
