"""fp8_dot(x, w, bias=, activation=) and the Flax Fp8DenseAct / Fp8LinearAct layers, on the
reference path and on the cpu_ffi path (the FP8 targets' CPU handlers through the real
launch layer), against float64 on fresh random data.

The contract: z = Q(x) @ Q(w) (FP8 blockwise, fp32 accumulation) + bias and act(z) in
fp32, rounded once to a bf16 output where the fused target jax_sm100_fp8_gemm_bias runs
(cpu_ffi here, sm100 after its self-test; under differentiation gelu/silu fuse the bias
only and XLA applies the activation to z rounded to bf16); elsewhere y = Q(x) @ Q(w) is
rounded to out_dtype first and z = y + bias, act(z) are evaluated in fp32 and rounded once
more. The tolerances below hold for both. The backward feeds dz = g * act'(z) (rounded to
out_dtype) to fp8_dot's FP8 products and returns the bias gradient as the fp32 sum of dz
over rows.
"""
import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _selftest_guard, tuning
from conftest import (UNIT_ROUNDOFF, act64, act64_derivative, calc_diff, f64, np_dequantize,
                      random_array)

BF16, F32 = jnp.bfloat16, jnp.float32
ACTS = [None, "relu", "gelu", "gelu_exact", "silu"]
FP8_TARGETS = {"jax_sm100_fp8_gemm", "jax_sm100_quantize_fp8", "jax_sm100_quantize_fp8_dual"}
FUSED = "jax_sm100_fp8_gemm_bias"
TARGETS_H = pathlib.Path(__file__).resolve().parents[1] / "ffi" / "src" / "targets.h"
CODES = {None: 0, "relu": 1, "gelu": 2, "gelu_exact": 3, "silu": 4}


def fused_launches(calls):
  """[(activation code, bias length)] of the fused target's launches among `calls`."""
  return [(int(attrs["activation"]), shapes[4][0]) for t, shapes, attrs in calls if t == FUSED]


def _q64(x, block):
  q, s = jax_sm100.quantize_fp8_blockwise(x, block=block)
  return np_dequantize(q, s, block)


def _product64(x, w):
  """Q(x) @ Q(w) in float64 and the bound of its fp32 evaluation (accumulation plus the
  dequantization slack the FP8 tests use)."""
  xq, wq = _q64(x.reshape(-1, x.shape[-1]), (1, 128)), _q64(w, (128, 128))
  k = x.shape[-1]
  return xq @ wq, (2 * (k + 1) + 4) * 2.0**-24 * (np.abs(xq) @ np.abs(wq)), wq


# Every activation with and without a bias (neither: the plain fp8_dot, test_api_fp8.py).
@pytest.mark.parametrize("act,with_bias",
                         [(a, wb) for a in ACTS for wb in (True, False) if a or wb])
def test_forward_every_activation(rng, path, act, with_bias):
  x, w = random_array(rng, (70, 300), BF16), random_array(rng, (300, 200), BF16, 0.1)
  bias = random_array(rng, (200,), F32) if with_bias else None
  d = jax.jit(lambda x, w, b: jax_sm100.fp8_dot(x, w, bias=b, activation=act))(x, w, bias)
  assert d.dtype == BF16 and d.shape == (70, 200)
  p, ep, _ = _product64(x, w)
  u = UNIT_ROUNDOFF[np.dtype(BF16)]
  z = p + (f64(bias) if with_bias else 0.0)
  ref = act64(act, z)
  # The product's rounding to bf16 and its fp32 error through act (|act'| <= 1.13), act's
  # own fp32 evaluation, then the final rounding.
  tol = 1.2 * (u * np.abs(p) + ep) + 16 * 2.0**-24 * (np.abs(ref) + np.abs(z)) \
      + u * np.abs(ref) + 1e-30
  err = np.abs(f64(d) - ref)
  assert (err <= tol).all(), (err.max(), tol.flat[np.argmax(err - tol)])
  if path[0] == "cpu_ffi":  # one fused launch: this activation, the bias (padded N) or none
    assert fused_launches(path[1]) == [(CODES[act], 200 if with_bias else 0)]
    assert "jax_sm100_fp8_gemm" not in {c[0] for c in path[1]}


@pytest.mark.parametrize("act", ACTS)
def test_grads_every_activation(rng, path, act):
  m, k, n = 130, 256, 136
  x, w = random_array(rng, (m, k), BF16), random_array(rng, (k, n), BF16, 0.1)
  bias = random_array(rng, (n,), F32)
  g = random_array(rng, (m, n), BF16)
  f = lambda x, w, b: jax_sm100.fp8_dot(x, w, bias=b, activation=act)
  _, vjp = jax.vjp(f, x, w, bias)
  dx, dw, db = jax.jit(vjp)(g)
  assert (dx.dtype, dw.dtype, db.dtype) == (BF16, BF16, F32)
  assert (dx.shape, dw.shape, db.shape) == (x.shape, w.shape, bias.shape)
  p, ep, wq = _product64(x, w)
  z = p + f64(bias)
  dact = act64_derivative(act, z)
  dz64 = f64(g) * dact
  # Bias gradient: the fp32 sum of dz over rows. z differs from the op's by the product's
  # rounding to bf16 and fp32 errors (dz_z); act' moves by at most |act''| <= 1 times that,
  # and relu's act' may flip where |z| is within dz_z of 0; then fp32 evaluation and sum.
  dz_z = UNIT_ROUNDOFF[np.dtype(BF16)] * np.abs(p) + ep + 2.0**-24 * np.abs(z)
  gabs = np.abs(f64(g))
  per = gabs * (np.abs(z) <= dz_z) if act == "relu" else gabs * dz_z
  tol = (per + 16 * 2.0**-24 * gabs).sum(axis=0) + (m + 2) * 2.0**-24 * np.abs(dz64).sum(axis=0)
  err = np.abs(f64(db) - dz64.sum(axis=0))
  assert (err <= tol).all(), (err.max(), tol[np.argmax(err - tol)])
  # dx, dw: fp8_dot's FP8 products of dz (rounded to bf16), against the float64 products
  # of the same quantized operands (DeepGEMM's measure), and near the unquantized ones.
  dz = jnp.asarray(dz64.astype(np.float32)).astype(BF16)
  dx_ref = _q64(dz, (1, 128)) @ wq.T
  dw_ref = _q64(jnp.asarray(x).T, (1, 128)) @ _q64(dz.T, (128, 128)).T
  assert calc_diff(f64(dx), dx_ref) < 1e-3
  assert calc_diff(f64(dw), dw_ref) < 1e-3
  assert calc_diff(f64(dx), dz64 @ f64(w).T) < 2e-2
  assert calc_diff(f64(dw), f64(x).T @ dz64) < 2e-2
  if path[0] == "cpu_ffi":
    # Forward fused (gelu/silu: the bias only, XLA's activation), backward the FP8 GEMM.
    assert FP8_TARGETS & {c[0] for c in path[1]} >= {"jax_sm100_fp8_gemm"}
    fused_code = 0 if act in ("gelu", "gelu_exact", "silu") else CODES[act]
    assert fused_launches(path[1]) == [(fused_code, n)]


def test_batched_input_bias_dtype_and_vmap(rng, path):
  x = random_array(rng, (2, 3, 40, 256), BF16)
  w = random_array(rng, (256, 72), BF16, 0.1)
  bias = random_array(rng, (72,), BF16)
  d = jax_sm100.fp8_dot(x, w, bias=bias, activation="gelu")
  assert d.shape == (2, 3, 40, 72)
  flat = jax_sm100.fp8_dot(x.reshape(-1, 256), w, bias=bias, activation="gelu")
  np.testing.assert_array_equal(f64(d), f64(flat).reshape(d.shape))  # rows are independent
  dv = jax.vmap(lambda x: jax_sm100.fp8_dot(x, w, bias=bias, activation="gelu"))(x)
  np.testing.assert_allclose(f64(dv), f64(d), rtol=2.0**-7, atol=1e-6)
  # The bias gradient comes back in the bias's dtype.
  db = jax.grad(lambda b: jnp.sum(jax_sm100.fp8_dot(x, w, bias=b).astype(F32)))(bias)
  assert db.dtype == BF16
  np.testing.assert_allclose(f64(db), np.full(72, 2 * 3 * 40.0), rtol=0)


def test_trains_under_jit(rng):
  x = random_array(rng, (64, 128), F32)
  w_true = random_array(rng, (128, 16), F32, 0.1)
  b_true = random_array(rng, (16,), F32)
  y = jnp.maximum(f64(x) @ f64(w_true) + f64(b_true), 0.0)
  loss = lambda p: jnp.mean((jax_sm100.fp8_dot(x, p[0], bias=p[1], activation="relu") - y) ** 2)
  step = jax.jit(lambda p: jax.tree.map(lambda a, b: a - 0.5 * b, p, jax.grad(loss)(p)))
  p = (random_array(rng, (128, 16), F32, 0.01), jnp.zeros((16,), F32))
  l0 = float(loss(p))
  for _ in range(30):
    p = step(p)
  assert float(loss(p)) < 0.3 * l0


def test_bad_bias_and_activation():
  x, w = jnp.ones((4, 128), BF16), jnp.ones((128, 8), BF16)
  with pytest.raises(ValueError, match=r"fp8_dot: bias must have shape \(N,\) = \(8,\)"):
    jax_sm100.fp8_dot(x, w, bias=jnp.ones((4, 8)))
  with pytest.raises(TypeError, match="fp8_dot: bias must have a floating dtype"):
    jax_sm100.fp8_dot(x, w, bias=jnp.ones((8,), jnp.int32))
  with pytest.raises(ValueError, match="fp8_dot: unknown activation 'tanh'"):
    jax_sm100.fp8_dot(x, w, activation="tanh")
  with pytest.raises(TypeError, match="fp8_dot: activation must be None or one of"):
    jax_sm100.fp8_dot(x, w, activation=jax.nn.relu)


# ---------------------------------------------------------------------------
# Flax layers
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["gelu", "relu"])
@pytest.mark.parametrize("use_bias", [True, False])
def test_fp8_dense_act_linen(rng, act, use_bias):
  pytest.importorskip("flax")
  from flax import linen as nn
  import jax_sm100.flax as jf
  x = random_array(rng, (3, 5, 256), BF16)
  layer = jf.Fp8DenseAct(24, activation=act, use_bias=use_bias, dtype=BF16)
  params = layer.init(jax.random.key(0), x)
  stock = nn.Dense(24, use_bias=use_bias).init(jax.random.key(0), x)
  assert jax.tree.map(jnp.shape, params) == jax.tree.map(jnp.shape, stock)
  got = layer.apply(params, x)
  p = params["params"]
  bias = p["bias"].astype(BF16) if use_bias else None
  want = jax_sm100.fp8_dot(x, p["kernel"].astype(BF16), bias=bias, activation=act)
  np.testing.assert_array_equal(f64(got), f64(want))
  grads = jax.grad(lambda q: jnp.sum(layer.apply(q, x).astype(F32) ** 2))(params)
  assert all(bool(jnp.isfinite(v).all()) for v in jax.tree.leaves(grads))
  with pytest.raises(ValueError, match="Fp8DenseAct: unknown activation"):
    jf.Fp8DenseAct(4, activation="tanh").init(jax.random.key(0), x)


def test_fp8_linear_act_nnx(rng):
  pytest.importorskip("flax")
  from flax import nnx
  import jax_sm100.flax as jf
  x = random_array(rng, (10, 256), BF16)
  layer = jf.Fp8LinearAct(256, 40, activation="silu", dtype=BF16, rngs=nnx.Rngs(0))
  want = jax_sm100.fp8_dot(x, layer.kernel[...].astype(BF16), bias=layer.bias[...].astype(BF16),
                           activation="silu")
  np.testing.assert_array_equal(f64(layer(x)), f64(want))
  with pytest.raises(ValueError, match="Fp8LinearAct: dot_general is not used"):
    jf.Fp8LinearAct(4, 4, dot_general=jax.lax.dot_general, rngs=nnx.Rngs(0))


# ---------------------------------------------------------------------------
# Where the fused target runs: sm90, sm100 behind its self-test
# ---------------------------------------------------------------------------

def _family_result(family, passed):
  return _selftest_guard.FamilyResult(family, "sm100", "fake", passed, (), 0,
                                      None if passed else f"{family} self-test failed (planted)")


@pytest.mark.parametrize("backend,bias_family_passes,fused", [
    ("sm100", True, True), ("sm100", False, False), ("sm90", True, True)])
def test_fused_target_per_backend(rng, monkeypatch, backend, bias_family_passes, fused):
  """On sm100 fp8_dot(bias=, activation=) launches the fused target once the fp8_gemm_bias
  family's first-use self-test passed (stubbed here: tracing only), else the FP8 GEMM and
  XLA's epilogue; sm90 launches it with no self-test (its kernels run in the GPU tests)."""
  row = [l for l in TARGETS_H.read_text().splitlines() if f'X("{FUSED}"' in l]
  assert len(row) == 1 and row[0].rstrip(" \\").endswith("true)"), row
  assert FUSED not in _backend.NO_SM90_KERNEL
  targets = frozenset(_ffi_registry.target_names())
  if backend == "sm90":
    targets -= _backend.NO_SM90_KERNEL
  ctx = _backend.Context(backend, targets)
  monkeypatch.setattr(_backend, "context", lambda: ctx)
  monkeypatch.setattr(_selftest_guard, "_enabled", True)
  asked = []
  monkeypatch.setattr(_selftest_guard, "ensure", lambda family, b: asked.append(family) or
                      _family_result(family, bias_family_passes or family != "fp8_gemm_bias"))
  x, w = random_array(rng, (40, 256), BF16), random_array(rng, (256, 72), BF16)
  text = str(jax.make_jaxpr(lambda x, w: jax_sm100.fp8_dot(
      x, w, bias=jnp.ones(72, F32), activation="relu"))(x, w))
  assert (f"target_name={FUSED}" in text) == fused, text[-3000:]
  assert ("target_name=jax_sm100_fp8_gemm " in text
          or "target_name=jax_sm100_fp8_gemm\n" in text) == (not fused)
  assert ("fp8_gemm_bias" in asked) == (backend == "sm100")


def test_selftest_family_on_the_cpu_handler(cpu_ffi, monkeypatch):
  """The fp8_gemm_bias family's known-answer cases (what a Blackwell GPU runs on first
  use): every activation on every sm100 FP8 tiling, the bias on and off, pass through the
  launch layer on the target's CPU handler; a planted fault (the wrong activation) fails
  every case (the tolerance is per element)."""
  from jax_sm100 import _activations, selftest
  cases = selftest.cases("fp8_gemm_bias", "sm100")
  tilings = {(bm, bn, cl) for bm, bn, cl, along_n in tuning.SM100_FP8_TILINGS if not along_n}
  assert {(c.tiling, c.activation) for c in cases} == {
      (t, a) for t in tilings for a in _activations.CODES}
  assert {c.has_bias for c in cases} == {True, False}
  assert {c.k for c in cases} >= {16} and max(c.k for c in cases) > 4 * 128
  seed = int(np.random.default_rng().integers(2**31))
  results = selftest.run_family("fp8_gemm_bias", "sm100", seed=seed, path="kernel")
  assert len(results) == len(cases) and all(r.passed for r in results), [
      (r.case.describe(), r.max_abs_err, r.tol, r.error) for r in results if not r.passed]
  assert {t for t, _, _ in cpu_ffi} == {FUSED}
  real = selftest.launch_kernel
  wrong = {"none": "relu", "relu": "none", "gelu_tanh": "silu", "gelu_erf": "relu",
           "silu": "gelu_erf"}
  monkeypatch.setattr(selftest, "launch_kernel", lambda case, a, b, c: real(
      dataclasses.replace(case, activation=wrong[case.activation]), a, b, c))
  results = selftest.run_family("fp8_gemm_bias", "sm100", seed=seed, path="kernel")
  assert not [r.case.describe() for r in results if r.passed]


def test_explain_names_the_fused_launch(cpu_ffi):
  x, w = jax.ShapeDtypeStruct((300, 256), BF16), jax.ShapeDtypeStruct((256, 100), BF16)
  rep = tuning.explain(lambda x, w: jax_sm100.fp8_dot(x, w, bias=jnp.ones(100, F32),
                                                      activation="gelu_exact"), x, w)
  (d,) = [d for d in rep if d.target == FUSED]
  assert d.path == "kernel" and isinstance(d.config, tuning.Fp8Config)
  assert d.shapes[-1] == (104,) and "gelu_erf" in d.why  # the bias padded with N
  assert not [d for d in rep if d.target == "jax_sm100_fp8_gemm"]
