"""The self-test family of the activation-backward GEMM (`gemm_dact`: target
jax_sm100_gemm_dact, jax_sm100.mlp's backward), registered in
jax_sm100._selftest_families.FAMILIES (which imports this module at its end).

A case is x = (op(a) @ op(b)) * act'(c) in fp32, d = x rounded to the inputs' dtype and
dbias = the column sums of x: a, b and the pre-activation c N(0, 1) data, every activation
with a derivative (relu, gelu_tanh, gelu_erf, silu) on each of the dact kernel's tilings,
bf16 and f16, the gemm family's layouts rotated. The launch picks the tile from M (CTA
pairs unless one 128-row tile holds M: _launch/dact.dact_config), so each tiling's cases
take shapes that select it. The result compared is d widened to f32 with dbias as one
more row (the case's out_dtype is that f32 result's; d itself has in_dtype).
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import tuning
from jax_sm100._selftest_families import (_LAYOUTS, _SHORT, _UNIT_ROUNDOFF, FAMILIES, Case,
                                         Family)

FAMILY = "gemm_dact"
TARGET = "jax_sm100_gemm_dact"
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu")
# The dact kernels' tilings on every architecture that has them (128x256 single CTAs and
# pairs).
TILINGS = ((128, 256, 1), (128, 256, 2))
# (M, N, K) per tiling: one 128-row tile for single CTAs, several (odd) for pairs; partial
# tiles in M, N and K; K across many K blocks.
_SHAPES = {1: ((72, 136, 40), (128, 300, 136)),
           2: ((300, 520, 200), (257, 390, 136), (136, 264, 1000))}


@dataclasses.dataclass(frozen=True)
class DactCase(Case):
  """An activation-backward case: `activation` a canonical name with a derivative."""
  activation: str = "gelu_tanh"
  show_scalars = False  # c is the pre-activation: the report prints no alpha / beta

  def shapes(self) -> str:
    x = lambda shape: "x".join(map(str, shape))
    return f"{x(self.a_shape)} @ {x(self.b_shape)} * {self.activation}'(c {x(self.c_shape)}), column sums"

  def describe(self) -> str:
    bm, bn, cl = self.tiling
    return (f"{self.family} {bm}x{bn} cluster {cl}, {self.layout}, {_SHORT[self.in_dtype]} "
            f"(d widened to f32, dbias a last row), {self.shapes()}")


def _cases(tilings: tuple) -> list:
  out = []
  for ti, tiling in enumerate(tilings):
    shapes = _SHAPES[tiling[2]]
    for ai, act in enumerate(ACTIVATIONS):
      i = ti * len(ACTIVATIONS) + ai
      ta, tb = _LAYOUTS[i % len(_LAYOUTS)]
      din = ("bfloat16", "float16")[i % 2]
      m, n, k = shapes[ai % len(shapes)]
      a = (k, m) if ta else (m, k)
      b = (n, k) if tb else (k, n)
      out.append(DactCase(FAMILY, tiling, ta, tb, din, "float32", a, b, c_shape=(m, n),
                           activation=act))
  return out


def _kernel(case, a, b, c):
  from jax_sm100._launch import dact as _launch_dact
  settings = tuning.Settings(gemm=tuning.GemmConfig(*case.tiling))
  fn = _launch_dact._kernel(case.trans_a, case.trans_b, case.activation, True, settings)
  d, dbias = jax.jit(fn)(a, b, c.astype(a.dtype))
  return jnp.concatenate([d.astype(jnp.float32), dbias[None, :]], axis=0)


def _reference(case, a, b, c):
  from jax_sm100._launch import dact as _launch_dact
  d, dbias = jax.jit(lambda a, b, c: _launch_dact.reference(
      a, b, c, case.trans_a, case.trans_b, case.activation))(a, b, c.astype(a.dtype))
  return jnp.concatenate([d.astype(jnp.float32), dbias[None, :]], axis=0)


def _dact64(name: str, z):
  if name == "relu":
    return (z > 0).astype(np.float64)
  if name == "gelu_tanh":
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (z + 0.044715 * z**3))
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z)
  if name == "gelu_erf":
    return (0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
            + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
  s = 1 / (1 + np.exp(-z))  # silu
  return s * (1 + z * (1 - s))


def _expected(case, a, b, c):
  """(float64 result, per-element tolerance). d: one unit in the last place of the inputs'
  dtype at the element, plus the gemm family's bound on the fp32 accumulation times 1.13
  (the largest |act'| on this data's range, reached by gelu near |z| ~ 1.4), plus 16 fp32
  ulps of |acc| for act' evaluated in fp32 (its terms are O(1) where it crosses zero).
  dbias row: the sum over the rows of those bounds without the rounding (the kernel sums
  the unrounded fp32 values) plus the fp32 summation's rows x 2^-24 of the sum of |x|.
  A column sum one column off, act instead of act' or a lost butterfly step are O(1) or
  more on this N(0, 1) data."""
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  if case.trans_a:
    a64 = a64.T
  if case.trans_b:
    b64 = b64.T
  acc = a64 @ b64
  g = _dact64(case.activation, np.asarray(c, np.float32).astype(a.dtype).astype(np.float64))
  x = acc * g
  elem = (1.13 * 8.0 * math.sqrt(max(case.k, 1)) * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
          + 16.0 * 2.0**-24 * np.abs(acc))
  m = x.shape[0]
  tol_d = 2.0 * _UNIT_ROUNDOFF[case.in_dtype] * np.abs(x) + elem + 1e-30
  tol_sum = elem.sum(axis=0) + 2.0 * m * 2.0**-24 * np.abs(x).sum(axis=0) + 1e-30
  want = np.concatenate([x, x.sum(axis=0)[None, :]], axis=0)
  return want, np.concatenate([tol_d, tol_sum[None, :]], axis=0)


def _tilings(backend: str) -> tuple:
  return TILINGS


FAMILIES[FAMILY] = Family(FAMILY, (TARGET,), _cases, _tilings, _kernel, _reference, _expected)
