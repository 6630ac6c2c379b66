"""GPU tests of the sm90 GEMM kernels (FFI targets jax_sm100_gemm / _residual).

Every test is marked `gpu` and skipped unless the default device is an sm_90 GPU
and the extension registered the GEMM targets. References are float64 NumPy on
fresh random inputs; the error measure is ||out - ref|| / ||ref|| <= 1e-2 (bf16
outputs land near 3e-3), NaN never passes.

Two ways in:
  * the FFI targets directly (jax.ffi.ffi_call), to pin down the kernel itself:
    layouts, partial tiles, batch broadcast, dtypes, alpha/beta, K == 0, every
    compiled kernel choice (attributes block_m, block_n, cluster_m, group_m), and
    unwritten-element detection (the residual target with beta == 0 never reads C,
    so C can be a NaN-poisoned buffer ALIASED to the output: every element the
    kernel fails to write stays NaN);
  * the public API (jax_sm100.matmul / matmul_residual) under jit, vmap and grad,
    for unaligned shapes (the Python layer pads) and the three gradient products.
"""
from __future__ import annotations

import functools
import math
import os
import secrets

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402

GEMM = "jax_sm100_gemm"
GEMM_RESIDUAL = "jax_sm100_gemm_residual"


# conftest.py skips gpu-marked tests unless an sm_90 GPU is the default device.
pytestmark = pytest.mark.gpu


def test_kernel_targets_are_registered():
  # On an sm_90 GPU a build without these kernels must fail, not skip.
  missing = {GEMM, GEMM_RESIDUAL} - set(reg.registered_targets())
  assert not missing, f"FFI targets not registered: {sorted(missing)}"

# Fresh data every run; replay a failure with JAX_SM100_TEST_SEED=<printed seed>.
_seed = [int(os.environ.get("JAX_SM100_TEST_SEED", secrets.randbits(31)))]
print(f"test_gemm_gpu: base seed {_seed[0]}")


def _rng():
  _seed[0] += 1
  return np.random.default_rng(_seed[0])


def _rand(shape, dtype, rng):
  return jnp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(dtype)


def _f64(x):
  return np.asarray(jnp.asarray(x).astype(jnp.float32), dtype=np.float64)


def _rel_err(out, ref):
  out = _f64(out)
  assert out.shape == ref.shape, (out.shape, ref.shape)
  assert np.all(np.isfinite(out)), f"{np.sum(~np.isfinite(out))} non-finite outputs"
  return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _op(x, trans):
  """(…, R, C) -> (…, C, R) when trans (float64)."""
  return np.swapaxes(x, -1, -2) if trans else x


def _ref(a, b, trans_a, trans_b, c=None, alpha=1.0, beta=0.0):
  acc = np.matmul(_op(_f64(a), trans_a), _op(_f64(b), trans_b)) * alpha
  if c is not None and beta != 0.0:
    acc = acc + beta * _f64(c)
  return acc


# The compiled (block_m, block_n, cluster_m) combinations; anything else is rejected.
_TILINGS = [(128, 256, 1), (128, 256, 2), (128, 128, 1), (128, 128, 2), (64, 128, 1),
            (64, 64, 1)]


def _num_sms():
  return getattr(jax.devices()[0], "core_count", None) or 132


def _default_tiling(m, n, batch):
  """(block_m, block_n, cluster_m, group_m) by the library's default rule: estimated time =
  waves * tile area / a per-tile efficiency guess (ties keep the larger tile); 2-CTA
  clusters for 128-row tiles when the M tiles pair up evenly and there is more than one
  wave; group_m 8."""
  sms = _num_sms()
  best, best_cost = None, None
  for bm, bn, eff in ((128, 256, 1.00), (128, 128, 0.85), (64, 128, 0.60), (64, 64, 0.45)):
    tiles = batch * -(-m // bm) * -(-n // bn)
    cost = -(-tiles // sms) * bm * bn / eff
    if best is None or cost < best_cost:
      best, best_cost = (bm, bn), cost
  bm, bn = best
  m_tiles = -(-m // bm)
  tiles = batch * m_tiles * -(-n // bn)
  cluster = 2 if bm == 128 and m_tiles >= 2 and m_tiles % 2 == 0 and tiles > sms else 1
  return bm, bn, cluster, 8


def _tiling_attrs(tiling, out_shape):
  """FFI attributes (int32) for `tiling`, or the default choice for out_shape when None."""
  if tiling is None:
    tiling = _default_tiling(out_shape[-2], out_shape[-1], math.prod(out_shape[:-2]))
  bm, bn, cluster, group, *split = tiling  # a fifth entry: split_k (the split-K kernel)
  return dict(block_m=np.int32(bm), block_n=np.int32(bn), cluster_m=np.int32(cluster),
              group_m=np.int32(group), split_k=np.int32(split[0] if split else 1))


def _shape_a(batch, m, k, trans_a):
  return tuple(batch) + ((k, m) if trans_a else (m, k))


def _shape_b(batch, k, n, trans_b):
  return tuple(batch) + ((n, k) if trans_b else (k, n))


@functools.lru_cache(maxsize=None)
def _gemm_fn(trans_a, trans_b, out_shape, out_dtype, tiling=None):
  """The plain GEMM target under jit; tiling (block_m, block_n, cluster_m, group_m), or
  None for the default choice."""
  out = jax.ShapeDtypeStruct(out_shape, out_dtype)
  attrs = _tiling_attrs(tiling, out_shape)
  return jax.jit(lambda a, b: jax.ffi.ffi_call(GEMM, out)(a, b, trans_a=trans_a, trans_b=trans_b,
                                                         **attrs))


@functools.lru_cache(maxsize=None)
def _residual_fn(trans_a, trans_b, alpha, beta, out_shape, out_dtype, alias_c, tiling=None):
  out = jax.ShapeDtypeStruct(out_shape, out_dtype)
  aliases = {2: 0} if alias_c else {}
  call = jax.ffi.ffi_call(GEMM_RESIDUAL, out, input_output_aliases=aliases)
  attrs = _tiling_attrs(tiling, out_shape)
  return jax.jit(lambda a, b, c: call(a, b, c, trans_a=trans_a, trans_b=trans_b,
                                      alpha=np.float32(alpha), beta=np.float32(beta), **attrs),
                 donate_argnums=(2,) if alias_c else ())


def _run_gemm(m, n, k, trans_a, trans_b, dtype=jnp.bfloat16, out_dtype=jnp.bfloat16,
              batch_a=(), batch_b=(), batch_d=(), tiling=None):
  rng = _rng()
  a = _rand(_shape_a(batch_a, m, k, trans_a), dtype, rng)
  b = _rand(_shape_b(batch_b, k, n, trans_b), dtype, rng)
  d = _gemm_fn(trans_a, trans_b, tuple(batch_d) + (m, n), out_dtype, tiling)(a, b)
  assert d.dtype == out_dtype
  ref = np.broadcast_to(_ref(a, b, trans_a, trans_b), tuple(batch_d) + (m, n))
  return _rel_err(d, ref)


# ---------------------------------------------------------------------------
# Direct FFI: layouts and partial tiles
# ---------------------------------------------------------------------------

# Aligned last dims (multiples of 8 elements), but no tile multiples anywhere.
_SHAPES = [
    (8, 8, 8),        # one partial tile everywhere
    (72, 136, 24),    # K < one BLOCK_K
    (264, 136, 72),   # K < stages * BLOCK_K, partial M and N tiles
    (136, 392, 328),  # odd tile counts, K not a multiple of 64
    (1, 8, 64),       # decode-like single row (M-major A needs M % 8: skipped there)
]


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("mnk", _SHAPES)
def test_layouts_partial_tiles(mnk, trans_a, trans_b):
  m, n, k = mnk
  if trans_a and m % 8:
    pytest.skip("M-major A needs M to span 16 bytes (the Python layer pads it)")
  assert _run_gemm(m, n, k, trans_a, trans_b) <= 1e-2


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_more_tiles_than_sms(trans_a, trans_b):
  # 3008 x 4104: 24 x 17 = 408 tiles of 128x256 (> 132 SMs), every config's edges partial.
  assert _run_gemm(3008, 4104, 264, trans_a, trans_b) <= 1e-2


@pytest.mark.parametrize("m,n,k", [(16, 4096, 1024), (64, 7168, 512), (128, 2048, 4096),
                                   (2048, 2048, 2048)])
def test_config_classes(m, n, k):
  # Shapes that pick each of the tile configs (small M, medium, large).
  assert _run_gemm(m, n, k, False, False) <= 1e-2


# Cluster 2 only exists for the 128-row tiles (B multicast across two M tiles); 64x64 runs
# one consumer warpgroup.
@pytest.mark.parametrize("tile", _TILINGS, ids=lambda t: "%dx%d_c%d" % t)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True),
                                             (True, True)])
def test_every_config_every_layout(tile, trans_a, trans_b):
  tiling = tile + (8,)
  m, n, k = 328, 600, 456
  # Partial tiles in every config, 8 K blocks (> stages for 128x256); 328 rows = 3 M tiles
  # of 128, so with clusters of 2 one CTA's tile lies wholly past M (zero-filled, clipped).
  assert _run_gemm(m, n, k, trans_a, trans_b, tiling=tiling) <= 1e-2
  rng = _rng()
  a = _rand(_shape_a((2,), m, k, trans_a), jnp.bfloat16, rng)
  b = _rand(_shape_b((), k, n, trans_b), jnp.bfloat16, rng)
  c = _rand((2, m, n), jnp.bfloat16, rng)
  d = _residual_fn(trans_a, trans_b, 0.75, -1.25, (2, m, n), jnp.bfloat16, False, tiling)(a, b, c)
  assert _rel_err(d, _ref(a, b, trans_a, trans_b, c, 0.75, -1.25)) <= 1e-2


def _row_errors(out, ref):
  """Per output row: relative error of that row (max over the leading dims)."""
  out = _f64(out)
  assert out.shape == ref.shape, (out.shape, ref.shape)
  assert np.all(np.isfinite(out)), f"{np.sum(~np.isfinite(out))} non-finite outputs"
  num = np.linalg.norm(out - ref, axis=-1)
  return np.max(num / np.maximum(np.linalg.norm(ref, axis=-1), 1e-30), axis=tuple(range(num.ndim - 1)))


# One M tile holding all of M with K-major A: A's TMA box stops at round_up(M, 8) rows and
# the stage's transaction bytes shrink with it (gemm.cuh, "Partial tiles"). A wrong byte
# count hangs or races the consumers; a wrong box reads the wrong rows. Every row is
# checked on its own, batched A included (the box is per batch entry), after a launch
# with full tiles of other data has left its values in shared memory.
@pytest.mark.parametrize("tile", _TILINGS, ids=lambda t: "%dx%d_c%d" % t)
def test_a_box_stops_at_m_on_one_m_tile(tile):
  tiling = tile + (8,)
  bm = tile[0]
  _run_gemm(3 * bm, 520, 456, False, False, tiling=tiling)  # full A boxes first
  for m in sorted({1, 7, 9, 33, bm - 1}):
    rng = _rng()
    a = _rand((2, m, 456), jnp.bfloat16, rng)
    b = _rand((456, 520), jnp.bfloat16, rng)
    c = _rand((m, 520), jnp.bfloat16, rng)
    d = _gemm_fn(False, False, (2, m, 520), jnp.bfloat16, tiling)(a, b)
    assert np.max(_row_errors(d, _ref(a, b, False, False))) <= 1e-2, m
    d = _residual_fn(False, False, 1.0, 0.5, (2, m, 520), jnp.bfloat16, False, tiling)(a, b, c)
    assert np.max(_row_errors(d, _ref(a, b, False, False, c[None], 1.0, 0.5))) <= 1e-2, m
    # M-major A keeps the full box (its inner dimension is M).
    at = _rand((456, m + (-m) % 8), jnp.bfloat16, rng)
    d = _gemm_fn(True, False, (m + (-m) % 8, 520), jnp.bfloat16, tiling)(at, b)
    assert np.max(_row_errors(d, _ref(at, b, True, False))) <= 1e-2, m


@pytest.mark.parametrize("tile", [(128, 256, 1), (128, 256, 2), (64, 64, 1)],
                         ids=lambda t: "%dx%d_c%d" % t)
@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.float16])
def test_every_config_residual_out_dtypes(tile, out_dtype):
  # f32 output: 8 epilogue chunks per 256-wide tile, twice the 4-deep C ring.
  tiling = tile + (8,)
  m, n, k = 200, 520, 136
  rng = _rng()
  a = _rand((m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = _rand((m, n), out_dtype, rng)
  d = _residual_fn(False, False, 1.0, 1.0, (m, n), out_dtype, False, tiling)(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False, c, 1.0, 1.0)) <= 1e-2


@pytest.mark.parametrize("group_m", [1, 3])
@pytest.mark.parametrize("tile", [(128, 256, 1), (128, 128, 2), (64, 64, 1)],
                         ids=lambda t: "%dx%d_c%d" % t)
def test_group_m(tile, group_m):
  # Many M and N tiles (and 2 batch entries), so the tile order has several groups and,
  # for group_m 3, a partial last group; more tiles than SMs, so CTAs take several.
  tiling = tile + (group_m,)
  assert _run_gemm(1160, 1800, 200, False, False, batch_a=(2,), batch_b=(2,), batch_d=(2,),
                   tiling=tiling) <= 1e-2
  rng = _rng()
  a = _rand((2, 1160, 200), jnp.bfloat16, rng)
  b = _rand((200, 1800), jnp.bfloat16, rng)
  c = _rand((1160, 1800), jnp.bfloat16, rng)
  d = _residual_fn(False, False, 1.0, 0.5, (2, 1160, 1800), jnp.bfloat16, False, tiling)(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False, c[None], 1.0, 0.5)) <= 1e-2


@pytest.mark.parametrize("tiling,match", [
    ((64, 256, 1, 8), "valid combinations are"),
    ((64, 128, 2, 8), "valid combinations are"),
    ((128, 64, 1, 8), "valid combinations are"),
    ((256, 128, 1, 8), "valid combinations are"),
    ((128, 256, 4, 8), "valid combinations are"),
    ((128, 256, 1, 0), "group_m"),
    ((128, 256, 1, 65), "group_m"),
])
@pytest.mark.parametrize("residual", [False, True])
def test_invalid_kernel_choice_is_rejected_with_a_sentence(tiling, match, residual):
  a = jnp.ones((64, 64), jnp.bfloat16)
  b = jnp.ones((64, 64), jnp.bfloat16)
  with pytest.raises(Exception, match=match) as info:
    if residual:
      c = jnp.ones((64, 64), jnp.bfloat16)
      _residual_fn(False, False, 1.0, 1.0, (64, 64), jnp.bfloat16, False, tiling)(
          a, b, c).block_until_ready()
    else:
      _gemm_fn(False, False, (64, 64), jnp.bfloat16, tiling)(a, b).block_until_ready()
  if match != "group_m":  # the sentence names the whole valid set
    assert "(128, 256, 1), (128, 256, 2), (128, 128, 1), (128, 128, 2), (64, 128, 1), " \
           "(64, 64, 1)" in str(info.value)


@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_dtypes(dtype, out_dtype):
  assert _run_gemm(200, 264, 136, False, False, dtype, out_dtype) <= 1e-2
  assert _run_gemm(200, 264, 136, True, True, dtype, out_dtype) <= 1e-2


def test_f32_output_is_more_precise_than_bf16():
  # The f32 output skips the final rounding: its error must be far below bf16's.
  rng = _rng()
  a = _rand((256, 512), jnp.bfloat16, rng)
  b = _rand((512, 256), jnp.bfloat16, rng)
  ref = _ref(a, b, False, False)
  e32 = _rel_err(_gemm_fn(False, False, (256, 256), jnp.float32)(a, b), ref)
  e16 = _rel_err(_gemm_fn(False, False, (256, 256), jnp.bfloat16)(a, b), ref)
  assert e32 < 1e-5 and e16 > 10 * e32, (e32, e16)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_batched_and_broadcast(trans_a, trans_b):
  assert _run_gemm(136, 264, 200, trans_a, trans_b, batch_a=(3,), batch_b=(3,),
                   batch_d=(3,)) <= 1e-2
  assert _run_gemm(136, 264, 200, trans_a, trans_b, batch_a=(), batch_b=(2, 2),
                   batch_d=(2, 2)) <= 1e-2
  assert _run_gemm(136, 264, 200, trans_a, trans_b, batch_a=(4,), batch_b=(1,),
                   batch_d=(4,)) <= 1e-2


def test_batches_are_not_mixed_up():
  # Distinct per-batch inputs whose products differ by orders of magnitude.
  rng = _rng()
  scales = np.array([1.0, 100.0, 0.01], np.float32)[:, None, None]
  a = jnp.asarray(rng.standard_normal((3, 72, 64), dtype=np.float32) * scales).astype(jnp.bfloat16)
  b = _rand((3, 64, 72), jnp.bfloat16, rng)
  d = _gemm_fn(False, False, (3, 72, 72), jnp.float32)(a, b)
  ref = _ref(a, b, False, False)
  for i in range(3):
    assert _rel_err(d[i], ref[i]) <= 1e-5


# ---------------------------------------------------------------------------
# Direct FFI: residual epilogue, poisoning, K == 0, validation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (-1.5, 0.25)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True), (False, True)])
def test_residual(alpha, beta, trans_a, trans_b):
  m, n, k = 264, 392, 200
  rng = _rng()
  a = _rand(_shape_a((), m, k, trans_a), jnp.bfloat16, rng)
  b = _rand(_shape_b((), k, n, trans_b), jnp.bfloat16, rng)
  c = _rand((m, n), jnp.bfloat16, rng)
  d = _residual_fn(trans_a, trans_b, alpha, beta, (m, n), jnp.bfloat16, False)(a, b, c)
  assert _rel_err(d, _ref(a, b, trans_a, trans_b, c, alpha, beta)) <= 1e-2


@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.float16])
def test_residual_out_dtypes_and_broadcast_c(out_dtype):
  rng = _rng()
  a = _rand((2, 136, 72), jnp.float16, rng)
  b = _rand((2, 72, 264), jnp.float16, rng)
  c = _rand((136, 264), out_dtype, rng)  # batch count 1: broadcast over d's batch
  d = _residual_fn(False, False, 1.0, 0.5, (2, 136, 264), out_dtype, False)(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False, c[None], 1.0, 0.5)) <= 1e-2


def test_residual_in_place_reads_c_before_writing():
  # C aliased to D (beta != 0): each chunk of C is loaded before its D chunk is stored.
  m, n, k = 392, 520, 136
  rng = _rng()
  a = _rand((m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = _rand((m, n), jnp.bfloat16, rng)
  ref = _ref(a, b, False, False, c, 1.0, 1.0)
  d = _residual_fn(False, False, 1.0, 1.0, (m, n), jnp.bfloat16, True)(a, b, c)
  assert _rel_err(d, ref) <= 1e-2


@pytest.mark.parametrize("mnk", [(8, 8, 8), (264, 136, 72), (3008, 4104, 264), (64, 7168, 256)])
@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float32])
def test_beta_zero_never_reads_c_and_writes_every_element(mnk, out_dtype):
  # C is all NaN AND is the output buffer: a NaN left anywhere means either C was read
  # (beta == 0 must not read it) or an output element was never written.
  m, n, k = mnk
  rng = _rng()
  a = _rand((m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = jnp.full((m, n), jnp.nan, out_dtype)
  d = _residual_fn(False, False, 2.0, 0.0, (m, n), out_dtype, True)(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False, None, 2.0, 0.0)) <= 1e-2


def test_k_zero():
  a = jnp.zeros((64, 0), jnp.bfloat16)
  b = jnp.zeros((0, 72), jnp.bfloat16)
  d = _gemm_fn(False, False, (64, 72), jnp.bfloat16)(a, b)
  assert np.array_equal(_f64(d), np.zeros((64, 72)))
  rng = _rng()
  c = _rand((64, 72), jnp.float32, rng)
  d = _residual_fn(False, False, 1.0, -3.0, (64, 72), jnp.float32, False)(a, b, c)
  np.testing.assert_allclose(_f64(d), -3.0 * _f64(c), rtol=1e-6)


def test_misaligned_rows_are_rejected_with_a_sentence():
  a = jnp.ones((16, 12), jnp.bfloat16)  # 24-byte rows: TMA cannot describe them
  b = jnp.ones((12, 16), jnp.bfloat16)
  with pytest.raises(Exception, match="multiple of 16 bytes"):
    _gemm_fn(False, False, (16, 16), jnp.bfloat16)(a, b).block_until_ready()


def test_deterministic():
  rng = _rng()
  a = _rand((1000, 1032), jnp.bfloat16, rng)
  b = _rand((1032, 1000), jnp.bfloat16, rng)
  f = _gemm_fn(False, False, (1000, 1000), jnp.float32)
  assert np.array_equal(np.asarray(f(a, b)), np.asarray(f(a, b)))


# ---------------------------------------------------------------------------
# Public API: unaligned shapes, jit, vmap, grad
# ---------------------------------------------------------------------------

def _check_kernel_path():
  assert jax_sm100.backend() == "sm90"


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (257, 129, 72), (33, 17, 300)])
def test_matmul_api_unaligned(m, n, k):
  _check_kernel_path()
  rng = _rng()
  a = _rand((m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  d = jax.jit(jax_sm100.matmul)(a, b)
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2


def test_matmul_api_vmap():
  rng = _rng()
  a = _rand((4, 136, 72), jnp.bfloat16, rng)
  b = _rand((4, 72, 200), jnp.bfloat16, rng)
  d = jax.jit(jax.vmap(jax_sm100.matmul))(a, b)
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2
  # vmap over a only (b shared)
  d = jax.jit(jax.vmap(jax_sm100.matmul, in_axes=(0, None)))(a, b[0])
  assert _rel_err(d, _ref(a, b[0][None], False, False)) <= 1e-2


@pytest.mark.parametrize("batched", [False, True])
def test_matmul_api_grad_three_products(batched):
  rng = _rng()
  lead = (2,) if batched else ()
  a = _rand(lead + (136, 200), jnp.bfloat16, rng)
  b = _rand(lead + (200, 264), jnp.bfloat16, rng)
  g = _rand(lead + (136, 264), jnp.bfloat16, rng)

  def f(a, b):
    return jax_sm100.matmul(a, b)

  d, vjp = jax.vjp(jax.jit(f), a, b)
  da, db = vjp(g)
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2
  assert _rel_err(da, np.matmul(_f64(g), np.swapaxes(_f64(b), -1, -2))) <= 1e-2  # dD @ B^T
  assert _rel_err(db, np.matmul(np.swapaxes(_f64(a), -1, -2), _f64(g))) <= 1e-2  # A^T @ dD


def test_matmul_residual_api_grad():
  rng = _rng()
  a = _rand((136, 200), jnp.bfloat16, rng)
  b = _rand((200, 72), jnp.bfloat16, rng)
  c = _rand((136, 72), jnp.bfloat16, rng)
  g = _rand((136, 72), jnp.bfloat16, rng)
  f = jax.jit(lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0))
  d, vjp = jax.vjp(f, a, b, c)
  da, db, dc = vjp(g)
  assert _rel_err(d, _ref(a, b, False, False, c, 0.5, 2.0)) <= 1e-2
  assert _rel_err(da, 0.5 * np.matmul(_f64(g), _f64(b).T)) <= 1e-2
  assert _rel_err(db, 0.5 * np.matmul(_f64(a).T, _f64(g))) <= 1e-2
  assert _rel_err(dc, 2.0 * _f64(g)) <= 1e-2


def test_matmul_residual_api_beta_zero_nan_c():
  rng = _rng()
  a = _rand((72, 136), jnp.bfloat16, rng)
  b = _rand((136, 200), jnp.bfloat16, rng)
  c = jnp.full((72, 200), jnp.nan, jnp.bfloat16)
  d = jax.jit(lambda a, b, c: jax_sm100.matmul_residual(a, b, c, beta=0.0))(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2
