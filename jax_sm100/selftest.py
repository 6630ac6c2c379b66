"""Known-answer self-test of the kernels on the device at hand.

The sm_100a (Blackwell) kernels were compiled, SASS-checked and emulated, but never run
on hardware by this project. So on a backend in jax_sm100._backend.UNPROVEN_BACKENDS
(sm100), the first use of each kernel family in a process (an op about to be traced
into one of its FFI targets) first runs this module's fixed set of products for the
family on the device and compares them with float64 NumPy: several shapes with partial
tiles, the four transpose layouts, bf16/fp16 inputs, bf16/fp16/f32 outputs, batched and
broadcast operands, alpha/beta (beta == 0 with NaN in C), and every tiling the family's
kernel has (the 2-SM pair included); the FP8 families: e4m3 products with blockwise
scales against float64 of the dequantized inputs, and the quantizers against the recipe
bit for bit. A wrong number, a NaN or an exception (a kernel
trap reaches Python as an XLA runtime error) warns with SelfTestFailure and an error-
level log line naming the family, tiling, case and error, and sends that family's ops
to the reference path for the rest of the process (tuning.explain says why). The
result is kept per (device kind, backend, family) for the process.

Switch: JAX_SM100_SELFTEST=0 in the environment (read once, at import) or
configure(enabled=False) skips the self-test; the kernels then run unchecked.

`python -m jax_sm100.selftest` runs every family's cases on the default device through
the path the ops take there (kernel, CPU handlers or reference: the report says which)
and prints a report to paste into an issue; exit status 0 only when every case passed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import secrets
import subprocess
import sys
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _backend, _explain, _ffi_registry, _reference, _selftest_guard, tuning
from jax_sm100._launch import gemm as _gemm
from jax_sm100 import _mxfp8

__all__ = ["SelfTestFailure", "Case", "CaseResult", "Family", "FAMILIES", "configure",
           "enabled", "current_seed", "status", "cases", "run_family", "report", "main"]


class SelfTestFailure(RuntimeWarning):
  """A kernel family failed its known-answer self-test; its ops take the reference path."""


# Unit roundoff of each output format (rounding the exact result is off by at most this
# fraction of it).
_UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
_SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32",
          "float8_e4m3fn": "e4m3"}


@dataclasses.dataclass(frozen=True)
class Case:
  """One known-answer product: d = alpha * op(a) @ op(b) (+ beta * c) on `tiling`.

  a_shape / b_shape as stored (transposed where trans_a / trans_b); c_shape None for
  the plain GEMM; c_nan: C is all NaN (with beta == 0 the kernel must not read it)."""
  family: str
  tiling: tuple
  trans_a: bool
  trans_b: bool
  in_dtype: str
  out_dtype: str
  a_shape: tuple
  b_shape: tuple
  c_shape: tuple | None = None
  alpha: float = 1.0
  beta: float = 0.0
  c_nan: bool = False

  @property
  def layout(self) -> str:
    return ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")

  @property
  def k(self) -> int:
    return self.a_shape[-2] if self.trans_a else self.a_shape[-1]

  def shapes(self) -> str:
    s = "x".join(map(str, self.a_shape)) + " @ " + "x".join(map(str, self.b_shape))
    if self.c_shape is not None:
      s += " + " + "x".join(map(str, self.c_shape)) + (" (NaN)" if self.c_nan else "")
    return s

  def describe(self) -> str:
    bm, bn, cl = self.tiling
    scal = f" alpha={self.alpha:g} beta={self.beta:g}" if self.c_shape is not None else ""
    return (f"{self.family} {bm}x{bn} cluster {cl}, {self.layout}, "
            f"{_SHORT[self.in_dtype]}->{_SHORT[self.out_dtype]}, {self.shapes()}{scal}")


@dataclasses.dataclass(frozen=True)
class CaseResult:
  """max_abs_err against float64 and the case's tolerance; error: the exception (type:
  message) when the launch raised; runtime_error: it was an XLA runtime error (a kernel
  trap or launch failure); path: 'kernel' or 'reference'."""
  case: Case
  path: str
  max_abs_err: float = math.nan
  tol: float = math.nan
  nonfinite: bool = False
  error: str | None = None
  runtime_error: bool = False

  @property
  def passed(self) -> bool:
    return self.error is None and not self.nonfinite and self.max_abs_err <= self.tol


@dataclasses.dataclass(frozen=True)
class Family:
  """A kernel family: its FFI targets, its cases given the kernel's tilings, and how
  one case launches the kernel and the reference path. New families (FP8) add an entry
  to FAMILIES and a hook in their launch module (_selftest_guard.refusal)."""
  name: str
  targets: tuple
  make_cases: Callable[[tuple], list]
  tilings: Callable[[str], tuple]
  kernel: Callable
  reference: Callable
  expected: Callable


# ---------------------------------------------------------------------------
# The bf16/fp16 GEMM families (jax_sm100_gemm, jax_sm100_gemm_residual)
# ---------------------------------------------------------------------------

_LAYOUTS = ((False, False), (False, True), (True, False), (True, True))
# (input, output) dtypes, rotated over tilings and layouts so each tiling sees each.
_DTYPES = (("bfloat16", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"),
           ("float16", "float16"))
# (M, N, K): partial tiles in M, N and K; several tiles and pairs; one tile (where the
# second CTA of a 2-SM pair has no rows); K across many K blocks; unaligned rows.
_SHAPES = ((300, 520, 200), (136, 264, 1000), (72, 136, 40), (257, 390, 136))
# alpha, beta of the residual cases, rotated.
_SCALARS = ((1.5, -0.75), (1.0, 1.0), (0.5, 2.0), (-1.0, 0.25))


def _stored(m, n, k, trans_a, trans_b):
  return ((k, m) if trans_a else (m, k)), ((n, k) if trans_b else (k, n))


def _gemm_cases(family: str, tilings: tuple) -> list:
  residual = family == "gemm_residual"
  out = []
  for ti, tiling in enumerate(tilings):
    for li, (ta, tb) in enumerate(_LAYOUTS):
      din, dout = _DTYPES[(ti + li) % len(_DTYPES)]
      m, n, k = _SHAPES[(li + 2 * ti) % len(_SHAPES)]
      a, b = _stored(m, n, k, ta, tb)
      extra = {}
      if residual:
        alpha, beta = _SCALARS[(ti + li) % len(_SCALARS)]
        extra = dict(c_shape=(m, n), alpha=alpha, beta=beta)
      out.append(Case(family, tiling, ta, tb, din, dout, a, b, **extra))
  # Batched operands in one launch: a batch against a broadcast one (batch count 1, and
  # 2-D), on the last and the first tilings (the 2-SM pair is last on sm100).
  t_last, t_first = tilings[-1], tilings[0]
  c1 = dict(c_shape=(130, 264), alpha=1.0, beta=-0.5) if residual else {}   # c broadcast
  out.append(Case(family, t_last, False, False, "bfloat16", "bfloat16", (3, 130, 72),
                  (1, 72, 264), **c1))
  c2 = dict(c_shape=(2, 2, 200, 136), alpha=0.75, beta=1.5) if residual else {}
  out.append(Case(family, t_first, True, True, "float16", "float32", (96, 200),
                  (2, 2, 136, 96), **c2))
  if residual:  # beta == 0: C (all NaN) must not be read
    out.append(Case(family, t_last, False, True, "bfloat16", "float32", (260, 136),
                    (264, 136), c_shape=(260, 264), alpha=2.0, beta=0.0, c_nan=True))
  return out


def _gemm_tilings(backend: str) -> tuple:
  """The tilings the family's kernel has on `backend`: sm90 all of GEMM_TILINGS;
  sm100 SM100_GEMM_TILINGS; elsewhere (cpu_ffi, reference) the sm100 set, the one a
  Blackwell GPU runs (the CPU handlers take every tiling)."""
  return tuning.ARCH_GEMM_TILINGS.get(backend, tuning.SM100_GEMM_TILINGS)


def _gemm_kernel(case: Case, a, b, c):
  settings = tuning.Settings(gemm=tuning.GemmConfig(*case.tiling))
  out = np.dtype(jnp.dtype(case.out_dtype))
  if case.c_shape is None:
    fn = _gemm._gemm_kernel(case.trans_a, case.trans_b, out, settings)
    return jax.jit(fn)(a, b)
  fn = _gemm._gemm_residual_kernel(case.trans_a, case.trans_b, case.alpha, case.beta, out,
                                   settings)
  return jax.jit(fn)(a, b, c)


def _gemm_reference(case: Case, a, b, c):
  return jax.jit(lambda a, b, c: _reference.gemm(a, b, case.trans_a, case.trans_b,
                                                 jnp.dtype(case.out_dtype), c=c,
                                                 alpha=case.alpha, beta=case.beta))(a, b, c)


def _gemm_expected(case: Case, a, b, c):
  """(float64 result, scalar tolerance): one unit in the last place of the output type
  at the largest value (the final rounding, with margin), plus 8 sqrt(K) fp32 ulps of
  the largest |alpha| |a| @ |b| (a random-walk bound of the fp32 accumulation, with
  margin for truncating adders) and the fp32 rounding of beta * c. A layout,
  descriptor or K-block error is O(1) or more per element (the data is N(0, 1))."""
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  if case.trans_a:
    a64 = np.swapaxes(a64, -1, -2)
  if case.trans_b:
    b64 = np.swapaxes(b64, -1, -2)
  want = case.alpha * np.matmul(a64, b64)
  absprod = abs(case.alpha) * np.matmul(np.abs(a64), np.abs(b64))
  cterm = 0.0
  if case.c_shape is not None and case.beta != 0.0:
    want = want + case.beta * c.astype(np.float64)
    cterm = 2.0**-23 * abs(case.beta) * float(np.abs(c.astype(np.float64)).max())
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * float(np.abs(want).max())
         + 8.0 * math.sqrt(max(case.k, 1)) * 2.0**-24 * float(absprod.max()) + cterm + 1e-30)
  return want, tol


FAMILIES = {
    name: Family(name, (target,), lambda tilings, name=name: _gemm_cases(name, tilings),
                 _gemm_tilings, _gemm_kernel, _gemm_reference, _gemm_expected)
    for name, target in (("gemm", _gemm.TARGET), ("gemm_residual", _gemm.RESIDUAL_TARGET))
}


# ---------------------------------------------------------------------------
# The FP8 blockwise GEMM families (jax_sm100_fp8_gemm, jax_sm100_fp8_gemm_residual)
# ---------------------------------------------------------------------------
# A case is d = (a * a_scale) @ (b * b_scale)^T (+ beta * c): a (M, K) and b (N, K) e4m3
# (stored as the FP8 ops take them, so layout "NT"), bf16 out. The e4m3 data is N(0, 1)
# rounded to e4m3; the scales come from the data (see _fp8_scales), so they are fresh with
# it and both the launch and the float64 reference derive the same ones.

# (M, N, K): partial M and N tiles with a partial last K block; K = 16; more K blocks than
# the sm100 kernel's input and TMEM stages (the rings wrap); N and K off the launch
# layer's padding (N to a multiple of 8, K of 16).
_FP8_SHAPES = ((300, 264, 336), (130, 136, 16), (257, 392, 1040), (72, 260, 200))
_FP8_BETAS = (0.5, -1.25, 2.0, 1.0)
_FP8_BLOCK = 128


def _fp8_cases(family: str, tilings: tuple) -> list:
  residual = family == "fp8_gemm_residual"
  out = []
  for ti, tiling in enumerate(tilings):
    for si, (m, n, k) in enumerate(_FP8_SHAPES):
      extra = dict(c_shape=(m, n), beta=_FP8_BETAS[(si + ti) % len(_FP8_BETAS)]) if residual else {}
      out.append(Case(family, tiling, False, True, "float8_e4m3fn", "bfloat16", (m, k), (n, k),
                      **extra))
  if residual:  # beta == 0: C (all NaN) must not be read
    m, n, k = _FP8_SHAPES[0]
    out.append(Case(family, tilings[0], False, True, "float8_e4m3fn", "bfloat16", (m, k), (n, k),
                    c_shape=(m, n), beta=0.0, c_nan=True))
  return out


def _fp8_tilings(backend: str, residual: bool) -> tuple:
  """(block_m, block_n, cluster) of the FP8 kernel's forms on `backend` (pairs along N left
  out; the residual target's 128-row ones only): sm100 SM100_FP8_TILINGS; sm90 the
  compiled set; elsewhere (cpu_ffi, reference) the sm100 set, the one a Blackwell GPU runs."""
  forms = tuning.ARCH_FP8_TILINGS.get(backend, tuning.SM100_FP8_TILINGS)
  return tuple((bm, bn, cl) for bm, bn, cl, along_n in forms
               if not along_n and (bm == 128 or not residual))


def _fp8_scales(a, b):
  """(a_scale (M, ceil(K/128)), b_scale (ceil(N/128), ceil(K/128))) float32: powers of two
  in [2^-3, 1] read off the bits of each scale block's first element, so every block is
  weighted differently and a scale taken from the wrong block shows."""
  a8 = np.asarray(a).view(np.uint8)
  b8 = np.asarray(b).view(np.uint8)
  sa = np.exp2(a8[:, ::_FP8_BLOCK].astype(np.int32) % 4 - 3).astype(np.float32)
  sb = np.exp2(b8[::_FP8_BLOCK, ::_FP8_BLOCK].astype(np.int32) % 4 - 3).astype(np.float32)
  return sa, sb


def _fp8_kernel(case: Case, a, b, c):
  from jax_sm100._launch import fp8 as _fp8_launch
  sa, sb = _fp8_scales(a, b)
  settings = tuning.Settings(fp8=tuning.Fp8Config(*case.tiling))
  residual = case.c_shape is not None
  fn = _fp8_launch._kernel(residual, float(case.beta) if residual else 0.0, settings)
  ops = (a, jnp.asarray(sa.T), b, jnp.asarray(sb)) + ((c,) if residual else ())
  return jax.jit(fn)(*ops)


def _fp8_reference(case: Case, a, b, c):
  sa, sb = _fp8_scales(a, b)
  c = c if case.c_shape is not None and case.beta != 0.0 else None
  return jax.jit(lambda a, sa, b, sb, c: _reference.fp8_gemm(
      a, sa, b, sb, c, case.beta, jnp.dtype(case.out_dtype)))(a, sa, b, sb, c)


def _fp8_expected(case: Case, a, b, c):
  """(float64 result of the dequantized inputs, scalar tolerance): one unit in the last
  place of bf16 at the largest value (the final rounding, with margin), plus 2^-12 of the
  largest sum of |terms| (the fp32 partials and promotions, with room for a tensor core
  that keeps fewer bits while it sums one K block), plus the fp32 rounding of beta * c. A
  scale taken from the wrong block, a dropped K block or a layout error moves elements by
  a fair fraction of sqrt(128) times their scale."""
  sa, sb = _fp8_scales(a, b)
  a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
  (m, k), n = a64.shape, b64.shape[0]
  want, absterms = np.zeros((m, n)), np.zeros((m, n))
  for q in range(-(-k // _FP8_BLOCK)):
    ks = slice(q * _FP8_BLOCK, min(k, (q + 1) * _FP8_BLOCK))
    s = sa[:, q, None].astype(np.float64) * np.repeat(sb[:, q], _FP8_BLOCK)[None, :n]
    want += s * (a64[:, ks] @ b64[:, ks].T)
    absterms += s * (np.abs(a64[:, ks]) @ np.abs(b64[:, ks]).T)
  cterm = 0.0
  if case.c_shape is not None and case.beta != 0.0:
    want = want + case.beta * np.asarray(c).astype(np.float64)
    cterm = 2.0**-23 * abs(case.beta) * float(np.abs(np.asarray(c).astype(np.float64)).max())
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * float(np.abs(want).max())
         + 2.0**-12 * float(absterms.max()) + cterm + 1e-30)
  return want, tol


FAMILIES.update({
    name: Family(name, (target,), lambda tilings, name=name: _fp8_cases(name, tilings),
                 lambda backend, residual=residual: _fp8_tilings(backend, residual),
                 _fp8_kernel, _fp8_reference, _fp8_expected)
    for name, target, residual in (("fp8_gemm", "jax_sm100_fp8_gemm", False),
                                   ("fp8_gemm_residual", "jax_sm100_fp8_gemm_residual", True))
})


# ---------------------------------------------------------------------------
# The FP8 quantize family (jax_sm100_quantize_fp8, jax_sm100_quantize_fp8_dual)
# ---------------------------------------------------------------------------
# The quantize kernels are plain CUDA, compiled for every architecture of the build (the
# sm_100a code included) and never run on Blackwell here. A case quantizes x (R, C), N(0, 1)
# rounded to bf16/f16/f32, in block_rows x 128 blocks (tiling = (block_rows, 128, 1)), on
# the single target or (t_block_rows != 0) on the dual one with x^T in t_block_rows x 128
# blocks. The kernels implement the recipe bit for bit (jax_sm100._reference.
# quantize_blockwise), so the result compared is every q and scale as float32,
# concatenated, against a float64-held NumPy model of the recipe, exactly.


@dataclasses.dataclass(frozen=True)
class QuantizeCase(Case):
  """A quantize case (b_shape unused; out_dtype float32: the concatenated q and scales)."""
  t_block_rows: int = 0            # 0: the single target; else the dual target's x^T blocks
  scale_transposed: bool = False   # x's 1x128 scales as the GEMM's a_scale_t (pads of 1)
  scale_t_transposed: bool = False  # the same for x^T's (dual, t_block_rows 1)

  @property
  def layout(self) -> str:
    return "dual" if self.t_block_rows else "x"

  def shapes(self) -> str:
    s = "x".join(map(str, self.a_shape))
    if self.t_block_rows:
      s += f" and x^T in {self.t_block_rows}x128"
    flags = [n for n, f in (("scales", self.scale_transposed),
                            ("x^T scales", self.scale_t_transposed)) if f]
    return s + (f" ({', '.join(flags)} transposed)" if flags else "")

  def describe(self) -> str:
    return (f"{self.family} {self.tiling[0]}x{self.tiling[1]} blocks, {self.layout}, "
            f"{_SHORT[self.in_dtype]}, {self.shapes()}")


# (block_rows, t_block_rows, scale_transposed, scale_t_transposed, x dtype, (R, C)):
# partial blocks both ways, 1x128 and 128x128, transposed scales with their pads, the dual
# target both ways, every input dtype.
_QUANT_CASES = ((1, 0, False, False, "bfloat16", (300, 264)),
                (1, 0, True, False, "float16", (130, 1040)),
                (128, 0, False, False, "float32", (300, 264)),
                (1, 1, True, True, "bfloat16", (130, 264)),
                (128, 128, False, False, "float16", (257, 200)),
                (1, 1, False, False, "float32", (72, 136)))


def _quant_cases(family: str, tilings: tuple) -> list:
  del tilings
  return [QuantizeCase(family, (br, 128, 1), False, False, dt, "float32", shape, (1,),
                       t_block_rows=tbr, scale_transposed=st, scale_t_transposed=stt)
          for br, tbr, st, stt, dt, shape in _QUANT_CASES]


def _quant_kernel(case: QuantizeCase, x, b, c):
  from jax_sm100._launch import quantize as _quant_launch
  br = case.tiling[0]
  if case.t_block_rows:
    fn = _quant_launch._quantize_dual_kernel(case.t_block_rows, case.scale_transposed,
                                              case.scale_t_transposed, br)
    (q, s), (qt, st) = jax.jit(fn)(x)
    parts = (q, s, qt, st)
  else:
    parts = jax.jit(_quant_launch._quantize_kernel(br, case.scale_transposed))(x)
  return jnp.concatenate([p.astype(jnp.float32).ravel() for p in parts])


def _quant_parts(case: QuantizeCase, x, quantize, transpose_scale):
  """q and scales of the case (x's, then x^T's for the dual target) through `quantize`."""
  br = case.tiling[0]
  q, s = quantize(x, br)
  parts = [q, transpose_scale(s) if case.scale_transposed else s]
  if case.t_block_rows:
    qt, st = quantize(x.T, case.t_block_rows)
    parts += [qt, transpose_scale(st) if case.scale_t_transposed else st]
  return parts


def _quant_reference(case: QuantizeCase, x, b, c):
  from jax_sm100._launch.fp8 import transpose_a_scale
  def f(x):
    parts = _quant_parts(case, x, lambda v, br: _reference.quantize_blockwise(
        v, (br, 128), jnp.float8_e4m3fn), transpose_a_scale)
    return jnp.concatenate([p.astype(jnp.float32).ravel() for p in parts])
  return jax.jit(f)(x)


def _quant_model(x, block_rows: int):
  """The recipe in NumPy float32 (each operation correctly rounded, as every
  implementation computes it): amax per block, scale = amax * f32(1/448) (1 where 0),
  q = e4m3(clip(x * (1 / scale), -448, 448)), round to nearest even."""
  x = np.asarray(x).astype(np.float32)
  r, c = x.shape
  nr, nc = -(-r // block_rows), -(-c // 128)
  xb = np.zeros((nr * block_rows, nc * 128), np.float32)
  xb[:r, :c] = x
  xb = xb.reshape(nr, block_rows, nc, 128)
  amax = np.abs(xb).max(axis=(1, 3))
  scale = (amax * np.float32(1.0 / 448.0)).astype(np.float32)
  scale = np.where(scale == 0, np.float32(1.0), scale).astype(np.float32)
  inv = (np.float32(1.0) / scale).astype(np.float32)
  q = np.clip(xb * inv[:, None, :, None], np.float32(-448.0), np.float32(448.0)).astype(np.float32)
  q = q.astype(jnp.float8_e4m3fn).reshape(nr * block_rows, nc * 128)[:r, :c]
  return q, scale


def _quant_expected(case: QuantizeCase, x, b, c):
  """(the model's q and scales as float64, a tolerance far below one e4m3 step): the
  kernels agree with the recipe bit for bit."""
  def transpose_scale(s):  # a_scale_t with the GEMM's pad columns (1s)
    st = np.ones((s.shape[1], -(-s.shape[0] // 4) * 4), np.float32)
    st[:, :s.shape[0]] = s.T
    return st
  parts = _quant_parts(case, np.asarray(x), _quant_model, transpose_scale)
  want = np.concatenate([np.asarray(p).astype(np.float64).ravel() for p in parts])
  return want, 1e-30


FAMILIES["fp8_quantize"] = Family(
    "fp8_quantize", ("jax_sm100_quantize_fp8", "jax_sm100_quantize_fp8_dual"),
    lambda tilings: _quant_cases("fp8_quantize", tilings),
    lambda backend: ((1, 128, 1), (128, 128, 1)), _quant_kernel, _quant_reference,
    _quant_expected)

# The MXFP8 block-scaled GEMM (jax_sm100_mxfp8_gemm): its cases (with b's element type
# beside a's), launches and float64 reference are in jax_sm100/_mxfp8.py (selftest_*).
_SHORT.update({"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"})
FAMILIES["mxfp8"] = Family("mxfp8", (_mxfp8.TARGET,),
                           lambda tilings: _mxfp8.selftest_cases(Case, tilings),
                           _mxfp8.selftest_tilings, _mxfp8.selftest_kernel,
                           _mxfp8.selftest_reference, _mxfp8.selftest_expected)


# ---------------------------------------------------------------------------
# Running the cases
# ---------------------------------------------------------------------------

_seed: int | None = None


def configure(*, enabled: bool | None = None, seed: int | None = None) -> None:
  """enabled: False skips the first-use self-test (the unproven kernels then run
  unchecked), True turns it on again (the default, unless JAX_SM100_SELFTEST=0 was set
  at import). seed: the seed of the cases' random data (default: one drawn per process,
  printed with every result). Results already kept stay (a family runs once per process)."""
  global _seed
  if enabled is not None:
    if not isinstance(enabled, (bool, np.bool_)):
      raise ValueError(f"jax_sm100.selftest.configure(enabled=...) takes a bool; got {enabled!r}.")
    _selftest_guard.set_enabled(bool(enabled))
  if seed is not None:
    _seed = int(seed)


def enabled() -> bool:
  """Whether the first-use self-test runs."""
  return _selftest_guard.enabled()


def current_seed() -> int:
  """The seed of the cases' data in this process."""
  global _seed
  if _seed is None:
    _seed = secrets.randbits(31)
  return _seed


def status() -> tuple:
  """The first-use self-test results of this process (_selftest_guard.FamilyResult)."""
  return _selftest_guard.results()


def family_of(target: str) -> str | None:
  """The family whose self-test guards FFI target `target` (None: none does)."""
  for fam in FAMILIES.values():
    if target in fam.targets:
      return fam.name
  return None


def cases(family: str, backend: str | None = None) -> list:
  """The family's cases on `backend` (default: backend())."""
  fam = FAMILIES[family]
  return fam.make_cases(fam.tilings(backend or _backend.backend()))


def _data(case: Case, rng):
  """Normal(0, 1) operands already rounded to their dtypes (exact in float64)."""
  def arr(shape, dtype):
    return (rng.standard_normal(shape).astype(np.float32)).astype(jnp.dtype(dtype))
  a, b = arr(case.a_shape, case.in_dtype), arr(case.b_shape, case.in_dtype)
  c = None
  if case.c_shape is not None:
    c = (np.full(case.c_shape, np.nan, np.float32).astype(jnp.dtype(case.out_dtype))
         if case.c_nan else arr(case.c_shape, case.out_dtype))
  return a, b, c


def launch_kernel(case: Case, a, b, c):
  """Runs `case` on its family's kernel (the one place the self-test launches one; tests
  replace it to plant faults)."""
  return FAMILIES[case.family].kernel(case, a, b, c)


def launch_reference(case: Case, a, b, c):
  """Runs `case` on the reference path (where the ops take it)."""
  return FAMILIES[case.family].reference(case, a, b, c)


def _is_runtime_error(e: BaseException) -> bool:
  return any(t.__name__ in ("XlaRuntimeError", "JaxRuntimeError") for t in type(e).__mro__)


def run_case(case: Case, path: str, rng) -> CaseResult:
  """Runs one case on `path` ('kernel' or 'reference') on the default device, eagerly
  (also while a caller is being traced), and compares with float64."""
  a, b, c = _data(case, rng)
  want, tol = FAMILIES[case.family].expected(case, a, b, c)
  dev = _backend._default_device()
  launch = launch_kernel if path == "kernel" else launch_reference
  token = _explain._RECORDER.set(None)  # the self-test's launches are not the caller's
  try:
    with jax.ensure_compile_time_eval():
      ops = [None if x is None else jax.device_put(x, dev) for x in (a, b, c)]
      got = np.asarray(jax.block_until_ready(launch(case, *ops)))
  except Exception as e:  # a trap or launch failure included: report, never raise
    msg = " ".join(str(e).split())
    return CaseResult(case, path, tol=tol, error=f"{type(e).__name__}: {msg[:400]}",
                      runtime_error=_is_runtime_error(e))
  finally:
    _explain._RECORDER.reset(token)
  if got.shape != want.shape or got.dtype != np.dtype(jnp.dtype(case.out_dtype)):
    return CaseResult(case, path, tol=tol, error=f"result {got.shape} {got.dtype}, expected "
                      f"{want.shape} {case.out_dtype}")
  got64 = got.astype(np.float64)
  finite = bool(np.isfinite(got64).all())
  err = float(np.nanmax(np.abs(got64 - want))) if finite else math.inf
  return CaseResult(case, path, err, tol, nonfinite=not finite)


def _path(family: str, backend: str) -> tuple[str, str | None]:
  """('kernel', None) when the family's targets launch on `backend`, else
  ('reference', why)."""
  if backend == "reference":
    return "reference", f"backend() is 'reference': {_backend.why_reference()}"
  ctx = _backend.context()
  for t in FAMILIES[family].targets:
    why = ctx.why_not(t)
    if why is not None:
      return "reference", why
  return "kernel", None


def run_family(family: str, backend: str | None = None, *, seed: int | None = None,
               stop_at_first_failure: bool = False, path: str | None = None) -> list:
  """Runs the family's cases through `path` ('kernel' or 'reference'; default: the path
  its ops take on `backend`, default backend()); a list of CaseResult."""
  backend = backend or _backend.backend()
  path = path or _path(family, backend)[0]
  base = current_seed() if seed is None else seed
  out = []
  for i, case in enumerate(cases(family, backend)):
    r = run_case(case, path, np.random.default_rng([base, i]))
    out.append(r)
    if stop_at_first_failure and not r.passed:
      break
  return out


# ---------------------------------------------------------------------------
# The report (python -m jax_sm100.selftest)
# ---------------------------------------------------------------------------

_BACKEND_WORDS = {
    "sm100": "the sm_100a kernels (compiled, SASS-checked, emulated; never run on hardware "
             "by this project before)",
    "sm90": "the sm_90a kernels",
    "cpu_ffi": "the FFI targets' CPU handlers (plain C++ on the host; no GPU kernel ran)",
}


def _cuda_versions() -> str | None:
  """CUDA runtime / driver versions as jaxlib's CUDA plugin reports them (None: no plugin)."""
  try:
    from jax._src.lib import cuda_versions as cv
  except ImportError:
    return None
  if cv is None:
    return None
  parts = []
  for label, fn in (("CUDA runtime", "cuda_runtime_get_version"),
                    ("CUDA driver API", "cuda_driver_get_version"),
                    ("cuDNN", "cudnn_get_version")):
    try:
      parts.append(f"{label} {getattr(cv, fn)()}")
    except Exception:  # not in this jaxlib, or no driver
      pass
  return ", ".join(parts) or None


def _nvidia_smi() -> str | None:
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return None
  lines = [l.strip() for l in out.stdout.splitlines() if l.strip()]
  return "; ".join(lines) if out.returncode == 0 and lines else None


def _environment(backend: str) -> list:
  import jax_sm100
  dev = _backend._default_device()
  cc = _backend._compute_capability(dev)
  lines = [f"device:      {getattr(dev, 'device_kind', '?')} ({dev.platform}"
           + (f", compute capability {cc[0]}.{cc[1]}" if cc else "")
           + f"; {jax.device_count()} device(s))"]
  lines.append(f"platform:    {getattr(dev.client, 'platform_version', '?')}")
  cuda = _cuda_versions()
  if cuda:
    lines.append(f"cuda:        {cuda}")
  smi = _nvidia_smi()
  if smi:
    lines.append(f"nvidia-smi:  {smi} (name, driver)")
  try:
    import jaxlib
    jaxlib_version = jaxlib.__version__
  except (ImportError, AttributeError):
    jaxlib_version = "?"
  lines.append(f"versions:    jax {jax.__version__}, jaxlib {jaxlib_version}, jax_sm100 "
               f"{jax_sm100.__version__}, numpy {np.__version__}, python "
               f"{sys.version.split()[0]}")
  if _ffi_registry._ffi is None:
    ext = f"not loaded ({_ffi_registry.load_error})"
  elif _ffi_registry.has_cuda():
    ext = (f"CUDA archs {', '.join(_ffi_registry.cuda_archs()) or 'none'}; sm_100a kernels: "
           f"{', '.join(sorted(_ffi_registry.sm100_targets())) or 'none'}")
  else:
    ext = "built without CUDA kernels"
  lines.append(f"extension:   {ext}")
  words = _BACKEND_WORDS.get(backend) or (
      f"the pure-JAX reference path: no kernel ran ({_backend.why_reference()})")
  lines.append(f"backend:     {backend}: {words}")
  guard = "on" if enabled() else "off"
  lines.append(f"first-use self-test: {guard} (unproven backends: "
               f"{', '.join(sorted(_selftest_guard.unproven_backends()))})")
  return lines


def report(backend: str | None = None, families=None, seed: int | None = None
           ) -> tuple[str, bool]:
  """Runs every case of `families` (default: all) on the default device through the path
  the ops take on `backend` (default: backend()); (report text, all passed)."""
  backend = backend or _backend.backend()
  seed = current_seed() if seed is None else seed
  lines = ["jax_sm100 known-answer self-test", *_environment(backend), f"seed:        {seed}"]
  all_ok = True
  header = (f"{'tiling':12s} {'layout':6s} {'dtypes':10s} {'operands':54s} "
            f"{'max abs err':>11s} {'tolerance':>10s}  result")
  for name in families or FAMILIES:
    path, why = _path(name, backend)
    fam = FAMILIES[name]
    if path == "reference":
      where = f"REFERENCE, no kernel ran: {why}"
    elif backend == "cpu_ffi":
      where = f"the CPU handlers of {', '.join(fam.targets)} (no GPU kernel ran)"
    else:
      where = f"the {backend} kernel ({', '.join(fam.targets)})"
    results = run_family(name, backend, seed=seed)
    passed = sum(r.passed for r in results)
    all_ok &= passed == len(results)
    lines += ["", f"family {name}: path {where}", header]
    for r in results:
      c = r.case
      scal = f" a={c.alpha:g} b={c.beta:g}" if c.c_shape is not None else ""
      ops = (c.shapes() + scal)
      result = ("pass" if r.passed else f"FAIL: {r.error}" if r.error
                else "FAIL (NaN or Inf)" if r.nonfinite else "FAIL")
      lines.append(f"{'%dx%d c%d' % c.tiling:12s} {c.layout:6s} "
                   f"{_SHORT[c.in_dtype] + '->' + _SHORT[c.out_dtype]:10s} {ops:54s} "
                   f"{r.max_abs_err:11.3e} {r.tol:10.3e}  {result}")
      if r.runtime_error:
        lines.append("  (an XLA runtime error, e.g. a kernel trap: the GPU context may be "
                     "unusable, so the cases after it may fail for that reason alone)")
    lines.append(f"family {name}: {passed} of {len(results)} cases passed")
  lines += ["", "RESULT: " + ("all cases passed" if all_ok else "FAILED")]
  return "\n".join(lines), all_ok


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m jax_sm100.selftest",
      description="Run jax_sm100's known-answer self-test on the default device and print "
                  "a report to paste into an issue. Exit status 0 only if every case passed.")
  parser.add_argument("--seed", type=int, default=None, help="seed of the random data")
  parser.add_argument("--family", action="append", choices=sorted(FAMILIES),
                      help="run only this family (repeatable; default: all)")
  args = parser.parse_args(argv)
  text, ok = report(families=args.family, seed=args.seed)
  print(text, flush=True)
  return 0 if ok else 1


if __name__ == "__main__":
  # Run in the package's own module object (not this __main__ copy).
  from jax_sm100 import selftest as _selftest
  sys.exit(_selftest.main())
