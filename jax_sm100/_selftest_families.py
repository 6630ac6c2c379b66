"""The self-test's kernel families: for each, its FFI targets, its known-answer cases
given the kernel's tilings, how one case launches the kernel and the reference path, and
the float64 result with its tolerance (jax_sm100.selftest runs them).

Families: gemm and gemm_residual (bf16/fp16 GEMM), fp8_gemm and fp8_gemm_residual (FP8
blockwise GEMM), fp8_quantize (the quantize targets, with and without a prologue), mxfp8 (MXFP8 block-scaled GEMM;
its cases live in jax_sm100/_mxfp8.py), grouped_gemm, kgrouped_gemm and fp8_grouped_gemm
(the M-grouped, K-grouped and FP8 M-grouped GEMMs; jax_sm100/_selftest_grouped.py),
gemm_bias (the fused bias/activation GEMM), gemm_dact (the activation-backward GEMM;
jax_sm100/_selftest_dact.py). A new family adds an entry to FAMILIES and a
hook in its launch module (_selftest_guard.refusal).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _mxfp8, _reference, tuning
from jax_sm100._launch import gemm as _gemm

# Unit roundoff of each output format (rounding the exact result is off by at most this
# fraction of it).
_UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
_SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32",
          "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


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
class Family:
  """A kernel family: its FFI targets, its cases given the kernel's tilings, and how
  one case launches the kernel and the reference path. A new family adds an entry
  to FAMILIES and a hook in its launch module (_selftest_guard.refusal)."""
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
               if not along_n and (tuning.fp8_residual_has(bm) or not residual))


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


def _fp8_product64(a, b):
  """(the float64 product of the dequantized e4m3 inputs with _fp8_scales, the sum of
  |terms| per element), both (M, N)."""
  sa, sb = _fp8_scales(a, b)
  a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
  (m, k), n = a64.shape, b64.shape[0]
  want, absterms = np.zeros((m, n)), np.zeros((m, n))
  for q in range(-(-k // _FP8_BLOCK)):
    ks = slice(q * _FP8_BLOCK, min(k, (q + 1) * _FP8_BLOCK))
    s = sa[:, q, None].astype(np.float64) * np.repeat(sb[:, q], _FP8_BLOCK)[None, :n]
    want += s * (a64[:, ks] @ b64[:, ks].T)
    absterms += s * (np.abs(a64[:, ks]) @ np.abs(b64[:, ks]).T)
  return want, absterms


def _fp8_expected(case: Case, a, b, c):
  """(float64 result of the dequantized inputs, scalar tolerance): one unit in the last
  place of bf16 at the largest value (the final rounding, with margin), plus 2^-12 of the
  largest sum of |terms| (the fp32 partials and promotions, with room for a tensor core
  that keeps fewer bits while it sums one K block), plus the fp32 rounding of beta * c. A
  scale taken from the wrong block, a dropped K block or a layout error moves elements by
  a fair fraction of sqrt(128) times their scale."""
  want, absterms = _fp8_product64(a, b)
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
# The dual kernel's prologues (jax_sm100_quantize_fp8_act_dual, _dact_dual) are tested
# with relu, exact in every dtype: act quantizes relu(x); dact quantizes dz = x * relu'(z)
# with z = x's rows reversed, and writes dz's column sums per 128-row block, which the
# model adds in the kernel's order (rows 0-63 and 64-127 each in order, then the two) in
# float32: exact too. (The activations' fp32 math is the GEMM epilogues', self-tested with
# the fp8_gemm_bias family.)


@dataclasses.dataclass(frozen=True)
class QuantizeCase(Case):
  """A quantize case (b_shape unused; out_dtype float32: the concatenated q and scales)."""
  t_block_rows: int = 0            # 0: the single target; else the dual target's x^T blocks
  scale_transposed: bool = False   # x's 1x128 scales as the GEMM's a_scale_t (pads of 1)
  scale_t_transposed: bool = False  # the same for x^T's (dual, t_block_rows 1)
  prologue: str = ""               # "act": relu(x); "dact": x * relu'(z) and its sums

  @property
  def layout(self) -> str:
    return "dual" if self.t_block_rows else "x"

  def shapes(self) -> str:
    s = "x".join(map(str, self.a_shape))
    if self.t_block_rows:
      s += f" and x^T in {self.t_block_rows}x128"
    flags = [n for n, f in (("scales", self.scale_transposed),
                            ("x^T scales", self.scale_t_transposed)) if f]
    s += f" ({', '.join(flags)} transposed)" if flags else ""
    return {"act": "relu of ", "dact": "x * relu'(z) of "}.get(self.prologue, "") + s

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
# The prologue targets at their block shapes (act: 1x128 both ways; dact: 1x128 and x^T in
# 128x128), partial blocks, both scale layouts.
_PROLOGUE_CASES = (("act", 1, 1, True, True, "bfloat16", (300, 264)),
                   ("act", 1, 1, False, False, "float16", (130, 136)),
                   ("dact", 1, 128, True, False, "bfloat16", (300, 264)),
                   ("dact", 1, 128, False, False, "float32", (130, 200)))


def _quant_cases(family: str, tilings: tuple) -> list:
  del tilings
  return ([QuantizeCase(family, (br, 128, 1), False, False, dt, "float32", shape, (1,),
                        t_block_rows=tbr, scale_transposed=st, scale_t_transposed=stt)
           for br, tbr, st, stt, dt, shape in _QUANT_CASES] +
          [QuantizeCase(family, (br, 128, 1), False, False, dt, "float32", shape, (1,),
                        t_block_rows=tbr, scale_transposed=st, scale_t_transposed=stt,
                        prologue=pro)
           for pro, br, tbr, st, stt, dt, shape in _PROLOGUE_CASES])


def _prologue_operands(case: QuantizeCase, x, xp):
  """(the values quantized, z) of a prologue case, in the array module xp."""
  if case.prologue == "act":
    return xp.maximum(x, xp.zeros((), x.dtype)), None
  z = xp.flip(x, 0)
  return x * (z > 0).astype(x.dtype), z  # x * relu'(z): exact


def _quant_kernel(case: QuantizeCase, x, b, c):
  from jax_sm100._launch import quantize as _quant_launch
  br = case.tiling[0]
  if case.prologue == "act":
    fn = _quant_launch._act_dual_kernel("relu", case.scale_transposed, case.scale_t_transposed)
    (q, s), (qt, st) = jax.jit(fn)(x)
    parts = (q, s, qt, st)
  elif case.prologue == "dact":
    fn = _quant_launch._dact_dual_kernel("relu", case.scale_transposed)
    (q, s), (qt, st), sums = jax.jit(fn)(x, jnp.flip(x, 0))
    parts = (q, s, qt, st, sums)
  elif case.t_block_rows:
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
    v = _prologue_operands(case, x, jnp)[0] if case.prologue else x
    parts = _quant_parts(case, v, lambda v, br: _reference.quantize_blockwise(
        v, (br, 128), jnp.float8_e4m3fn), transpose_a_scale)
    if case.prologue == "dact":
      r, c = v.shape
      rp = -(-r // 128) * 128
      parts.append(jnp.sum(jnp.pad(v.astype(jnp.float32), ((0, rp - r), (0, 0))).reshape(
          rp // 128, 128, c), axis=1))
    return jnp.concatenate([p.astype(jnp.float32).ravel() for p in parts])
  return jax.jit(f)(x)


def _block_sums_model(v):
  """Column sums of v per 128-row block in the dact kernel's order, float32."""
  v = np.asarray(v).astype(np.float32)
  r, c = v.shape
  out = np.zeros((-(-r // 128), c), np.float32)
  for b in range(out.shape[0]):
    halves = [np.zeros(c, np.float32), np.zeros(c, np.float32)]
    for i in range(b * 128, min(r, b * 128 + 128)):
      h = (i - b * 128) // 64
      halves[h] = (halves[h] + v[i]).astype(np.float32)
    out[b] = (halves[0] + halves[1]).astype(np.float32)
  return out


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
  x = np.asarray(x)
  v = _prologue_operands(case, x, np)[0] if case.prologue else x
  parts = _quant_parts(case, v, _quant_model, transpose_scale)
  want = np.concatenate([np.asarray(p).astype(np.float64).ravel() for p in parts])
  if case.prologue != "dact":
    return want, 1e-30
  # The sums: exact for the kernel (the model adds in its order); the reference path's
  # jnp.sum adds in another, within 130 ulps of the absolute sums.
  sums = _block_sums_model(v).astype(np.float64)
  v64 = np.abs(np.asarray(v).astype(np.float64))
  r = v64.shape[0]
  abs_sums = np.pad(v64, ((0, -r % 128), (0, 0))).reshape(-1, 128, v64.shape[1]).sum(1)
  tol = np.concatenate([np.full(want.shape, 1e-30), (130 * 2.0**-24 * abs_sums + 1e-30).ravel()])
  return np.concatenate([want, sums.ravel()]), tol


FAMILIES["fp8_quantize"] = Family(
    "fp8_quantize", ("jax_sm100_quantize_fp8", "jax_sm100_quantize_fp8_dual",
                     "jax_sm100_quantize_fp8_act_dual", "jax_sm100_quantize_fp8_dact_dual"),
    lambda tilings: _quant_cases("fp8_quantize", tilings),
    lambda backend: ((1, 128, 1), (128, 128, 1)), _quant_kernel, _quant_reference,
    _quant_expected)

# The MXFP8 block-scaled GEMM (jax_sm100_mxfp8_gemm): its cases (with b's element type
# beside a's), launches and float64 reference are in jax_sm100/_mxfp8.py (selftest_*).
FAMILIES["mxfp8"] = Family("mxfp8", (_mxfp8.TARGET,),
                           lambda tilings: _mxfp8.selftest_cases(Case, tilings),
                           _mxfp8.selftest_tilings, _mxfp8.selftest_kernel,
                           _mxfp8.selftest_reference, _mxfp8.selftest_expected)

# ---------------------------------------------------------------------------
# The fused bias/activation GEMM (jax_sm100_gemm_bias: matmul_bias's forward). A case is
# z = op(a) @ op(b) + bias, d = act(z) (and pre = z, returned after d along the last
# axis); the bias is b's first K row (fresh with the data, N(0, 1), f32).
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BiasCase(Case):
  """A bias/activation case: `activation` a canonical name (_activations.CODES)."""
  activation: str = "none"
  has_bias: bool = True
  want_pre: bool = False

  def shapes(self) -> str:
    return (super().shapes() + f", {self.activation}" + (" + bias" if self.has_bias else "")
            + (", pre" if self.want_pre else ""))


_BIAS_DTYPES = (("bfloat16", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"),
                ("float16", "float16"))  # the pairs the bias kernels are compiled for


def _bias_cases(family: str, tilings: tuple) -> list:
  """Every activation on every tiling, bias and pre on and off in rotation, the shapes,
  dtypes and layouts of the gemm family rotated."""
  from jax_sm100 import _activations
  out = []
  for ti, tiling in enumerate(tilings):
    for ai, act in enumerate(_activations.CODES):
      i = ti * len(_activations.CODES) + ai
      ta, tb = _LAYOUTS[i % len(_LAYOUTS)]
      din, dout = _BIAS_DTYPES[(ai + 2 * ti) % len(_BIAS_DTYPES)]
      m, n, k = _SHAPES[(ai + ti) % len(_SHAPES)]
      a, b = _stored(m, n, k, ta, tb)
      out.append(BiasCase(family, tiling, ta, tb, din, dout, a, b, activation=act,
                          has_bias=(i % 3) != 2, want_pre=(i % 2) == 0))
  return out


def _case_bias(case: BiasCase, b):
  """The case's bias, f32 (N,), or None: b's first K row."""
  if not case.has_bias:
    return None
  row = b[:, 0] if case.trans_b else b[0, :]
  return jnp.asarray(row).astype(jnp.float32)


def _bias_kernel(case: BiasCase, a, b, c):
  from jax_sm100._launch import bias as _launch_bias
  settings = tuning.Settings(gemm=tuning.GemmConfig(*case.tiling))
  out = np.dtype(jnp.dtype(case.out_dtype))
  fn = _launch_bias._kernel(case.trans_a, case.trans_b, case.activation, case.want_pre, out,
                            settings)
  bias = _case_bias(case, b)
  bias = jnp.zeros((0,), jnp.float32) if bias is None else bias
  d, pre = jax.jit(fn)(a, b, bias)
  return jnp.concatenate([d, pre], axis=-1) if case.want_pre else d


def _bias_reference(case: BiasCase, a, b, c):
  from jax_sm100 import _activations
  d, pre = jax.jit(lambda a, b, bias: _activations.reference(
      a, b, bias, case.trans_a, case.trans_b, case.activation, jnp.dtype(case.out_dtype),
      case.want_pre))(a, b, _case_bias(case, b))
  return jnp.concatenate([d, pre], axis=-1) if case.want_pre else d


def _act64(name: str, z):
  if name == "relu":
    return np.maximum(z, 0.0)
  if name == "gelu_tanh":
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))
  if name == "gelu_erf":
    return 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
  if name == "silu":
    return z / (1.0 + np.exp(-z))
  return z


def _bias_expected(case: BiasCase, a, b, c):
  """(float64 result, per-element tolerance): one unit in the last place of the output at
  the element's own |z| (its pre-activation: an epilogue may round z before the
  activation), plus _gemm_expected's bound on the fp32 accumulation and the fp32 rounding
  of the bias add, times 1.13 (the largest |act'|), plus 4 fp32 ulps of the largest |z|
  (the fp32 activation). Per element, because with K ~ 1000 the largest |z| is ~140 and
  one ulp there (0.14 in f16, 1.1 in bf16) would hide a wrong activation, whose gap is
  largest near |z| ~ 1 (gelu vs relu: 0.17). A bias one column off, pre taken after the
  activation or the activation applied twice is O(0.1) or more (the data is N(0, 1))."""
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  if case.trans_a:
    a64 = np.swapaxes(a64, -1, -2)
  if case.trans_b:
    b64 = np.swapaxes(b64, -1, -2)
  z = a64 @ b64
  bias = _case_bias(case, b)
  if bias is not None:
    z = z + np.asarray(bias, np.float64)
  zmax = float(np.abs(z).max())
  acc = 8.0 * math.sqrt(max(case.k, 1)) * 2.0**-24 * float((np.abs(a64) @ np.abs(b64)).max())
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * np.abs(z) + 1.13 * (acc + 2.0**-23 * zmax)
         + 4.0 * 2.0**-24 * zmax + 1e-30)
  d = _act64(case.activation, z)
  if case.want_pre:
    return np.concatenate([d, z], axis=-1), np.concatenate([tol, tol], axis=-1)
  return d, tol


FAMILIES["gemm_bias"] = Family("gemm_bias", ("jax_sm100_gemm_bias",),
                               lambda tilings: _bias_cases("gemm_bias", tilings),
                               _gemm_tilings, _bias_kernel, _bias_reference, _bias_expected)


# The grouped and FP8 bias families live in their own modules; importing them registers
# them.
from jax_sm100 import _selftest_dact, _selftest_fp8_bias, _selftest_grouped  # noqa: E402,F401
