"""GPU tests of the sm_90a FP8 GEMM with the fused bias/activation epilogue (target
jax_sm100_fp8_gemm_bias) and of fp8_dot(bias=, activation=) on it.

  (a, a_scale_t, b, b_scale, bias) -> d = bf16(act(z)),  z = (a*sa) @ (b*sb)^T + bias  (fp32)

Every test is marked `gpu` (skipped unless an sm_90 GPU is the default device). References
are float64 NumPy on the dequantized inputs of fresh random data, checked ELEMENT BY
ELEMENT against a bound of one bf16 ulp at the element's own |z| plus 2^-12 of its sum of
|terms| (the tensor cores' FP8 partial sums), times 1.13 (the largest |act'|); a large
random bias (10 * N(0, 1)) makes a bias column landing on the wrong output column fail.
Covered: every compiled form x every activation, with and without the bias; more tiles
than SMs (the bias slice restaged per tile, tiles chained); partial M / N tiles and a K
not a multiple of 128; exact identities against the plain FP8 kernel of the same form
(activation none, no bias: bit for bit; relu: max(plain, 0) bit for bit); the self-test
family on this GPU; the public op (the fused custom call in its HLO, values, gradients).
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from jax_sm100 import tuning  # noqa: E402
from test_fp8_gpu import FORMS, a_scale_t, ffi_fp8, fp8_attrs, make_operands  # noqa: E402

from conftest import act64, np_dequantize  # noqa: E402

TARGET = "jax_sm100_fp8_gemm_bias"
ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
BF16 = jnp.bfloat16

pytestmark = pytest.mark.gpu


def ffi_fp8_bias(a, sa, b, sb, bias, act, form=None, group_m=8):
  """The fused target on kernel `form` (None: the library's default choice), sa (M, Kb)
  passed transposed, bias (N,) f32 or None."""
  m, n, k = a.shape[0], b.shape[0], a.shape[1]
  attrs = dict(fp8_attrs(m, n, k, form, group_m), activation=np.int32(ACTS[act]))
  bias = jnp.zeros((0,), jnp.float32) if bias is None else bias
  f = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((m, n), BF16))
  return jax.jit(lambda *o: f(*o, **attrs))(a, a_scale_t(sa), b, sb, bias)


def _expected(a, sa, b, sb, bias, act):
  ad = np_dequantize(np.asarray(a), np.asarray(sa), (1, 128))
  bd = np_dequantize(np.asarray(b), np.asarray(sb), (128, 128))
  z = ad @ bd.T
  absterms = np.abs(ad) @ np.abs(bd).T
  if bias is not None:
    z = z + np.asarray(bias, np.float64)[None, :]
  tol = 2.0**-8 * np.abs(z) + 1.13 * (2.0**-12 * absterms + 2.0**-23 * np.abs(z)) + 1e-6
  return act64(act, z), tol


def _check(got, a, sa, b, sb, bias, act, what):
  want, tol = _expected(a, sa, b, sb, bias, act)
  got = np.asarray(jnp.asarray(got).astype(jnp.float32), np.float64)
  assert got.shape == want.shape, (got.shape, want.shape)
  assert np.isfinite(got).all(), f"{what}: {np.count_nonzero(~np.isfinite(got))} non-finite outputs"
  excess = np.abs(got - want) / tol
  worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
  assert excess.max() <= 1.0, (f"{what}: element {worst} = {got[worst]:.6g}, want "
                               f"{want[worst]:.6g} (tol {tol[worst]:.3g}); "
                               f"{np.count_nonzero(excess > 1)} elements out of bound")


def _bias(rng, n):
  return jnp.asarray(10.0 * rng.standard_normal(n), jnp.float32)


def test_target_is_registered():
  assert TARGET in reg.registered_targets()


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_and_activation(rng, form, act):
  """Partial M / N tiles, a partial K block, more tiles than one per CTA."""
  m, n, k = 700, 1000, 656
  a, sa, b, sb = make_operands(rng, m, n, k)
  bias = _bias(rng, n)
  got = ffi_fp8_bias(a, sa, b, sb, bias, act, FORMS[form])
  _check(got, a, sa, b, sb, bias, act, f"{form} {act}")


@pytest.mark.parametrize("form", list(FORMS))
def test_without_bias(rng, form):
  m, n, k = 300, 520, 384
  a, sa, b, sb = make_operands(rng, m, n, k)
  got = ffi_fp8_bias(a, sa, b, sb, None, "gelu_tanh", FORMS[form])
  _check(got, a, sa, b, sb, None, "gelu_tanh", f"{form} no bias")


@pytest.mark.parametrize("form", list(FORMS))
def test_identities_against_the_plain_kernel(rng, form):
  """Activation none without a bias is the plain kernel bit for bit (same form, same
  accumulation order); relu is max(plain, 0) bit for bit (rounding keeps the sign)."""
  m, n, k = 520, 776, 1040
  a, sa, b, sb = make_operands(rng, m, n, k)
  plain = np.asarray(ffi_fp8(a, sa, b, sb, form=FORMS[form]).astype(jnp.float32))
  none = np.asarray(ffi_fp8_bias(a, sa, b, sb, None, "none", FORMS[form]).astype(jnp.float32))
  relu = np.asarray(ffi_fp8_bias(a, sa, b, sb, None, "relu", FORMS[form]).astype(jnp.float32))
  assert np.array_equal(none, plain), np.count_nonzero(none != plain)
  assert np.array_equal(relu, np.maximum(plain, 0.0)), np.count_nonzero(relu != np.maximum(plain, 0))


@pytest.mark.parametrize("group_m", [1, 3, 8])
@pytest.mark.parametrize("form", ["128x128_c2", "256x128_c2n", "192x128_c1"])
def test_many_tiles_per_cta(rng, form, group_m):
  """Thousands of tiles: each CTA restages the bias for many tiles, in chained order."""
  m, n, k = 2048, 3000, 256
  a, sa, b, sb = make_operands(rng, m, n, k)
  bias = _bias(rng, n)
  got = ffi_fp8_bias(a, sa, b, sb, bias, "silu", FORMS[form], group_m)
  _check(got, a, sa, b, sb, bias, "silu", f"{form} group_m {group_m}")


@pytest.mark.parametrize("m,n,k", [(1, 256, 256), (16, 4096, 1024), (5, 1000, 384)])
def test_default_choice_small_m(rng, m, n, k):
  a, sa, b, sb = make_operands(rng, m, n, k)
  bias = _bias(rng, n)
  got = ffi_fp8_bias(a, sa, b, sb, bias, "gelu_erf")
  _check(got, a, sa, b, sb, bias, "gelu_erf", f"{m}x{n}x{k} default")


def test_selftest_family_on_this_gpu():
  """The fp8_gemm_bias family's known-answer cases (what a Blackwell GPU runs on first
  use), run on the sm_90a kernels: every activation on every sm90 form."""
  from jax_sm100 import selftest
  results = selftest.run_family("fp8_gemm_bias", "sm90", path="kernel")
  assert len(results) >= 25
  assert all(r.passed for r in results), [
      (r.case.describe(), r.max_abs_err, r.tol, r.error) for r in results if not r.passed]


@pytest.mark.parametrize("act", ["gelu", "relu", "silu"])
def test_fp8_dot_runs_the_fused_kernel(rng, act):
  """fp8_dot(x, w, bias=, activation=): the fused custom call is in the program, the
  values match act(Q(x) @ Q(w) + bias) within the bound, and the gradients match those
  of the unfused form (FP8 GEMM, then XLA's epilogue) within 5%: the two forms' dz differ
  by bf16 roundings (and, for relu, by the mask wherever |z| is below one bf16 ulp of
  x @ w), and the FP8 backward quantizes a few percent of such elements to the
  neighbouring e4m3 value, 2^-3 apart (measured: 1-2.2% on an H200); a wrong mask, bias
  gradient or activation derivative is O(100%)."""
  m, k, n = 512, 1024, 768
  x = jnp.asarray(rng.standard_normal((m, k)), BF16)
  w = jnp.asarray(rng.standard_normal((k, n)) / np.sqrt(k), BF16)
  bias = jnp.asarray(rng.standard_normal(n), jnp.float32)
  f = jax.jit(lambda x, w, b: jax_sm100.fp8_dot(x, w, bias=b, activation=act))
  assert TARGET in f.lower(x, w, bias).as_text()
  y = np.asarray(f(x, w, bias).astype(jnp.float32), np.float64)

  def unfused(x, w, b):
    z = jax_sm100.fp8_dot(x, w).astype(jnp.float32) + b
    return getattr(jax.nn, act)(z)
  ref = np.asarray(jax.jit(unfused)(x, w, bias), np.float64)
  # The unfused form rounds z to bf16 before the activation: one more bf16 ulp.
  assert np.max(np.abs(y - ref) / (2.0**-7 * np.abs(ref) + 2.0**-7)) <= 1.0

  def loss(fn):
    return lambda x, w, b: jnp.sum(fn(x, w, b).astype(jnp.float32) * jnp.cos(
        jnp.arange(n, dtype=jnp.float32)))
  g_fused = jax.jit(jax.grad(loss(lambda x, w, b: jax_sm100.fp8_dot(x, w, bias=b, activation=act)),
                             argnums=(0, 1, 2)))(x, w, bias)
  g_ref = jax.jit(jax.grad(loss(unfused), argnums=(0, 1, 2)))(x, w, bias)
  for name, gf, gr in zip(("dx", "dw", "dbias"), g_fused, g_ref):
    gf = np.asarray(gf.astype(jnp.float32), np.float64)
    gr = np.asarray(gr.astype(jnp.float32), np.float64)
    rel = np.linalg.norm(gf - gr) / np.linalg.norm(gr)
    assert rel < 5e-2, f"{act} {name}: relative difference {rel:.3g}"


def test_config_override_reaches_the_fused_launch(rng):
  """tuning.override(fp8=...) picks the fused launch's form too (its attributes in the HLO)."""
  x = jnp.asarray(rng.standard_normal((1024, 512)), BF16)
  w = jnp.asarray(rng.standard_normal((512, 1024)), BF16)
  cfg = tuning.Fp8Config(192, 128, 1, False, 8)
  with tuning.override(fp8=cfg):
    text = jax.jit(lambda x, w: jax_sm100.fp8_dot(x, w, activation="relu")).lower(x, w).as_text()
  line = [l for l in text.splitlines() if TARGET in l]
  assert line and "block_m = 192" in line[0], line
