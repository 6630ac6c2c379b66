"""jax_sm100.mlp (a stack of dense layers with one fused backward) and its activation-
backward GEMM (FFI target jax_sm100_gemm_dact), on the reference path and on cpu_ffi (the
target's CPU handler through the real launch layer), against float64 on fresh random data.

Tolerances follow the numerics contract: the fp32 accumulation of exact bf16/fp16
products (at most 2 (K+1) 2^-24 |a| @ |b|), act' in fp32 (|act'| <= 1.2 and a few fp32
ulps), one rounding to the output dtype. The network tests compare whole gradients by
relative norm against float64 (each layer rounds its output once) and against matmul_bias
layer by layer (the unfused backward).
"""
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend
from jax_sm100._launch import dact as launch_dact
from conftest import UNIT_ROUNDOFF, act64, act64_derivative, f64, random_array

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32
TARGET = "jax_sm100_gemm_dact"
ACTS = ["relu", "gelu", "gelu_exact", "silu"]
try:  # the float64 reference's jax.grad
  _x64 = jax.enable_x64
except AttributeError:  # older jax
  from jax.experimental import enable_x64 as _x64
CANON = {"relu": "relu", "gelu": "gelu_tanh", "gelu_exact": "gelu_erf", "silu": "silu"}


def dact64(a, b, c, trans_a, trans_b, act):
  a64, b64 = f64(a), f64(b)
  if trans_a:
    a64 = a64.swapaxes(-1, -2)
  if trans_b:
    b64 = b64.swapaxes(-1, -2)
  deriv = act64_derivative(act, f64(c))
  x = (a64 @ b64) * deriv
  bound = 1.2 * 2 * (a64.shape[-1] + 1) * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) \
      + 2.0**-20 * np.abs(a64 @ b64)
  return x, bound


# ---------------------------------------------------------------------------
# the target
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("trans_a,trans_b,m,n,k", [
    (False, True, 70, 36, 10),     # dz @ W^T with an odd K (padded) and N (padded)
    (False, False, 129, 64, 96),   # a partial row tile
    (True, True, 24, 40, 33),
])
def test_dact_target_matches_float64(cpu_ffi, rng, act, dtype, trans_a, trans_b, m, n, k):
  a = random_array(rng, (k, m) if trans_a else (m, k), dtype)
  b = random_array(rng, (n, k) if trans_b else (k, n), dtype)
  c = random_array(rng, (m, n), dtype, scale=2.0)
  f = jax.jit(lambda a, b, c: launch_dact.gemm_dact(_backend.context(), a, b, c, trans_a,
                                                    trans_b, CANON[act]))
  d, dbias = f(a, b, c)
  assert [t for t, _, _ in cpu_ffi] == [TARGET]
  x, bound = dact64(a, b, c, trans_a, trans_b, act)
  assert d.dtype == np.dtype(dtype) and d.shape == (m, n)
  assert dbias.dtype == np.float32 and dbias.shape == (n,)
  u = UNIT_ROUNDOFF[np.dtype(dtype)]
  err = np.abs(f64(d) - x)
  assert np.all(err <= u * np.abs(x) + bound + 1e-30), err.max()
  col = x.sum(axis=0)
  tol = bound.sum(axis=0) + (m + 2) * 2.0**-24 * np.abs(x).sum(axis=0)
  assert np.all(np.abs(f64(dbias) - col) <= tol), np.abs(f64(dbias) - col).max()


def test_dact_target_refuses_bad_input(cpu_ffi, rng):
  a = random_array(rng, (16, 16), BF16)
  c = random_array(rng, (16, 16), BF16)
  call = lambda res, ops, **attrs: jax.ffi.ffi_call(TARGET, res)(*ops, **attrs)
  good = dict(trans_a=False, trans_b=False, block_m=np.int32(128), block_n=np.int32(256),
              cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1),
              activation=np.int32(2))
  res = (jax.ShapeDtypeStruct((16, 16), BF16), jax.ShapeDtypeStruct((16,), F32))
  d, db = call(res, (a, a, c), **good)
  assert np.isfinite(f64(d)).all() and np.isfinite(np.asarray(db)).all()
  for attrs, ops, res_, msg in [
      (dict(good, activation=np.int32(0)), (a, a, c), res, "activation must be one of 1 relu"),
      (dict(good, block_m=np.int32(64), block_n=np.int32(128)), (a, a, c), res,
       "compiled for block_m=128"),
      (dict(good, block_n=np.int32(128)), (a, a, c), res, "compiled for block_m=128"),
      (good, (a, a, c.astype(F16)), res, "c must have the output's dtype"),
      (good, (a, a, c), (res[0], jax.ShapeDtypeStruct((8,), F32)), "dbias must be float32"),
      (good, (a, a, c), (jax.ShapeDtypeStruct((16, 16), F32), res[1]),
       "c must have the output's dtype")]:
    with pytest.raises(Exception, match=re.escape(msg)):
      jax.block_until_ready(call(res_, ops, **attrs))


def test_dact_vmap_gives_one_row_of_sums_per_entry(cpu_ffi, rng):
  a = random_array(rng, (3, 40, 24), BF16)
  b = random_array(rng, (32, 24), BF16)
  c = random_array(rng, (3, 40, 32), BF16)
  f = jax.vmap(lambda a, c: launch_dact.gemm_dact(_backend.context(), a, b, c, False, True,
                                                  "silu"))
  d, dbias = jax.jit(f)(a, c)
  assert d.shape == (3, 40, 32) and dbias.shape == (3, 32)
  for i in range(3):
    x, bound = dact64(a[i], b, c[i], False, True, "silu")
    assert np.all(np.abs(f64(d[i]) - x) <= 2.0**-8 * np.abs(x) + bound + 1e-30)
    np.testing.assert_allclose(f64(dbias[i]), x.sum(0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# the op
# ---------------------------------------------------------------------------

def net64(x, ws, bs, act, final):
  """Forward in float64 with each layer's output rounded to its dtype as the op does."""
  y = f64(x)
  for l, w in enumerate(ws):
    z = y @ f64(w) + (f64(bs[l]) if bs is not None else 0.0)
    name = act if l < len(ws) - 1 else final
    y = act64(name or "none", z)
  return y


def loss_fn(op):
  def loss(x, ws, bs, t):
    y = op(x, ws, bs).astype(F32)
    return jnp.sum((y - t) ** 2) / y.shape[0]
  return loss


def layerwise(act, final, out_dtype=None):
  def op(x, ws, bs):
    y = x
    for l, w in enumerate(ws):
      last = l == len(ws) - 1
      y = jax_sm100.matmul_bias(y, w, None if bs is None else bs[l],
                                activation=final if last else act,
                                out_dtype=out_dtype if last else None)
    return y
  return op


def rel(got, ref):
  got, ref = f64(got), np.asarray(ref, np.float64)
  return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("final,with_bias", [(None, True), ("relu", False)])
def test_mlp_value_and_grads(path, rng, act, final, with_bias):
  mode, calls = path
  dims = [24, 64, 40, 10]
  x = random_array(rng, (2, 33, dims[0]), BF16)
  ws = [random_array(rng, (dims[i], dims[i + 1]), BF16, scale=dims[i] ** -0.5)
        for i in range(3)]
  bs = [random_array(rng, (dims[i + 1],), F32, scale=0.5) for i in range(3)] if with_bias else None
  t = random_array(rng, (2, 33, dims[-1]), F32)
  op = lambda x, ws, bs: jax_sm100.mlp(x, ws, bs, activation=act, final_activation=final)
  y = jax.jit(op)(x, ws, bs)
  assert y.shape == (2, 33, 10) and y.dtype == np.dtype(BF16)
  assert rel(y, net64(x, ws, bs, act, final)) < 2e-2
  argnums = (0, 1, 2) if with_bias else (0, 1)
  grads = jax.jit(jax.grad(loss_fn(op), argnums))(x, ws, bs, t)
  if calls is not None:
    launched = [c[0] for c in calls]
    assert launched.count(TARGET) == 2, launched  # one per hidden activation
  ref = jax.jit(jax.grad(loss_fn(layerwise(act, final)), argnums))(x, ws, bs, t)
  # float64 gradients of the same network (jax.grad in float32 of the f64-exact inputs
  # would round; use the layerwise op's agreement and a float64 finite check instead).
  flat_g, flat_r = jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(ref)
  assert len(flat_g) == len(flat_r)
  for g, r in zip(flat_g, flat_r):
    assert g.shape == r.shape and g.dtype == r.dtype
    assert np.isfinite(f64(g)).all()
    assert rel(g, f64(r)) < 2e-2, rel(g, f64(r))


def test_mlp_grads_against_float64(cpu_ffi, rng):
  """The fused backward against jax.grad of the network in float64 (inputs exact)."""
  dims = [16, 48, 32, 8]
  x = random_array(rng, (40, dims[0]), F16)
  ws = [random_array(rng, (dims[i], dims[i + 1]), F16, scale=dims[i] ** -0.5) for i in range(3)]
  bs = [random_array(rng, (dims[i + 1],), F32, scale=0.5) for i in range(3)]
  t = random_array(rng, (40, dims[-1]), F32)
  op = lambda x, ws, bs: jax_sm100.mlp(x, ws, bs, activation="gelu_exact", out_dtype=F32)
  grads = jax.jit(jax.grad(loss_fn(op), (0, 1, 2)))(x, ws, bs, t)
  with _x64(True):
    def f(x, ws, bs):
      y = x
      for l, w in enumerate(ws):
        z = y @ w + bs[l]
        y = jax.nn.gelu(z, approximate=False) if l < 2 else z
      return jnp.sum((y - t.astype(jnp.float64)) ** 2) / y.shape[0]
    to64 = lambda v: jnp.asarray(f64(v))
    ref = jax.grad(f, (0, 1, 2))(to64(x), [to64(w) for w in ws], [to64(b) for b in bs])
    ref = [np.asarray(r) for r in jax.tree_util.tree_leaves(ref)]
  for g, r in zip(jax.tree_util.tree_leaves(grads), ref):
    assert rel(g, r) < 1e-2, rel(g, r)  # fp16 hidden outputs and dz: u = 2^-11 per rounding


def test_mlp_hlo_fuses_the_activation_backward(cpu_ffi, rng):
  x = random_array(rng, (64, 32), BF16)
  ws = [random_array(rng, (32, 64), BF16), random_array(rng, (64, 64), BF16),
        random_array(rng, (64, 16), BF16)]
  bs = [jnp.zeros((64,), F32), jnp.zeros((64,), F32), jnp.zeros((16,), F32)]
  op = lambda x, ws, bs: jax_sm100.mlp(x, ws, bs, activation="gelu")
  g = jax.jit(jax.grad(lambda x, ws, bs: jnp.sum(op(x, ws, bs).astype(F32) ** 2), (1, 2)))
  text = g.lower(x, ws, bs).compile().as_text()
  assert text.count(f'custom_call_target="{TARGET}"') == 2
  # Each forward launch below the top writes d and z (gelu's backward input).
  assert text.count('custom_call_target="jax_sm100_gemm_bias"') == 3


def _dact_tilings(text):
  """(block_m, block_n, K) of each dact launch in lowered StableHLO text."""
  out = []
  for line in text.splitlines():
    if f"@{TARGET}(" in line:
      bm = int(re.search(r"block_m = (\d+)", line).group(1))
      bn = int(re.search(r"block_n = (\d+)", line).group(1))
      k = int(re.search(r"\(tensor<\d+x(\d+)x", line).group(1))
      out.append((bm, bn, k))
  return sorted(out, key=lambda t: t[2])


def test_mlp_dact_launches_take_the_128x256_kernel_at_every_k(cpu_ffi, rng):
  # The head's dact contracts over its 16 outputs, the hidden layer's over 64: both run the
  # pipelined 128x256 kernel (a short-K kernel of 64x256 tiles measured slower and was
  # deleted), and the target refuses that tiling, naming the compiled ones.
  x = random_array(rng, (64, 32), BF16)
  ws = [random_array(rng, (32, 64), BF16), random_array(rng, (64, 64), BF16),
        random_array(rng, (64, 16), BF16)]
  bs = [jnp.zeros((w.shape[1],), F32) for w in ws]
  loss = lambda x, ws, bs: jnp.sum(jax_sm100.mlp(x, ws, bs, activation="gelu").astype(F32) ** 2)
  text = jax.jit(jax.grad(loss, (1, 2))).lower(x, ws, bs).as_text()
  assert _dact_tilings(text) == [(128, 256, 16), (128, 256, 64)]
  a, b, c = random_array(rng, (16, 64), BF16), random_array(rng, (16, 64), BF16), random_array(rng, (16, 16), BF16)
  res = (jax.ShapeDtypeStruct((16, 16), BF16), jax.ShapeDtypeStruct((16,), F32))
  attrs = dict(trans_a=False, trans_b=True, block_m=np.int32(64), block_n=np.int32(256),
               cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1),
               activation=np.int32(2))
  with pytest.raises(Exception, match=re.escape("the dact kernels are compiled for block_m=128, "
                                                "block_n=256, cluster_m 1 or 2, split_k=1 "
                                                "(got block_m=64, block_n=256")):
    jax.block_until_ready(jax.ffi.ffi_call(TARGET, res)(a, b, c, **attrs))


def test_mlp_without_biases_skips_the_column_sums(cpu_ffi, rng):
  # No bias to differentiate: the dact launches return an empty dbias (the kernel then
  # does no reduction and no atomics); with biases each returns (N,) sums.
  x = random_array(rng, (64, 32), BF16)
  ws = [random_array(rng, (32, 64), BF16), random_array(rng, (64, 48), BF16),
        random_array(rng, (48, 16), BF16)]
  for bs, want in [(None, "f32[0]"), ([jnp.zeros((w.shape[1],), F32) for w in ws], None)]:
    g = jax.jit(jax.grad(lambda x, ws, bs: jnp.sum(
        jax_sm100.mlp(x, ws, bs, activation="silu").astype(F32) ** 2), 1))
    text = g.lower(x, ws, bs).compile().as_text()
    lines = [l for l in text.splitlines() if f'custom_call_target="{TARGET}"' in l]
    assert len(lines) == 2, lines
    if want is None:
      assert all("f32[64]" in l or "f32[48]" in l for l in lines), lines
    else:
      assert all(want in l for l in lines), lines


def test_mlp_without_hidden_activation_and_single_layer(path, rng):
  x = random_array(rng, (20, 16), BF16)
  ws = [random_array(rng, (16, 24), BF16), random_array(rng, (24, 8), BF16)]
  t = random_array(rng, (20, 8), F32)
  for act, wts in [(None, ws), ("silu", [random_array(rng, (16, 8), BF16)])]:
    op = lambda x, w, b: jax_sm100.mlp(x, w, None, activation=act, final_activation="silu")
    g = jax.jit(jax.grad(loss_fn(op), (0, 1)))(x, wts, None, t)
    r = jax.jit(jax.grad(loss_fn(layerwise(act, "silu")), (0, 1)))(x, wts, None, t)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(r)):
      assert rel(a, f64(b)) < 2e-2


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(weights=[]), TypeError, "weights must be a non-empty list"),
    (dict(weights=[np.zeros((9, 8), np.float32)]), ValueError, "weights[0] must have shape (16, d)"),
    (dict(weights=[np.zeros((16, 8), jnp.bfloat16)]), TypeError, "weights[0] is bfloat16"),
    (dict(biases=[np.zeros((7,), np.float32)]), ValueError, "bias must have shape (N,) = (8,)"),
    (dict(biases=[]), TypeError, "biases must be None or a list / tuple of 1"),
    (dict(activation="tanh", weights=[np.zeros((16, 8), np.float32)] * 1), None, None),
    (dict(final_activation="tanh"), ValueError, "unknown activation 'tanh'"),
])
def test_mlp_bad_input_raises_before_running(kwargs, exc, msg):
  args = dict(x=np.zeros((4, 16), np.float32), weights=[np.zeros((16, 8), np.float32)],
              biases=None)
  args.update(kwargs)
  x, ws, bs = args.pop("x"), args.pop("weights"), args.pop("biases")
  if exc is None:  # a single layer never applies `activation`, but it is still checked
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
      jax_sm100.mlp(x, ws, bs, **args)
    return
  with pytest.raises(exc, match=re.escape(msg)):
    jax_sm100.mlp(x, ws, bs, **args)


def test_mlp_per_example_grads_under_vmap(path, rng):
  # vmap of grad: each example's own weight and bias gradients (the dact launch's batching
  # rule gives one row of bias sums per entry), against a loop over the examples.
  x = random_array(rng, (3, 6, 16), BF16)
  ws = [random_array(rng, (16, 32), BF16, scale=0.25), random_array(rng, (32, 8), BF16, scale=0.2)]
  bs = [random_array(rng, (32,), F32), random_array(rng, (8,), F32)]
  t = random_array(rng, (3, 6, 8), F32)
  op = lambda x, ws, bs: jax_sm100.mlp(x, ws, bs, activation="silu")
  g = jax.jit(jax.vmap(jax.grad(loss_fn(op), (1, 2)), in_axes=(0, None, None, 0)))
  got = g(x, ws, bs, t)
  for i in range(3):
    want = jax.jit(jax.grad(loss_fn(op), (1, 2)))(x[i], ws, bs, t[i])
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
      assert rel(a[i], f64(b)) < 2e-2, rel(a[i], f64(b))


# ---------------------------------------------------------------------------
# sm100: the kernel behind its first-use self-test (family gemm_dact)
# ---------------------------------------------------------------------------

TARGETS_H = Path(__file__).resolve().parents[1] / "ffi" / "src" / "targets.h"


def _dact_family_result(passed):
  from jax_sm100 import _selftest_guard
  return _selftest_guard.FamilyResult("gemm_dact", "sm100", "fake", passed, (), 0,
                                      None if passed else "gemm_dact self-test failed (planted)")


def test_sm100_runs_the_dact_kernel_behind_the_selftest(rng, monkeypatch):
  """targets.h marks the target's sm_100a kernel: a Blackwell context launches it (the pair
  tiling for M over one tile) once the gemm_dact family's
  first-use self-test passed (stubbed here: tracing only), and takes the formula when it
  failed."""
  from jax_sm100 import _ffi_registry, _selftest_guard, selftest
  row = [l for l in TARGETS_H.read_text().splitlines() if f'X("{TARGET}"' in l]
  assert len(row) == 1 and row[0].rstrip(" \\").endswith("true)"), row
  if _ffi_registry.sm100_targets():  # a build with sm_100a code reports it too
    assert TARGET in _ffi_registry.sm100_targets()
  assert selftest.family_of(TARGET) == "gemm_dact"
  ctx = _backend.Context("sm100", frozenset({"jax_sm100_gemm", TARGET}))
  assert ctx.can_call(TARGET)
  g, w, z = (random_array(rng, s, BF16) for s in ((256, 16), (64, 16), (256, 64)))

  def lowered():  # a fresh function per trace: nothing cached
    return str(jax.make_jaxpr(lambda g, w, z: launch_dact.gemm_dact(
        ctx, g, w, z, False, True, "gelu_tanh"))(g, w, z))

  asked = []
  monkeypatch.setattr(_selftest_guard, "_enabled", True)
  monkeypatch.setattr(_selftest_guard, "ensure",
                      lambda family, backend: asked.append((family, backend))
                      or _dact_family_result(True))
  monkeypatch.setattr(jax_sm100.tuning, "_arch", lambda dev: "sm100")
  text = lowered()
  assert "ffi_call" in text and asked == [("gemm_dact", "sm100")]
  tiling = [tuple(int(re.search(rf"'{k}', np.int32\((\d+)\)", text).group(1)) for k in ("block_m", "block_n", "cluster_m"))]
  assert tiling == [(128, 256, 2)], text
  monkeypatch.setattr(_selftest_guard, "ensure",
                      lambda family, backend: _dact_family_result(False))
  jax.clear_caches()
  assert "ffi_call" not in lowered()


def test_gemm_dact_selftest_family_on_the_cpu_handler(cpu_ffi, monkeypatch):
  """The gemm_dact family's known-answer cases (what a Blackwell GPU runs on first use):
  every activation on both dact tilings, the four layouts, bf16 and f16, pass through the
  launch layer on the target's CPU handler; planted faults fail every case: the wrong
  activation's derivative (d and the sums), the column sums one column off (the dbias row
  only), d without act' (the plain product)."""
  import dataclasses

  from jax_sm100 import _selftest_dact, selftest
  cases = selftest.cases("gemm_dact", "sm100")
  assert {(c.tiling, c.activation) for c in cases} == {
      (t, act) for t in _selftest_dact.TILINGS for act in _selftest_dact.ACTIVATIONS}
  assert {(c.trans_a, c.trans_b) for c in cases} == {(x, y) for x in (0, 1) for y in (0, 1)}
  assert {c.in_dtype for c in cases} == {"bfloat16", "float16"}
  # the launch picks the tile from M: each tiling's cases take the M that selects it
  assert all((c.c_shape[0] > 128) == (c.tiling[2] == 2) for c in cases)
  seed = int(np.random.default_rng().integers(2**31))
  results = selftest.run_family("gemm_dact", "sm100", seed=seed, path="kernel")
  assert len(results) == len(cases) and all(r.passed for r in results), [
      (r.case.describe(), r.max_abs_err, r.tol, r.error) for r in results if not r.passed]
  real = selftest.launch_kernel
  wrong = {"relu": "silu", "gelu_tanh": "gelu_erf", "gelu_erf": "relu", "silu": "gelu_tanh"}
  faults = {
      "activation": lambda case, a, b, c: real(
          dataclasses.replace(case, activation=wrong[case.activation]), a, b, c),
      "sums_shifted": lambda case, a, b, c: (lambda r: r.at[-1].set(jnp.roll(r[-1], 1)))(
          real(case, a, b, c)),
      "no_derivative": lambda case, a, b, c: real(case, a, b, jnp.full_like(c, 50.0))
      if case.activation != "relu" else real(case, a, b, -jnp.abs(c) - 1.0),
  }
  for name, fault in faults.items():
    monkeypatch.setattr(selftest, "launch_kernel", fault)
    results = selftest.run_family("gemm_dact", "sm100", seed=seed, path="kernel")
    assert len(results) == len(cases)
    assert not [r.case.describe() for r in results if r.passed], name
