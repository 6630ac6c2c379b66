"""The MXFP8 GEMM's kernel path (jax_sm100_mxfp8_gemm): the launch layer of
jax_sm100/_mxfp8.py (scale tiling, K / N padding, tile attributes, the vmap rule, mxfp8_dot's
three products, JAX_SM100_DISABLE_TARGETS) run end to end on the target's CPU handler
(JAX_SM100_BACKEND=cpu_ffi) against float64 of the dequantized inputs; the handler's
validation; and the dispatch on a (pretend) sm100, where the op lowers to the kernel."""
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _mxfp8, _selftest_guard, tuning
from conftest import assert_matmul_close
from test_api_mxfp8 import E4M3, E5M2, E8M0, _ops, codes_of, np_dequant, np_quantize, spread

def np_tile_scales(codes, rows, k):
  """The kernel's tiled scale layout, written from its definition
  (kernels/sm100/mx_scale_layout.h): chunk (K tile, row tile) of 32 x 16 bytes, the
  scale of row r and K block kb at byte 16 (r % 32) + 4 ((r % 128) // 32) + kb % 4."""
  kt, rt = -(-k // 128), 2 * -(-(-(-rows // 128)) // 2)
  out = np.full((kt, rt, 32, 16), 127, np.uint8)
  for r in range(codes.shape[0]):
    for kb in range(codes.shape[1]):
      out[kb // 4, r // 128, r % 32, (r % 128) // 32 * 4 + kb % 4] = codes[r, kb]
  return out


@pytest.mark.parametrize("rows,k", [(1, 16), (130, 208), (300, 1040), (257, 96), (8, 128)])
def test_tile_scales_is_the_kernel_layout(rng, rows, k):
  codes = rng.integers(0, 255, (rows, -(-k // 32)), dtype=np.uint8)
  got = _mxfp8.tile_scales(jnp.asarray(codes.view(ml_dtypes.float8_e8m0fnu)), rows, k)
  assert got.dtype == E8M0
  np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np_tile_scales(codes, rows, k))


def _launches(calls):
  return [c for c in calls if c[0] == _mxfp8.TARGET]


KERNEL_CASES = [  # (M, N, K, out dtype, (a dtype, b dtype))
    (1, 1, 1, jnp.float32, (E4M3, E4M3)),
    (3, 5, 31, jnp.bfloat16, (E5M2, E4M3)),
    (200, 296, 208, jnp.bfloat16, (E4M3, E5M2)),
    (17, 9, 100, jnp.float16, (E5M2, E5M2)),
    (130, 264, 1040, jnp.float32, (E4M3, E4M3)),
    (40, 72, 128, jnp.float16, (E4M3, E5M2)),
]


@pytest.mark.parametrize("m,n,k,out_dtype,dts", KERNEL_CASES)
def test_kernel_path_on_the_cpu_handler_matches_float64(cpu_ffi, rng, m, n, k, out_dtype, dts):
  decades = 1 if out_dtype == jnp.float16 else 3
  a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (m, k), decades=decades), dtype=dts[0])
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (n, k), decades=decades), dtype=dts[1])
  got = jax.jit(lambda *o: jax_sm100.mxfp8_matmul(*o, out_dtype=out_dtype))(a, a_s, b, b_s)
  assert got.dtype == out_dtype and got.shape == (m, n)
  (launch,) = _launches(cpu_ffi)
  kp, npad = -(-k // 16) * 16, -(-n // (16 // np.dtype(out_dtype).itemsize)) * (
      16 // np.dtype(out_dtype).itemsize)
  kt = -(-kp // 128)
  assert launch[1] == ((m, kp), (kt, 2 * -(-(-(-m // 128)) // 2), 32, 16), (npad, kp),
                       (kt, 2 * -(-(-(-npad // 128)) // 2), 32, 16))
  assert launch[2]["block_n"] in _mxfp8.BLOCK_NS and launch[2]["group_m"] == 8
  a64, b64 = np_dequant(a, codes_of(a_s)), np_dequant(b, codes_of(b_s))
  assert_matmul_close(got, a64 @ b64.T, np.abs(a64) @ np.abs(b64).T, k, out_dtype)


@pytest.mark.parametrize("block_n", _mxfp8.BLOCK_NS)
def test_both_tile_widths_and_nan_scales_on_the_cpu_handler(cpu_ffi, rng, block_n):
  m, n, k = 150, 270, 200
  a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (m, k)))
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (n, k)), dtype=E5M2)
  codes = codes_of(a_s).copy()
  codes[7, 3] = 255                                   # a NaN scale: row 7 of d is NaN
  a_s = jnp.asarray(codes.view(ml_dtypes.float8_e8m0fnu))
  got = jax.jit(_mxfp8.kernel(np.dtype(jnp.float32), block_n))(a, a_s, b, b_s)
  assert _launches(cpu_ffi)[0][2]["block_n"] == block_n
  a64, b64 = np_dequant(a, codes_of(a_s)), np_dequant(b, codes_of(b_s))
  want = a64 @ b64.T
  got = np.asarray(got)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  assert np.isnan(got[7]).all() and not np.isnan(np.delete(got, 7, 0)).any()
  keep = ~np.isnan(want)
  absp = np.abs(np.nan_to_num(a64)) @ np.abs(b64).T
  assert_matmul_close(np.where(keep, got, 0), np.where(keep, want, 0), absp, k, jnp.float32)


def test_vmap_folds_a_batched_a_into_one_launch(cpu_ffi, rng):
  a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (3, 20, 96)))
  b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (24, 96)))
  f = jax.vmap(lambda a, a_s: jax_sm100.mxfp8_matmul(a, a_s, b, b_s, out_dtype=jnp.float32))
  got = jax.jit(f)(a, a_s)
  # One launch in the program, with the batch folded into M (the vmap rule also traces
  # the unbatched launch once, which the program does not keep).
  text = jax.jit(f).lower(a, a_s).as_text()
  assert len(re.findall(r"custom_call @jax_sm100_mxfp8_gemm", text)) == 1
  assert _launches(cpu_ffi)[-1][1][0] == (60, 96)
  for i in range(3):
    a64, b64 = np_dequant(a[i], codes_of(a_s[i])), np_dequant(b, codes_of(b_s))
    assert_matmul_close(got[i], a64 @ b64.T, np.abs(a64) @ np.abs(b64).T, 96, jnp.float32)
  # b batched as well: the batched reference (no launch, no loop of launches).
  cpu_ffi.clear()
  bb, bb_s = jax_sm100.quantize_mxfp8(spread(rng, (3, 24, 96)))
  fb = jax.vmap(lambda *o: jax_sm100.mxfp8_matmul(*o, out_dtype=jnp.float32))
  got = jax.jit(fb)(a, a_s, bb, bb_s)
  assert "jax_sm100_mxfp8_gemm" not in jax.jit(fb).lower(a, a_s, bb, bb_s).as_text()
  a64, b64 = np_dequant(a[1], codes_of(a_s[1])), np_dequant(bb[1], codes_of(bb_s[1]))
  assert_matmul_close(got[1], a64 @ b64.T, np.abs(a64) @ np.abs(b64).T, 96, jnp.float32)


def test_mxfp8_dot_runs_its_three_products_on_the_kernel(cpu_ffi, rng):
  x, w = spread(rng, (40, 70), decades=1), spread(rng, (70, 48), decades=1)
  g = spread(rng, (40, 48), decades=1)
  f = jax.jit(lambda x, w: jax.vjp(lambda x, w: jax_sm100.mxfp8_dot(
      x, w, out_dtype=jnp.float32), x, w)[1](g))
  dx, dw = f(x, w)
  assert len(_launches(cpu_ffi)) == 3                  # y (in the vjp's forward), dx, dw
  gq, wq = np_dequant(*np_quantize(g, E4M3)), np_dequant(*np_quantize(w, E4M3))
  assert_matmul_close(dx, gq @ wq.T, np.abs(gq) @ np.abs(wq).T, 48, jnp.float32, what="dx")
  xtq, gtq = np_dequant(*np_quantize(x.T, E4M3)), np_dequant(*np_quantize(g.T, E4M3))
  assert_matmul_close(dw, xtq @ gtq.T, np.abs(xtq) @ np.abs(gtq).T, 40, jnp.float32, what="dw")


def test_disabled_target_takes_the_reference(cpu_ffi, monkeypatch, rng):
  monkeypatch.setenv(_ffi_registry.DISABLE_TARGETS_ENV, _mxfp8.TARGET)
  jax.clear_caches()
  a, a_s, b, b_s = _ops()
  f = lambda *o: jax_sm100.mxfp8_matmul(*o)
  assert "jax_sm100_" not in jax.jit(f).lower(a, a_s, b, b_s).as_text()
  text = str(tuning.explain(f, a, a_s, b, b_s))
  assert "reference" in text and "disabled" in text


def test_the_handler_refuses_a_broken_contract(cpu_ffi):
  # Calls that bypass the op reach the handler's validation (common/mxfp8_validate.h):
  # each is refused with a sentence, nothing is computed.
  a = jnp.zeros((8, 64), E4M3)
  sa = jnp.ones((1, 2, 32, 16), E8M0)
  out = jax.ShapeDtypeStruct((8, 8), jnp.bfloat16)

  def call(a=a, sa=sa, b=a, sb=sa, out=out, block_n=128, group_m=8):
    return jax.ffi.ffi_call(_mxfp8.TARGET, out)(a, sa, b, sb, block_n=np.int32(block_n),
                                                group_m=np.int32(group_m))
  for kwargs, words in [
      (dict(block_n=192), "no kernel for block_n = 192; the valid values are 128, 256"),
      (dict(group_m=0), "group_m must be in [1, 64]"),
      (dict(sa=jnp.ones((8, 2), E8M0)), "a_scale must be in the tiled layout"),
      (dict(b=jnp.zeros((8, 64), jnp.bfloat16)), "a and b must be float8_e4m3fn or float8_e5m2"),
      (dict(sb=jnp.ones((1, 2, 32, 16), jnp.uint8)), "must be float8_e8m0fnu"),
      (dict(a=jnp.zeros((8, 40), E4M3), b=jnp.zeros((8, 40), E4M3)), "K must be a multiple of 16"),
      (dict(out=jax.ShapeDtypeStruct((8, 8), jnp.int32)), "d must be bfloat16, float16 or float32"),
  ]:
    with pytest.raises(Exception, match=re.escape(words)):
      jax.block_until_ready(call(**kwargs))


def test_fake_sm100_lowers_to_the_kernel_with_its_tile_attributes(monkeypatch, rng):
  if _mxfp8.TARGET not in _ffi_registry.target_names():
    pytest.skip("the compiled extension (its registration table) is not loaded")
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.delenv(_backend.BACKEND_ENV, raising=False)
  monkeypatch.delenv(_ffi_registry.DISABLE_TARGETS_ENV, raising=False)
  monkeypatch.setattr(_backend, "_device_backend", lambda: "sm100")
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset({_mxfp8.TARGET}))
  monkeypatch.setattr(_selftest_guard, "_enabled", False)    # lowering only: no case runs
  jax.clear_caches()
  try:
    a, a_s = jax_sm100.quantize_mxfp8(spread(rng, (2048, 256)))
    b, b_s = jax_sm100.quantize_mxfp8(spread(rng, (40000, 256)))
    text = jax.jit(lambda *o: jax_sm100.mxfp8_matmul(*o)).lower(a, a_s, b, b_s).as_text()
    assert "jax_sm100_mxfp8_gemm" in text and "block_n = 256" in text
    b2, b2_s = b[:200], b_s[:200]
    text = jax.jit(lambda *o: jax_sm100.mxfp8_matmul(*o)).lower(a, a_s, b2, b2_s).as_text()
    assert "block_n = 128" in text
  finally:
    jax.clear_caches()
