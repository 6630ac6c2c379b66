"""matmul_bias (fused bias + activation epilogue) on the reference path and on the cpu_ffi
path (the target jax_sm100_gemm_bias's CPU handler through the real launch layer), against
float64 on fresh random data: values, the saved pre-activation, gradients, vmap, errors.

Tolerances come from the numerics contract: z = a @ b accumulated in fp32 (error at most
2 (K+1) 2^-24 (|a| @ |b| + |bias|)), act(z) in fp32 (|act'| <= 1.2, so that error carries
over), then one rounding to the output dtype (u_out |ref|).
"""
import dataclasses
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _selftest_guard, tuning
from jax_sm100 import _dispatch_table as dt
from jax_sm100._launch import bias as launch_bias
from conftest import UNIT_ROUNDOFF, act64, f64, random_array
from test_api_dispatch_table import XLA_SHAPE, gemm_calls, hlo, kind, operands, run  # noqa: F401

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32
TARGET = "jax_sm100_gemm_bias"
TARGETS_H = pathlib.Path(__file__).resolve().parents[1] / "ffi" / "src" / "targets.h"
ACTS = [None, "relu", "gelu", "gelu_exact", "silu"]
# (a shape, b shape): odd sizes (1, 7, 130, 257), batched a with 2-D b (folded into M),
# both batched, broadcast batch dims, 2-D a with batched b.
SHAPES = [((1, 1), (1, 1)), ((7, 130), (130, 257)), ((257, 7), (7, 130)),
          ((2, 3, 33, 17), (17, 9)), ((4, 19, 24), (4, 24, 40)), ((12, 40), (3, 40, 8))]
try:  # the float64 references' jax.grad
  _x64 = jax.enable_x64
except AttributeError:  # older jax
  from jax.experimental import enable_x64 as _x64


def launched(path):
  return {c[0] for c in path[1]} if path[1] is not None else set()


# ---------------------------------------------------------------------------
# float64 references and error bounds
# ---------------------------------------------------------------------------

def jnp_act(name, z):
  """The same activations in jnp (differentiated by jax.grad in float64)."""
  return {"relu": jax.nn.relu, "gelu": lambda v: jax.nn.gelu(v, approximate=True),
          "gelu_exact": lambda v: jax.nn.gelu(v, approximate=False),
          "silu": jax.nn.silu}.get(name, lambda v: v)(z)


def z64(a, b, bias):
  """(z, bound of |z_fp32 - z|) in float64."""
  a64, b64 = f64(a), f64(b)
  z = a64 @ b64
  absz = np.abs(a64) @ np.abs(b64)
  if bias is not None:
    z = z + f64(bias)
    absz = absz + np.abs(f64(bias))
  return z, 2 * (a.shape[-1] + 1) * 2.0**-24 * absz


def subnormal(dtype):
  return float(jnp.finfo(dtype).smallest_subnormal)


def assert_close(got, ref, tol, what):
  got = f64(got)
  assert got.shape == ref.shape, (what, got.shape, ref.shape)
  assert np.all(np.isfinite(got)), what
  err = np.abs(got - ref)
  bad = err > tol
  assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} out of tolerance; worst err "
                         f"{err.max():.3g}, tol there {tol.flat[np.argmax(err - tol)]:.3g}")


def check_forward(d, a, b, bias, act, out_dtype, pre=None, what=""):
  z, ez = z64(a, b, bias)
  u = UNIT_ROUNDOFF[np.dtype(out_dtype)]
  ref = act64(act, z)
  # 1.2 ez: the accumulation error through act (|act'| <= 1.13); 16 f32 ulps for act's
  # own evaluation in fp32; u |ref|: the final rounding (and the subnormal spacing).
  tol = u * np.abs(ref) + 1.2 * ez + 16 * 2.0**-24 * (np.abs(ref) + np.abs(z)) \
      + subnormal(out_dtype)
  assert d.dtype == out_dtype, (what, d.dtype)
  assert_close(d, ref, tol, f"{what} d")
  if pre is not None:
    assert pre.dtype == out_dtype
    assert_close(pre, z, u * np.abs(z) + ez + subnormal(out_dtype), f"{what} pre")


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("out_dtype", [BF16, F16, F32])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
def test_every_activation_bias_and_out_dtype(rng, path, act, with_bias, out_dtype):
  for sa, sb in (SHAPES[1],):
    a, b = random_array(rng, sa, BF16), random_array(rng, sb, BF16)
    bias = random_array(rng, (sb[-1],), F32) if with_bias else None
    f = jax.jit(lambda a, b, bias: jax_sm100.matmul_bias(a, b, bias, activation=act,
                                                          out_dtype=out_dtype))
    check_forward(f(a, b, bias), a, b, bias, act, out_dtype, what=f"{act} {sa}x{sb}")
  # The kernel writes its input dtype or f32 (the sm90 instantiations): bf16 -> f16 takes
  # the reference on every backend.
  kernel = path[0] == "cpu_ffi" and out_dtype != F16
  assert launched(path) == ({TARGET} if kernel else set())


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", [BF16, F16, F32])
def test_odd_and_batched_shapes(rng, path, act, dtype):
  for sa, sb in SHAPES:
    a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
    bias = random_array(rng, (sb[-1],), BF16)  # any float dtype; added in fp32
    d = jax.jit(lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation=act))(a, b, bias)
    assert d.shape == np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    check_forward(d, a, b, bias, act, dtype, what=f"{act} {sa}x{sb}")
  # f32 inputs take the reference on every backend (the kernel takes bf16/fp16).
  assert launched(path) == ({TARGET} if path[0] == "cpu_ffi" and dtype != F32 else set())


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True),
                                             (True, True)])
@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_launch_layer_layouts_and_pre(rng, path, trans_a, trans_b, act):
  # The launch layer (the layouts the handler takes, with pre asked for) on both paths.
  from jax_sm100 import _activations
  m, n, k = 33, 130, 7
  a = random_array(rng, (k, m) if trans_a else (m, k), F16)
  b = random_array(rng, (n, k) if trans_b else (k, n), F16)
  bias = random_array(rng, (n,), F32)
  name = _activations.canonical("t", act)
  d, pre = jax.jit(lambda a, b, c: launch_bias.gemm_bias(
      _backend.context(), a, b, c, trans_a, trans_b, name, True, F16))(a, b, bias)
  a_ = a.T if trans_a else a
  b_ = b.T if trans_b else b
  check_forward(d, a_, b_, bias, act, F16, pre=pre, what=f"trans {trans_a} {trans_b}")
  assert launched(path) == ({TARGET} if path[0] == "cpu_ffi" else set())


def test_empty_contraction_is_act_of_bias(rng, path):
  bias = random_array(rng, (9,), F32)
  d = jax_sm100.matmul_bias(jnp.ones((3, 0), BF16), jnp.ones((0, 9), BF16), bias,
                            activation="silu", out_dtype=F32)
  np.testing.assert_allclose(f64(d), np.broadcast_to(act64("silu", f64(bias)), (3, 9)),
                             rtol=1e-6)
  assert jax_sm100.matmul_bias(jnp.ones((0, 4), BF16), jnp.ones((4, 9), BF16), bias).shape == (0, 9)


# ---------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------

def _sum_to(x, shape):
  lead = x.ndim - len(shape)
  x = x.sum(axis=tuple(range(lead)))
  axes = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
  return x.sum(axis=axes, keepdims=True).reshape(shape)


def grads64(a, b, bias, act, g):
  """(da, db, dbias) by jax.grad (vjp) of the float64 jnp formula."""
  with _x64(True):
    args = [jnp.asarray(f64(x)) for x in (a, b)] + ([jnp.asarray(f64(bias))] if bias is not None
                                                     else [])

    def f(a, b, *bias):
      z = jnp.matmul(a, b)
      return jnp_act(act, z + bias[0] if bias else z)
    _, vjp = jax.vjp(f, *args)
    out = vjp(jnp.asarray(f64(g)))
    return [np.asarray(x, np.float64) for x in out] + ([None] if bias is None else [])


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", [BF16, F16])
def test_grads_match_float64(rng, path, dtype, act, with_bias):
  # Four shapes between the two dtypes: odd sizes, a batched a with a 2-D b (folded into
  # M), both batched, and a broadcast batch (the weight gradient summed over it).
  for sa, sb in ((SHAPES[1], SHAPES[4]) if dtype == BF16 else (SHAPES[3], SHAPES[5])):
    a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
    bias = random_array(rng, (sb[-1],), F32) if with_bias else None
    f = lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation=act)
    out, vjp = jax.vjp(f, a, b, bias)
    g = random_array(rng, out.shape, dtype)
    da, db, dbias = jax.jit(vjp)(g)
    assert da.dtype == dtype and db.dtype == dtype
    ref_da, ref_db, ref_dbias = grads64(a, b, bias, act, g)

    # Bound on |dz - g act'(z)| per element (then propagated through the products):
    # act' evaluated at z rounded to the output dtype (|act''| <= 0.8), relu's step
    # flipping where |z| is within the accumulation error, fp32 evaluation, dz rounded to
    # g's dtype.
    z, ez = z64(a, b, bias)
    u = UNIT_ROUNDOFF[np.dtype(dtype)]
    ag = np.abs(f64(g))
    if act is None:
      e_dz32 = np.zeros_like(ag)
    elif act == "relu":
      e_dz32 = ag * (np.abs(z) <= 2 * ez)
    else:
      e_dz32 = ag * (0.8 * (u * np.abs(z) + ez) + 1e-6)
    e_dz = e_dz32 + u * 1.2 * ag
    dz_abs = 1.2 * ag + e_dz
    a64, b64 = np.abs(f64(a)), np.abs(f64(b))
    bt, at = np.swapaxes(b64, -1, -2), np.swapaxes(a64, -1, -2)
    rows = math.prod(out.shape[:-1])
    k_da = math.prod(out.shape[:-2]) * sb[-1]
    k_db = math.prod(out.shape[:-2]) * sa[-2]
    tol_da = _sum_to(e_dz @ bt + 2 * (k_da + 1) * 2.0**-24 * (dz_abs @ bt), a.shape)
    tol_db = _sum_to(at @ e_dz + 2 * (k_db + 1) * 2.0**-24 * (at @ dz_abs), b.shape)
    assert_close(da, ref_da, tol_da + u * np.abs(ref_da) + 1e-30, f"{act} {sa}x{sb} da")
    assert_close(db, ref_db, tol_db + u * np.abs(ref_db) + 1e-30, f"{act} {sa}x{sb} db")
    if with_bias:
      assert dbias.dtype == F32
      e_b = e_dz32.reshape(rows, -1).sum(0) + 2 * rows * 2.0**-24 * dz_abs.reshape(rows, -1).sum(0)
      assert_close(dbias, ref_dbias, e_b + 1e-30, f"{act} {sa}x{sb} dbias")
  if path[0] == "cpu_ffi":
    assert {TARGET, "jax_sm100_gemm"} <= launched(path)  # forward fused, products plain


@pytest.mark.parametrize("act", ACTS)
def test_grads_with_f32_output_are_fp32_accurate(rng, path, act):
  # bf16 inputs, f32 output: the forward's z (and pre) and the backward's dz stay fp32, so
  # the gradients must match float64 to fp32 accumulation accuracy (a wrong derivative
  # formula, even off by 1%, fails here where the bf16 bounds above would hide it).
  a, b = random_array(rng, (3, 11, 40), BF16), random_array(rng, (40, 24), BF16)
  bias = random_array(rng, (24,), F32)
  out, vjp = jax.vjp(lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation=act,
                                                           out_dtype=F32), a, b, bias)
  g = random_array(rng, out.shape, F32)
  got = jax.jit(vjp)(g)
  for x, ref, what in zip(got, grads64(a, b, bias, act, g), ("da", "db", "dbias")):
    # da, db come back in bf16 (the inputs' dtype): one rounding, rms 2^-9 relative.
    bound = 2.0**-8 if what != "dbias" else 1e-5
    rel = np.linalg.norm(f64(x) - ref) / np.linalg.norm(ref)
    assert rel < bound, (act, what, rel)


def test_bias_gradient_comes_back_in_its_dtype(rng, path):
  a, b = random_array(rng, (5, 16), BF16), random_array(rng, (16, 24), BF16)
  bias = random_array(rng, (24,), BF16)
  g = jax.grad(lambda c: jnp.sum(jax_sm100.matmul_bias(a, b, c, activation="gelu")
                                 .astype(F32)))(bias)
  assert g.dtype == BF16 and g.shape == (24,)


@pytest.mark.parametrize("act", ACTS)
def test_check_grads_f32_reference(rng, monkeypatch, act):
  monkeypatch.setenv(_backend.BACKEND_ENV, "reference")
  jax.clear_caches()
  # |a @ b| stays below ~1 and the bias is +-1.5: z keeps away from relu's kink, so central
  # differences (eps 1e-2: truncation ~1e-4, f32 rounding ~1e-5) hold for every activation.
  a = random_array(rng, (2, 6, 5), F32, scale=0.3)
  b = random_array(rng, (5, 7), F32, scale=0.3)
  bias = jnp.asarray(np.where(rng.random(7) < 0.5, -1.5, 1.5), F32)
  check_grads(lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation=act), (a, b, bias),
              order=1, modes=["rev"], eps=1e-2)
  jax.clear_caches()


def test_forward_mode_names_the_op(rng):
  a, b = random_array(rng, (4, 8), F32), random_array(rng, (8, 3), F32)
  with pytest.raises(TypeError, match="jax_sm100.matmul_bias supports reverse-mode"):
    jax.jvp(lambda a: jax_sm100.matmul_bias(a, b, activation="relu"), (a,), (a,))


# ---------------------------------------------------------------------------
# What runs: custom calls, pre written only when needed, dispatch
# ---------------------------------------------------------------------------

def _custom_calls(text):
  return [line for line in text.splitlines() if f"custom_call @{TARGET}(" in line]


@pytest.mark.parametrize("act,writes_pre", [(None, False), ("relu", False), ("gelu", True),
                                            ("gelu_exact", True), ("silu", True)])
def test_hlo_primal_fuses_and_grad_writes_pre_where_needed(rng, cpu_ffi, act, writes_pre):
  """The primal call fuses the activation and writes no `pre`; under differentiation the
  launch fuses it too, and gelu/silu's also writes z (`pre`, saved for the backward:
  _bias.py); none and relu write no `pre`."""
  a, b = random_array(rng, (7, 24), BF16), random_array(rng, (24, 16), BF16)
  bias = random_array(rng, (16,), F32)
  f = lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation=act)
  primal = _custom_calls(jax.jit(f).lower(a, b, bias).as_text())
  assert len(primal) == 1 and "tensor<0xbf16>" in primal[0], primal
  loss = lambda a, b, c: jnp.sum(f(a, b, c).astype(F32) ** 2)  # needs the forward's output
  grad = _custom_calls(jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(a, b, bias).as_text())
  assert len(grad) == 1, grad
  assert grad[0].endswith("(tensor<7x16xbf16>, tensor<7x16xbf16>)" if writes_pre
                          else "(tensor<7x16xbf16>, tensor<0xbf16>)"), grad
  codes = {None: 0, "relu": 1, "gelu": 2, "gelu_exact": 3, "silu": 4}
  assert f"activation = {codes[act]} : i32" in primal[0]
  assert f"activation = {codes[act]} : i32" in grad[0]


def test_no_bias_passes_an_empty_bias(rng, cpu_ffi):
  a, b = random_array(rng, (8, 24), BF16), random_array(rng, (24, 16), BF16)
  (call,) = _custom_calls(jax.jit(lambda a, b: jax_sm100.matmul_bias(a, b)).lower(a, b).as_text())
  assert "tensor<0xf32>" in call


def test_dispatch_to_xla_runs_no_custom_call_and_same_numerics(rng, cpu_ffi):
  a, b = random_array(rng, (2, 9, 40), BF16), random_array(rng, (40, 24), BF16)
  bias = random_array(rng, (24,), F32)
  f = jax.jit(lambda a, b, c: jax_sm100.matmul_bias(a, b, c, activation="gelu_exact"))
  with tuning.override(dispatch="xla"):
    assert not _custom_calls(f.lower(a, b, bias).as_text())
    d = f(a, b, bias)
    why = tuning.explain(lambda a, b, c: jax_sm100.matmul_bias(a, b, c), a, b, bias)
  check_forward(d, a, b, bias, "gelu_exact", BF16)
  assert [x.path for x in why] == ["xla"] and why[0].target == TARGET
  jax.clear_caches()
  why = tuning.explain(lambda a, b, c: jax_sm100.matmul_bias(a, b, c), a, b, bias)
  assert [x.path for x in why] == ["kernel"] and why[0].target == TARGET


def test_disabled_target_takes_the_reference(rng, cpu_ffi, monkeypatch):
  monkeypatch.setenv(_ffi_registry.DISABLE_TARGETS_ENV, TARGET)
  jax.clear_caches()
  a, b = random_array(rng, (8, 24), BF16), random_array(rng, (24, 16), BF16)
  f = lambda a, b: jax_sm100.matmul_bias(a, b, jnp.ones(16), activation="relu")
  assert not _custom_calls(jax.jit(f).lower(a, b).as_text())
  check_forward(f(a, b), a, b, jnp.ones(16, F32), "relu", BF16)


def _bias_family_result(passed):
  return _selftest_guard.FamilyResult("gemm_bias", "sm100", "fake", passed, (), 0,
                                      None if passed else "gemm_bias self-test failed (planted)")


def test_sm100_runs_the_kernel_behind_the_selftest(rng, monkeypatch):
  """targets.h marks the target's sm_100a kernel: a Blackwell context launches it once the
  gemm_bias family's first-use self-test passed (stubbed here: tracing only), and takes
  the reference when it failed."""
  row = [l for l in TARGETS_H.read_text().splitlines() if f'X("{TARGET}"' in l]
  assert len(row) == 1 and row[0].rstrip(" \\").endswith("true)"), row
  if _ffi_registry.sm100_targets():  # a build with sm_100a code reports it too
    assert TARGET in _ffi_registry.sm100_targets()
  ctx = _backend.Context("sm100", frozenset({"jax_sm100_gemm", TARGET}))
  assert ctx.can_call(TARGET)
  a, b = random_array(rng, (8, 24), BF16), random_array(rng, (24, 16), BF16)
  def jaxpr():  # a fresh function per trace: nothing cached
    return str(jax.make_jaxpr(lambda a, b: launch_bias.gemm_bias(
        ctx, a, b, jnp.ones(16, F32), False, False, "silu", False, BF16))(a, b))

  asked = []
  monkeypatch.setattr(_selftest_guard, "_enabled", True)
  monkeypatch.setattr(_selftest_guard, "ensure",
                      lambda family, backend: asked.append((family, backend))
                      or _bias_family_result(True))
  assert "ffi_call" in jaxpr()
  assert asked == [("gemm_bias", "sm100")]
  monkeypatch.setattr(_selftest_guard, "ensure",
                      lambda family, backend: _bias_family_result(False))
  jax.clear_caches()
  assert "ffi_call" not in jaxpr()
  # The mixed pairs have no kernel on any backend.
  assert launch_bias.why_not_kernel(ctx, a, b, np.dtype(F16)) is not None


def test_gemm_bias_selftest_family_on_the_cpu_handler(cpu_ffi, monkeypatch):
  """The gemm_bias family's known-answer cases (what a Blackwell GPU runs on first use):
  every activation on every sm100 tiling, with and without bias and pre, pass through the
  launch layer on the target's CPU handler; a planted fault (the wrong activation) fails
  every case, bf16 outputs and K ~ 1000 (|z| up to ~140) included: the tolerance is per
  element, so the ulp of the largest |z| does not hide the gap between two activations."""
  from jax_sm100 import _activations, selftest
  cases = selftest.cases("gemm_bias", "sm100")
  assert {(c.tiling, c.activation) for c in cases} == {
      (t, act) for t in tuning.SM100_GEMM_TILINGS for act in _activations.CODES}
  assert {c.has_bias for c in cases} == {True, False} == {c.want_pre for c in cases}
  assert {(c.trans_a, c.trans_b) for c in cases} == {(x, y) for x in (0, 1) for y in (0, 1)}
  seed = int(np.random.default_rng().integers(2**31))
  results = selftest.run_family("gemm_bias", "sm100", seed=seed, path="kernel")
  assert len(results) == len(cases) and all(r.passed for r in results), [
      (r.case.describe(), r.max_abs_err, r.tol, r.error) for r in results if not r.passed]
  real = selftest.launch_kernel
  wrong = {"none": "relu", "relu": "none", "gelu_tanh": "silu", "gelu_erf": "relu",
           "silu": "gelu_erf"}
  monkeypatch.setattr(selftest, "launch_kernel", lambda case, a, b, c: real(
      dataclasses.replace(case, activation=wrong[case.activation]), a, b, c))
  results = selftest.run_family("gemm_bias", "sm100", seed=seed, path="kernel")
  assert len(results) == len(cases)
  assert not [r.case.describe() for r in results if r.passed]


# ---------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------

def test_vmap_is_one_batched_launch(rng, path):
  a = random_array(rng, (4, 5, 33, 20), BF16)
  b = random_array(rng, (20, 12), BF16)
  bias = random_array(rng, (12,), F32)
  f = lambda a: jax_sm100.matmul_bias(a, b, bias, activation="silu")
  got = jax.jit(jax.vmap(jax.vmap(f)))(a)
  check_forward(got, a, b, bias, "silu", BF16, what="nested vmap")
  if path[0] == "cpu_ffi":
    text = jax.jit(jax.vmap(jax.vmap(f))).lower(a).as_text()
    assert len(_custom_calls(text)) == 1 and "while" not in text


def test_vmap_over_weights_and_per_entry_bias(rng, path):
  a = random_array(rng, (6, 20), BF16)
  bs = random_array(rng, (3, 20, 16), BF16)
  biases = random_array(rng, (3, 16), F32)
  f = lambda b, c: jax_sm100.matmul_bias(a, b, c, activation="gelu")
  got = jax.jit(jax.vmap(f))(bs, biases)  # per-entry bias: the reference formula
  for i in range(3):
    check_forward(got[i], a, bs[i], biases[i], "gelu", BF16, what=f"entry {i}")
  got = jax.jit(jax.vmap(f, (0, None)))(bs, biases[0])  # shared bias: the batched launch
  for i in range(3):
    check_forward(got[i], a, bs[i], biases[0], "gelu", BF16, what=f"shared bias {i}")
  # Gradient under vmap, per-entry bias included.
  loss = lambda b, c: jnp.sum(f(b, c).astype(F32) ** 2)
  gb, gc = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1))))(bs, biases)
  for i in range(3):
    rb, rc = jax.grad(loss, argnums=(0, 1))(bs[i], biases[i])
    np.testing.assert_allclose(f64(gb[i]), f64(rb), rtol=2e-2, atol=2e-2 * np.abs(f64(rb)).max())
    np.testing.assert_allclose(f64(gc[i]), f64(rc), rtol=1e-2, atol=1e-2 * np.abs(f64(rc)).max())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("bias,exc,match", [
    (np.ones(7, np.float32), ValueError, r"bias must have shape \(N,\) = \(6,\).*got \(7,\)"),
    (np.ones((1, 6), np.float32), ValueError, r"bias must have shape \(N,\)"),
    (np.float32(1), ValueError, r"bias must have shape \(N,\)"),
    (np.ones(6, np.int32), TypeError, "bias must have a floating dtype"),
    ("x", TypeError, "bias must be an array"),
])
def test_bad_bias_names_the_argument(bias, exc, match):
  a, b = jnp.ones((4, 8), BF16), jnp.ones((8, 6), BF16)
  with pytest.raises(exc, match=match):
    jax_sm100.matmul_bias(a, b, bias)
  with pytest.raises(exc, match=match):
    jax.jit(lambda a, b: jax_sm100.matmul_bias(a, b, bias)).lower(a, b)


@pytest.mark.parametrize("activation,exc", [("tanh", ValueError), ("gelu_approx", ValueError),
                                            (3, TypeError), (jax.nn.relu, TypeError)])
def test_unknown_activation_lists_the_valid_names(activation, exc):
  a, b = jnp.ones((4, 8), BF16), jnp.ones((8, 6), BF16)
  with pytest.raises(exc, match=r"activation.*'relu', 'gelu', 'gelu_tanh', 'gelu_exact'"):
    jax_sm100.matmul_bias(a, b, activation=activation)


def test_accepted_activation_spellings(rng):
  a, b = random_array(rng, (4, 8), F32), random_array(rng, (8, 6), F32)
  f = lambda act: f64(jax_sm100.matmul_bias(a, b, activation=act))
  np.testing.assert_array_equal(f("gelu"), f("gelu_tanh"))
  np.testing.assert_array_equal(f("GELU_exact"), f("gelu_erf"))
  np.testing.assert_array_equal(f("swish"), f("silu"))
  np.testing.assert_array_equal(f("none"), f(None))
  assert not np.array_equal(f("gelu"), f("gelu_exact"))


def test_other_bad_input_names_the_argument():
  a, b = jnp.ones((4, 8), BF16), jnp.ones((8, 6), BF16)
  with pytest.raises(TypeError, match="matmul_bias: a and b must have the same dtype"):
    jax_sm100.matmul_bias(a, b.astype(F16))
  with pytest.raises(ValueError, match="matmul_bias: a's last dim"):
    jax_sm100.matmul_bias(a, jnp.ones((7, 6), BF16))
  with pytest.raises(TypeError, match="matmul_bias: out_dtype"):
    jax_sm100.matmul_bias(a, b, out_dtype=jnp.int8)


# ---------------------------------------------------------------------------
# The CPU handler's own checks (the CUDA handler shares them: gemm_bias_validate.h)
# ---------------------------------------------------------------------------

_ATTRS = dict(trans_a=False, trans_b=False, block_m=np.int32(128), block_n=np.int32(128),
              cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1),
              activation=np.int32(0))


def _direct(a, b, bias, pre_shape, out=BF16, **attrs):
  d = jax.ShapeDtypeStruct(a.shape[:-1] + b.shape[-1:], out)
  return jax.ffi.ffi_call(TARGET, (d, jax.ShapeDtypeStruct(pre_shape, out)))(
      a, b, bias, **{**_ATTRS, **attrs})


@pytest.mark.parametrize("bias_shape,pre_shape,attrs,match", [
    ((8,), (0,), dict(activation=np.int32(5)), r"activation must be one of 0 none, 1 relu"),
    ((8,), (0,), dict(activation=np.int32(-1)), "activation must be one of"),
    ((7,), (0,), {}, r"bias must be float32 of shape \(N,\) = \(8,\)"),
    ((8,), (4, 7), {}, r"pre must have the output's shape \(4, 8\)"),
    ((8,), (0,), dict(block_m=np.int32(96)), r"no kernel for \(block_m, block_n, cluster_m\)"),
    ((8,), (0,), dict(out=F16), "the output must have the inputs' dtype or float32"),
])
def test_handler_rejects_bad_operands_and_attributes(cpu_ffi, bias_shape, pre_shape, attrs, match):
  a, b = jnp.ones((4, 16), BF16), jnp.ones((16, 8), BF16)
  with pytest.raises(Exception, match=match):
    jax.block_until_ready(_direct(a, b, jnp.ones(bias_shape, F32), pre_shape, **attrs))


def test_handler_zero_k_and_pre(rng, cpu_ffi):
  bias = random_array(rng, (8,), F32)
  d, pre = _direct(jnp.ones((4, 0), BF16), jnp.ones((0, 8), BF16), bias, (4, 8), out=F32,
                   activation=np.int32(4))
  np.testing.assert_allclose(f64(pre), np.broadcast_to(f64(bias), (4, 8)))
  np.testing.assert_allclose(f64(d), np.broadcast_to(act64("silu", f64(bias)), (4, 8)), rtol=1e-6)


# ---------------------------------------------------------------------------
# Dispatch: matmul_bias's own table entries (the dispatch table tests' cpu_ffi set-up)
# ---------------------------------------------------------------------------

def test_matmul_bias_is_dispatched_by_its_own_entries(kind, rng, tmp_path, monkeypatch):
  """matmul_bias asks for op 'matmul_bias': the plain matmul's "xla" does not send it to
  its dearer XLA path (fp32 product + epilogue pass); its own "xla" entry does; a class
  without a matmul_bias entry takes the kernel."""
  a, b = operands(rng, *XLA_SHAPE)
  bias = random_array(rng, (XLA_SHAPE[2],), BF16)
  f = lambda a, b, bias: jax_sm100.matmul_bias(a, b, bias, activation="gelu")  # noqa: E731
  bias_calls = lambda text: text.count("custom_call @jax_sm100_gemm_bias(")  # noqa: E731
  m, k, n = XLA_SHAPE
  key = dt.shape_class(m, n, k, 1, 132, dt.DEFAULT_CLASSES)
  xla = dict(path="xla", tiling=[128, 128, 1], speedup=1.2, worst=0.8, shapes=["200x96x64"])

  def use_table(entries, name):
    table = json.loads(open(dt.DATA_FILE).read())
    table["kinds"]["H200"]["entries"] = entries
    assert not dt.check_table(table)
    path = tmp_path / name
    path.write_text(json.dumps(table))
    monkeypatch.setattr(dt, "DATA_FILE", str(path))
    monkeypatch.setattr(dt, "_shipped", {})

  # a table whose only entry sends the plain matmul's class to xla
  use_table({"matmul": {"bfloat16": {key: xla}}}, "matmul_only.json")
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0
  assert bias_calls(hlo(f, a, b, bias)) == 1
  (d,) = tuning.explain(f, a, b, bias)
  assert d.path == "kernel" and "has no measurement in class" in d.why
  # a table whose matmul_bias entry for the class says xla
  use_table({"matmul_bias": {"bfloat16": {key: xla}}}, "bias_xla.json")
  assert bias_calls(hlo(f, a, b, bias)) == 0
  (d,) = tuning.explain(f, a, b, bias)
  assert d.path == "xla" and d.target == "jax_sm100_gemm_bias"
  got = run(f, a, b, bias)
  z = f64(a) @ f64(b) + f64(bias)
  want = np.asarray(jax.nn.gelu(jnp.asarray(z, F32)), np.float64)
  assert np.max(np.abs(f64(got) - want) / (np.abs(want) + 1.0)) < 2e-2
