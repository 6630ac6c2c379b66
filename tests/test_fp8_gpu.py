"""GPU tests of the sm_90a blockwise-scaled FP8 GEMM (jax_sm100_fp8_gemm[_residual]) and the
public FP8 ops on it (the quantize kernels: test_quantize_fp8_gpu.py).

Every test is marked `gpu` and skipped unless the default device is an sm_90 GPU with
the FP8 targets registered. References:
  * GEMM: float64 NumPy on the DEQUANTIZED inputs (q * scale), fresh random data per
    test; pass = DeepGEMM's calc_diff < 1e-3 and ||out - ref|| / ||ref|| < 2e-2, no NaN.
    Unwritten elements are caught by aliasing the output to a NaN-filled C of the
    residual target with beta == 0 (which never reads C): any element the kernel misses
    stays NaN.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402

try:
  from jax_sm100 import tuning  # noqa: E402
except ImportError:  # an installed jax_sm100 older than the checkout: collection still works
  tuning = None

from conftest import calc_diff, np_dequantize, np_quantize_f32  # noqa: E402

QUANT = "jax_sm100_quantize_fp8"
DUAL = "jax_sm100_quantize_fp8_dual"
FP8 = "jax_sm100_fp8_gemm"
FP8_RES = "jax_sm100_fp8_gemm_residual"
E4M3 = jnp.float8_e4m3fn


# conftest.py skips gpu-marked tests unless an sm_90 GPU is the default device.
pytestmark = pytest.mark.gpu


def test_kernel_targets_are_registered():
  # On an sm_90 GPU a build without these kernels must fail, not skip.
  missing = {QUANT, DUAL, FP8, FP8_RES} - set(reg.registered_targets())
  assert not missing, f"FFI targets not registered: {sorted(missing)}"


def _cdiv(a, b):
  return -(-a // b)


# ---------------------------------------------------------------------------
# FFI wrappers
# ---------------------------------------------------------------------------

def ffi_quantize(x, block_rows, scale_transposed=False):
  r, c = x.shape
  if block_rows == 1:
    sshape = (_cdiv(c, 128), _cdiv(r, 4) * 4) if scale_transposed else (r, _cdiv(c, 128))
  else:
    sshape = (_cdiv(r, 128), _cdiv(c, 128))
  out = (jax.ShapeDtypeStruct((r, c), E4M3), jax.ShapeDtypeStruct(sshape, jnp.float32))
  return jax.ffi.ffi_call(QUANT, out)(x, block_rows=np.int32(block_rows),
                                      scale_transposed=np.int32(scale_transposed))


def a_scale_t(a_scale):
  """(M, Kb) -> the kernel's (Kb, round_up(M, 4)) layout (pad entries 1)."""
  m = a_scale.shape[0]
  return jnp.pad(a_scale.T, ((0, 0), (0, _cdiv(m, 4) * 4 - m)), constant_values=1.0)


# Kernel forms: (block_m, block_n, cluster, pair_along_n), the FFI attributes that name one
# compiled kernel (the valid set of the handler). 128-row tiles promote overlapped (the
# next K block's wgmmas run during this one's promotion) and chain tiles; cluster 2 is a
# pair along M sharing B. 192 rows: three math warpgroups, one CTA. 256 rows: two
# 128-row waves per K block, one CTA or a pair along N sharing A. The residual target
# has the 128-row forms only.
FORMS = {"128x64_c1": (128, 64, 1, False), "128x64_c2": (128, 64, 2, False),
         "128x128_c1": (128, 128, 1, False), "128x128_c2": (128, 128, 2, False),
         "192x128_c1": (192, 128, 1, False), "256x128_c1": (256, 128, 1, False),
         "256x128_c2n": (256, 128, 2, True)}
RESIDUAL_FORMS = {k: v for k, v in FORMS.items() if v[0] == 128}


def fp8_attrs(m, n, k, form=None, group_m=8, residual=False):
  """The tiling attributes of one launch: `form` with group_m, or (form None) the
  library's default choice for the shape (jax_sm100.tuning, the rule the ops use)."""
  if form is None:
    assert tuning is not None, "jax_sm100.tuning is missing: rebuild/reinstall the checkout"
    return tuning.fp8_config(m, n, k, residual=residual).attributes()
  bm, bn, cluster, pair_along_n = form
  return dict(block_m=np.int32(bm), block_n=np.int32(bn), cluster=np.int32(cluster),
              pair_along_n=bool(pair_along_n), group_m=np.int32(group_m))


def ffi_fp8(a, sa, b, sb, *, c=None, beta=0.0, poison=False, form=None, group_m=8):
  """d = (a*sa) @ (b*sb)^T (+ beta c), sa (M, Kb) passed to the kernel transposed, on
  kernel `form` (None: the default choice for the shape).
  poison: residual target with beta 0 and C = NaN aliased to d, so unwritten elements of
  d stay NaN (with beta == 0 the residual target runs the plain kernel, every form)."""
  m, n, k = a.shape[0], b.shape[0], a.shape[1]
  out = jax.ShapeDtypeStruct((m, n), jnp.bfloat16)
  sa_arg = a_scale_t(sa)
  residual = c is not None and beta != 0.0
  attrs = fp8_attrs(m, n, k, form, group_m, residual)
  if poison:
    assert c is None
    nan_c = jnp.full((m, n), jnp.nan, jnp.bfloat16)
    f = jax.ffi.ffi_call(FP8_RES, out, input_output_aliases={4: 0})
    return jax.jit(lambda *o: f(*o, beta=np.float32(0.0), **attrs), donate_argnums=4)(
        a, sa_arg, b, sb, nan_c)
  if c is None:
    return jax.jit(lambda *o: jax.ffi.ffi_call(FP8, out)(*o, **attrs))(a, sa_arg, b, sb)
  f = jax.ffi.ffi_call(FP8_RES, out)
  return jax.jit(lambda *o: f(*o, beta=np.float32(beta), **attrs))(a, sa_arg, b, sb, c)


def _bits_equal(x, y):
  x, y = np.asarray(x), np.asarray(y)
  if x.dtype == np.float32:
    nan = np.isnan(x) & np.isnan(y)
    return bool(np.all((x.view(np.uint32) == y.view(np.uint32)) | nan))
  xf, yf = x.astype(np.float32), y.astype(np.float32)
  nan = np.isnan(xf) & np.isnan(yf)
  return bool(np.all((x.view(np.uint8) == y.view(np.uint8)) | nan))


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def make_operands(rng, m, n, k, *, row_spread=0.0, outliers=0.0):
  """Quantized a (1x128) and b (128x128) from random float32 data.

  row_spread: rows of a and b multiplied by 10**U(-spread, spread) (scales spanning
  orders of magnitude); outliers: that fraction of entries multiplied by 100.
  """
  x = rng.standard_normal((m, k)).astype(np.float32)
  w = rng.standard_normal((n, k)).astype(np.float32)
  if row_spread:
    x *= (10.0 ** rng.uniform(-row_spread, row_spread, (m, 1))).astype(np.float32)
    w *= (10.0 ** rng.uniform(-row_spread, row_spread, (n, 1))).astype(np.float32)
  if outliers:
    x[rng.random(x.shape) < outliers] *= 100.0
    w[rng.random(w.shape) < outliers] *= 100.0
  a, sa = np_quantize_f32(x, (1, 128))
  b, sb = np_quantize_f32(w, (128, 128))
  return (jnp.asarray(a), jnp.asarray(sa), jnp.asarray(b), jnp.asarray(sb))


def reference(a, sa, b, sb, c=None, beta=0.0):
  ad = np_dequantize(np.asarray(a), np.asarray(sa), (1, 128))
  bd = np_dequantize(np.asarray(b), np.asarray(sb), (128, 128))
  ref = ad @ bd.T
  if c is not None and beta != 0.0:
    ref = ref + beta * np.asarray(jnp.asarray(c).astype(jnp.float32), np.float64)
  return ref


def check(got, ref, what=""):
  got = np.asarray(jnp.asarray(got).astype(jnp.float32), np.float64)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  assert np.isfinite(got).all(), f"{what}: {np.count_nonzero(~np.isfinite(got))} non-finite outputs"
  diff = calc_diff(got, ref)
  rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)
  assert diff < 1e-3, f"{what}: calc_diff {diff:.3g}"
  assert rel < 2e-2, f"{what}: relative error {rel:.3g}"
  return diff, rel


# ---------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------

SHAPES = [
    (256, 256, 512),     # whole tiles
    (1, 256, 256),       # M = 1 (decode)
    (16, 512, 384),      # tiny M
    (200, 136, 208),     # partial M, N (not a multiple of 128), partial K block
    (130, 520, 1040),    # partial everything, several K blocks
    (1024, 4096, 256),   # more tiles than SMs (persistent loop)
    (64, 256, 16384),    # large K (128 K blocks, many promotions)
    (32, 192, 112),      # a single, partial K block
]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_fp8_gemm_random(rng, m, n, k, form):
  a, sa, b, sb = make_operands(rng, m, n, k)
  got = ffi_fp8(a, sa, b, sb, poison=True, form=FORMS[form])
  check(got, reference(a, sa, b, sb), f"{m}x{n}x{k} {form}")


@pytest.mark.parametrize("form", list(FORMS))
def test_fp8_gemm_partial_tiles(rng, form):
  """Every form on partial tiles, with b scales distinct per 128-row block (a tile
  reading another block's scale shows). M = 300: 3 M tiles of 128 (2 of 192 or 256), so
  the last pair along M has a CTA without a tile and a 256-row tile has a dead second
  wave; N = 1096: 9 N tiles of 128 (18 of 64), so the last pair along N has a CTA whose
  N tile lies past N."""
  m, n, k = 300, 1096, 640
  a, sa, b, sb = make_operands(rng, m, n, k)
  sb = sb * jnp.asarray((2.0 ** np.arange(sb.shape[0]))[:, None], jnp.float32)
  check(ffi_fp8(a, sa, b, sb, poison=True, form=FORMS[form]), reference(a, sa, b, sb), form)


@pytest.mark.parametrize("m,n,k", [(16, 4096, 1024), (5, 1000, 384), (64, 2048, 512)])
@pytest.mark.parametrize("beta", [None, 0.5])
def test_fp8_gemm_decode_default(rng, m, n, k, beta):
  """Decode-like shapes with the library's default choice (64-wide tiles, one CTA per
  cluster, one M tile of which one math WG holds nothing); plain and residual."""
  a, sa, b, sb = make_operands(rng, m, n, k)
  sb = sb * jnp.asarray((2.0 ** (np.arange(sb.shape[0]) % 4))[:, None], jnp.float32)
  if beta is None:
    check(ffi_fp8(a, sa, b, sb, poison=True), reference(a, sa, b, sb), f"{m}x{n}x{k}")
  else:
    c = jnp.asarray(rng.standard_normal((m, n)), jnp.bfloat16)
    check(ffi_fp8(a, sa, b, sb, c=c, beta=beta), reference(a, sa, b, sb, c, beta),
          f"{m}x{n}x{k} residual")


@pytest.mark.parametrize("form", list(FORMS))
def test_fp8_gemm_many_tiles_per_cta(rng, form):
  """More tiles than CTAs, so each CTA walks several N tiles, with b's scales differing
  by powers of two between its 128-row blocks: the B-scale rows the kernel copies one
  tile ahead (into its second buffer) must be the next tile's, not this one's."""
  m, n, k = 2048, 5120, 256  # 320 tiles of 256x128 (more at 128x128) on 132 SMs
  a, sa, b, sb = make_operands(rng, m, n, k)
  sb = sb * jnp.asarray((2.0 ** (np.arange(sb.shape[0]) % 7))[:, None], jnp.float32)
  check(ffi_fp8(a, sa, b, sb, poison=True, form=FORMS[form]), reference(a, sa, b, sb),
        f"{m}x{n}x{k} {form}")


@pytest.mark.parametrize("group_m", [1, 3, 8])
@pytest.mark.parametrize("form", list(FORMS))
def test_fp8_gemm_tiles_chained(rng, form, group_m):
  """Several tiles per CTA with an odd number of K blocks (3), so consecutive tiles of a
  CTA start in different accumulators of the overlapped loop; A scales that differ by 2^4
  between K blocks (so every K block still weighs in the result) and B scales that
  differ per 128-row block, so a K block promoted with another K block's or tile's
  scales, into the wrong tile, or not at all shows; and a last M tile of 64
  rows, so one math WG has nothing to do there and its chain of tiles breaks and
  restarts. Tile orders with groups of 1, 3 (a partial last group) and 8 M tiles."""
  m, n, k = 2112, 3072, 384  # 17 x 24 tiles of 128x128 on 132 SMs
  a, sa, b, sb = make_operands(rng, m, n, k)
  kscale = jnp.asarray(2.0 ** (4.0 * (np.arange(k // 128) % 2)), jnp.float32)
  sa = sa * kscale[None, :]
  sb = sb * jnp.asarray((2.0 ** (np.arange(sb.shape[0]) % 5))[:, None], jnp.float32)
  check(ffi_fp8(a, sa, b, sb, poison=True, form=FORMS[form], group_m=group_m),
        reference(a, sa, b, sb), f"{m}x{n}x{k} {form} group_m={group_m}")


def test_fp8_gemm_scales_span_orders_of_magnitude(rng):
  a, sa, b, sb = make_operands(rng, 384, 640, 1024, row_spread=3.0)
  check(ffi_fp8(a, sa, b, sb), reference(a, sa, b, sb), "row spread 1e+-3")


def test_fp8_gemm_outliers(rng):
  a, sa, b, sb = make_operands(rng, 256, 384, 2048, outliers=1e-3)
  check(ffi_fp8(a, sa, b, sb), reference(a, sa, b, sb), "outliers")


@pytest.mark.parametrize("form", list(FORMS))
def test_fp8_promotion_is_per_k_block(rng, form):
  """Scales that differ by 2^20 between K blocks: a kernel that accumulated several K
  blocks in the tensor cores before scaling (or mixed up the two accumulators of the
  overlapped loop) could not get this right."""
  m, n, k = 256, 256, 1152
  a, sa, b, sb = make_operands(rng, m, n, k)
  kscale = jnp.asarray(2.0 ** (20.0 * (np.arange(k // 128) % 2)), jnp.float32)
  sa = sa * kscale[None, :]
  check(ffi_fp8(a, sa, b, sb, form=FORMS[form]), reference(a, sa, b, sb),
        f"alternating K-block scales, {form}")


@pytest.mark.parametrize("form", list(RESIDUAL_FORMS))
@pytest.mark.parametrize("beta", [1.0, -0.5])
def test_fp8_gemm_residual(rng, beta, form):
  m, n, k = 330, 392, 512
  a, sa, b, sb = make_operands(rng, m, n, k)
  c = jnp.asarray(rng.standard_normal((m, n)).astype(np.float32) * 8).astype(jnp.bfloat16)
  got = ffi_fp8(a, sa, b, sb, c=c, beta=beta, form=RESIDUAL_FORMS[form])
  check(got, reference(a, sa, b, sb, c, beta), f"residual beta={beta} {form}")


def test_fp8_gemm_residual_beta0_ignores_nan_c(rng):
  m, n, k = 130, 256, 384
  a, sa, b, sb = make_operands(rng, m, n, k)
  c = jnp.full((m, n), jnp.nan, jnp.bfloat16)
  got = ffi_fp8(a, sa, b, sb, c=c, beta=0.0)
  check(got, reference(a, sa, b, sb), "beta=0, C = NaN")


def test_fp8_gemm_rejects_bad_layouts(rng):
  a, sa, b, sb = make_operands(rng, 64, 128, 256)
  with pytest.raises(Exception, match="transposed"):  # (M, Kb) given, (Kb, Mp) needed
    jax.ffi.ffi_call(FP8, jax.ShapeDtypeStruct((64, 128), jnp.bfloat16))(
        a, sa, b, sb, **fp8_attrs(64, 128, 256)).block_until_ready()


@pytest.mark.parametrize("target,form,group_m,msg", [
    (FP8, (128, 192, 1, False), 8, "valid combinations are"),    # 192-wide tiles: deleted
    (FP8, (128, 128, 4, False), 8, "valid combinations are"),    # 2x2 clusters: deleted
    (FP8, (256, 128, 2, False), 8, "valid combinations are"),    # 256 rows, pair along M: deleted
    (FP8, (128, 128, 2, True), 8, "valid combinations are"),     # pairs along N: 256 rows only
    (FP8, (192, 128, 2, False), 8, "valid combinations are"),    # 192 rows: 1 CTA only
    (FP8, (64, 64, 1, False), 8, "valid combinations are"),      # the bf16 GEMM's tile
    (FP8, (128, 128, 1, False), 0, r"group_m must be in \[1, 64\]"),
    (FP8, (128, 128, 1, False), 65, r"group_m must be in \[1, 64\]"),
    (FP8_RES, (256, 128, 1, False), 8, "with a residual term"),  # residual: 128 rows only
    (FP8_RES, (192, 128, 1, False), 8, "with a residual term"),
])
def test_fp8_gemm_rejects_unknown_forms(rng, target, form, group_m, msg):
  """A kernel form that is not compiled (among them the variants deleted as slower) is
  an InvalidArgument error naming the valid set, never a silent substitute."""
  m, n, k = 256, 256, 256
  a, sa, b, sb = make_operands(rng, m, n, k)
  out = jax.ShapeDtypeStruct((m, n), jnp.bfloat16)
  attrs = fp8_attrs(m, n, k, form, group_m)
  with pytest.raises(Exception, match=msg):
    if target == FP8:
      jax.block_until_ready(jax.ffi.ffi_call(FP8, out)(a, a_scale_t(sa), b, sb, **attrs))
    else:
      c = jnp.zeros((m, n), jnp.bfloat16)
      jax.block_until_ready(jax.ffi.ffi_call(FP8_RES, out)(
          a, a_scale_t(sa), b, sb, c, beta=np.float32(0.5), **attrs))


def test_public_op_uses_kernel_and_matches(rng):
  m, n, k = 96, 392, 700  # the Python layer pads K to 16 and N to 8
  a, sa, b, sb = make_operands(rng, m, n, k)
  f = jax.jit(jax_sm100.fp8_blockwise_matmul)
  assert "jax_sm100_fp8_gemm" in f.lower(a, sa, b, sb).as_text()
  check(f(a, sa, b, sb), reference(a, sa, b, sb), "fp8_blockwise_matmul")


@pytest.mark.parametrize("m", [256, 250])  # 250: the kernel layout's pad columns
def test_public_ops_with_transposed_scales(rng, m):
  """quantize_fp8_blockwise(scale_transposed=True) into fp8_blockwise_matmul(
  a_scale_transposed=True): the same product, bit for bit, as the documented layouts;
  with M % 4 == 0 no XLA op runs between the two kernels (no transpose, no copy)."""
  n, k = 384, 640
  x = jnp.asarray(rng.standard_normal((m, k)).astype(np.float32)).astype(jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((n, k)).astype(np.float32)).astype(jnp.bfloat16)
  b, sb = jax_sm100.quantize_fp8_blockwise(w, block=(128, 128))

  def chain(transposed):
    def f(x):
      a, sa = jax_sm100.quantize_fp8_blockwise(x, scale_transposed=transposed)
      return jax_sm100.fp8_blockwise_matmul(a, sa, b, sb, a_scale_transposed=transposed)
    return jax.jit(f)

  a, sa = jax_sm100.quantize_fp8_blockwise(x)
  _, st = jax_sm100.quantize_fp8_blockwise(x, scale_transposed=True)
  assert _bits_equal(st, np.asarray(sa).T)
  got = chain(True)(x)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(chain(False)(x), np.float32))
  check(got, reference(a, sa, b, sb), f"transposed scales, M={m}")
  if m % 4 == 0:
    hlo = chain(True).lower(x).compile().as_text()
    assert hlo.count(f'custom_call_target="{QUANT}"') == 1
    assert hlo.count(f'custom_call_target="{FP8}"') == 1
    assert " transpose(" not in hlo and " copy(" not in hlo, hlo


def test_fp8_dot_forward_and_grad_against_f64(rng):
  """fp8_dot end to end on the kernels: forward vs the float64 product of the
  dequantized operands; grads close to the float64 grads of the unquantized product
  (FP8 noise: a loose but meaningful bound)."""
  x = jnp.asarray(rng.standard_normal((256, 384)).astype(np.float32)).astype(jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((384, 512)).astype(np.float32) * 0.05).astype(jnp.bfloat16)
  g = jnp.asarray(rng.standard_normal((256, 512)).astype(np.float32)).astype(jnp.bfloat16)
  y, vjp = jax.vjp(lambda x, w: jax_sm100.fp8_dot(x, w), x, w)
  dx, dw = vjp(g)
  x64, w64, g64 = (np.asarray(v.astype(jnp.float32), np.float64) for v in (x, w, g))
  for got, ref, name in ((y, x64 @ w64, "y"), (dx, g64 @ w64.T, "dx"), (dw, x64.T @ g64, "dw")):
    got = np.asarray(got.astype(jnp.float32), np.float64)
    assert np.isfinite(got).all(), name
    assert calc_diff(got, ref) < 5e-3, (name, calc_diff(got, ref))


# ---------------------------------------------------------------------------
# compute-sanitizer
# ---------------------------------------------------------------------------

_SANITIZER_SCRIPT = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp, jax_sm100
    from jax_sm100 import _ffi_registry  # registers the targets
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((200, 300)).astype(np.float32)).astype(jnp.bfloat16)
    for br in (1, 128):
      q, s = jax.ffi.ffi_call("jax_sm100_quantize_fp8", (
          jax.ShapeDtypeStruct(x.shape, jnp.float8_e4m3fn),
          jax.ShapeDtypeStruct((200 if br == 1 else 2, 3), jnp.float32)))(
              x, block_rows=np.int32(br), scale_transposed=np.int32(0))
      q.block_until_ready()
    from jax_sm100._launch.quantize import quantize_dual_launch as _quantize_dual_launch
    for xt in (x, x.astype(jnp.float32), x[:197, :299]):  # the last: pad entries
      for tb in (1, 128):
        jax.block_until_ready(_quantize_dual_launch(xt, tb))
        jax.block_until_ready(_quantize_dual_launch(xt, tb, True, tb == 1))
      jax.block_until_ready(_quantize_dual_launch(xt, 128, block_rows=128))
    m, n, k = 130, 200, 272
    a = jnp.asarray(rng.standard_normal((m, k))).astype(jnp.float8_e4m3fn)
    b = jnp.asarray(rng.standard_normal((n, k))).astype(jnp.float8_e4m3fn)
    sa = jnp.ones((m, 3), jnp.float32); sb = jnp.ones((2, 3), jnp.float32)
    c = jnp.ones((m, n), jnp.bfloat16)
    out = jax.ShapeDtypeStruct((m, n), jnp.bfloat16)
    sat = jnp.pad(sa.T, ((0, 0), (0, 2)))
    for form in FORMS:  # every compiled kernel; the residual target's 128-row ones
      bm, bn, cluster, pair = form
      attrs = dict(block_m=np.int32(bm), block_n=np.int32(bn), cluster=np.int32(cluster),
                   pair_along_n=pair, group_m=np.int32(3))
      jax.ffi.ffi_call("jax_sm100_fp8_gemm", out)(a, sat, b, sb, **attrs).block_until_ready()
      if bm == 128:
        jax.ffi.ffi_call("jax_sm100_fp8_gemm_residual", out)(
            a, sat, b, sb, c, beta=np.float32(0.5), **attrs).block_until_ready()
    print("SANITIZER_SCRIPT_DONE")
""").replace("FORMS", repr(tuple(FORMS.values())), 1)


def test_compute_sanitizer_memcheck(tmp_path):
  exe = shutil.which("compute-sanitizer")
  if exe is None:
    pytest.skip("compute-sanitizer not found")
  script = tmp_path / "fp8_sanitize.py"
  script.write_text(_SANITIZER_SCRIPT)
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
  r = subprocess.run([exe, "--tool", "memcheck", sys.executable, str(script)],
                     capture_output=True, text=True, timeout=300, env=env)
  out = r.stdout + r.stderr
  assert "SANITIZER_SCRIPT_DONE" in out, out[-3000:]
  assert "ERROR SUMMARY: 0 errors" in out, out[-3000:]
