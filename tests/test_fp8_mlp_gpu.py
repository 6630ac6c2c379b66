"""GPU tests of the quantizers with a prologue (FFI targets jax_sm100_quantize_fp8_act_dual
and jax_sm100_quantize_fp8_dact_dual: the dual quantizer applying a layer's activation,
or its backward with the bias gradient's column sums, as it reads its input) and of
jax_sm100.fp8_mlp on them.

Marked `gpu`: skipped unless the default device is an sm_90 GPU. The quantizers are
compared with the ideal quantization of the float64 activation (or its backward) rounded
to the input dtype, their sums with float64 (test_api_fp8_mlp's checks); fp8_mlp with the
stack of fp8_dot layers it is documented to equal.
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
from conftest import f64, random_array  # noqa: E402
from test_api_fp8_mlp import (CANON, check_act, check_dact, loss_fn, network,  # noqa: E402
                              rel, stack)

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
  (q, s), (qt, st) = jax.jit(lambda z: quant.act_quantize_dual(ctx, z, CANON[act], True, True))(z)
  # Both scales come transposed for the GEMM (pad columns included).
  check_act(z, CANON[act], ((q, np.asarray(s)[:, :r].T), (qt, np.asarray(st)[:, :c].T)))


@pytest.mark.parametrize("act", list(CANON) + [None])
@pytest.mark.parametrize("dtype,r,c", [(BF16, 8192, 4096), (BF16, 300, 136), (F16, 256, 384),
                                       (F32, 130, 72), (BF16, 77, 40)])
def test_dact_dual_kernel(rng, act, dtype, r, c):
  g = random_array(rng, (r, c), dtype)
  z = random_array(rng, (r, c), dtype, scale=3.0)
  ctx = _backend.context()
  name = CANON.get(act, "none")
  (q, s), qt, db = jax.jit(lambda g, z: quant.dact_quantize_dual(ctx, g, z, name, True))(g, z)
  check_dact(g, z, name, ((q, np.asarray(s)[:, :r].T), qt, db))


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
