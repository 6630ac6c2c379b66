"""The self-test family of the FP8 GEMM with the fused bias/activation epilogue
(`fp8_gemm_bias`: target jax_sm100_fp8_gemm_bias, fp8_dot's forward with a bias or an
activation), registered in jax_sm100._selftest_families.FAMILIES (which imports this
module at its end).

A case is d = bf16(act(z)), z = (a * a_scale) @ (b * b_scale)^T + bias in fp32: a (M, K)
and b (N, K) e4m3 N(0, 1) data with the FP8 family's scales (_fp8_scales), the bias b's
first K column (fresh with the data, f32) or none. Every activation on every FP8 tiling,
the bias on and off in rotation, the FP8 family's shapes rotated.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import tuning
from jax_sm100._selftest_families import (_FP8_SHAPES, _UNIT_ROUNDOFF, FAMILIES, BiasCase, Family,
                                         _act64, _case_bias, _fp8_product64, _fp8_scales,
                                         _fp8_tilings)

FAMILY = "fp8_gemm_bias"
TARGET = "jax_sm100_fp8_gemm_bias"


def _cases(tilings: tuple) -> list:
  from jax_sm100 import _activations
  out = []
  for ti, tiling in enumerate(tilings):
    for ai, act in enumerate(_activations.CODES):
      i = ti * len(_activations.CODES) + ai
      m, n, k = _FP8_SHAPES[i % len(_FP8_SHAPES)]
      out.append(BiasCase(FAMILY, tiling, False, True, "float8_e4m3fn", "bfloat16", (m, k), (n, k),
                          activation=act, has_bias=(i % 3) != 2))
  return out


def _kernel(case: BiasCase, a, b, c):
  from jax_sm100._launch import fp8 as _fp8_launch
  sa, sb = _fp8_scales(a, b)
  settings = tuning.Settings(fp8=tuning.Fp8Config(*case.tiling))
  bias = _case_bias(case, b)
  fn = _fp8_launch._kernel_bias(case.activation, bias is not None, settings)
  bias = jnp.zeros((0,), jnp.float32) if bias is None else bias
  return jax.jit(fn)(a, jnp.asarray(sa.T), b, jnp.asarray(sb), bias)


def _reference(case: BiasCase, a, b, c):
  from jax_sm100._launch import fp8 as _fp8_launch
  sa, sb = _fp8_scales(a, b)
  bias = _case_bias(case, b)
  bias = jnp.zeros((0,), jnp.float32) if bias is None else bias
  return jax.jit(lambda *ops: _fp8_launch._bias_reference(*ops, case.activation))(
      a, jnp.asarray(sa.T), b, jnp.asarray(sb), bias)


def _expected(case: BiasCase, a, b, c):
  """(float64 result, per-element tolerance): one bf16 ulp at the element's own |z| (an
  epilogue may round z before the activation), plus 2^-12 of the element's sum of |terms|
  (the FP8 family's bound on the fp32 partials and promotions) and the fp32 bias add,
  times 1.13 (the largest |act'|), plus 4 fp32 ulps of the largest |z| (the fp32
  activation). Per element, so that a wrong activation (gap up to 0.17 near |z| ~ 1)
  shows beside elements of |z| ~ 30."""
  z, absterms = _fp8_product64(a, b)
  bias = _case_bias(case, b)
  if bias is not None:
    z = z + np.asarray(bias, np.float64)[None, :]
  zmax = float(np.abs(z).max())
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * np.abs(z)
         + 1.13 * (2.0**-12 * absterms + 2.0**-23 * np.abs(z)) + 4.0 * 2.0**-24 * zmax + 1e-30)
  return _act64(case.activation, z), tol


FAMILIES[FAMILY] = Family(FAMILY, (TARGET,), _cases,
                          lambda backend: _fp8_tilings(backend, False), _kernel, _reference,
                          _expected)
