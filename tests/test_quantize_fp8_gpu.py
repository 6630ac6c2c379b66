"""GPU tests of the FP8 quantize kernels (jax_sm100_quantize_fp8, jax_sm100_quantize_fp8_dual)
and of fp8_dot's use of them: bit-exact against the package's reference quantizer (run on
the CPU) and conftest's NumPy float32 emulation, the documented properties (block amax ->
448, zero blocks -> scale 1 and q 0, saturation, NaN visible), and fp8_dot bit-identical
with and without the fused-scale layout and the dual kernel.

Every test is marked `gpu` and skipped unless the default device is an sm_90 GPU.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import tuning  # noqa: E402

from conftest import calc_diff, np_dequantize, np_quantize_f32  # noqa: E402
from test_fp8_gpu import DUAL, E4M3, QUANT, _bits_equal, ffi_quantize  # noqa: E402

pytestmark = pytest.mark.gpu

# ---------------------------------------------------------------------------
# Quantization
# ---------------------------------------------------------------------------

def _reference_quantizer():
  """The package's reference quantizer quantize(x, block, dtype) -> (q, scale)."""
  from jax_sm100._reference import quantize_blockwise
  return quantize_blockwise


def _dual_launch():
  """One jax_sm100_quantize_fp8_dual launch: f(x, t_block_rows, scale_transposed,
  scale_t_transposed, block_rows) -> ((q, scale), (qt, scale_t))."""
  from jax_sm100._launch.quantize import quantize_dual_launch
  return quantize_dual_launch


def _reference_quantize_cpu(x, block):
  _quantize = _reference_quantizer()
  cpu = jax.devices("cpu")[0]
  # jit follows its committed input: this runs XLA's CPU backend.
  q, s = jax.jit(lambda v: _quantize(v, block, np.dtype(E4M3)))(jax.device_put(x, cpu))
  return np.asarray(q), np.asarray(s)


QSHAPES = [(1, 128), (300, 1000), (257, 130), (128, 4096), (1000, 24)]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
@pytest.mark.parametrize("block_rows", [1, 128])
@pytest.mark.parametrize("r,c", QSHAPES)
def test_quantize_bit_exact(rng, r, c, block_rows, dtype):
  x = rng.standard_normal((r, c)).astype(np.float32)
  x *= (10.0 ** rng.uniform(-4, 4, (r, 1))).astype(np.float32)
  x[rng.random(x.shape) < 0.01] *= 300.0
  x = jnp.asarray(x).astype(dtype)
  q, s = ffi_quantize(x, block_rows)
  rq, rs = _reference_quantize_cpu(x, (block_rows, 128))
  assert _bits_equal(s, rs), "scales differ from the reference quantizer"
  assert _bits_equal(q, rq), "q differs from the reference quantizer"
  nq, ns = np_quantize_f32(x, (block_rows, 128))
  assert _bits_equal(s, ns) and _bits_equal(q, nq), "differs from the NumPy emulation"


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_public_quantize_uses_kernel_and_is_bit_exact(rng, block):
  x = jnp.asarray((rng.standard_normal((300, 1000)) * 5).astype(np.float32)).astype(jnp.bfloat16)
  f = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))
  assert QUANT in f.lower(x).as_text()
  q, s = f(x)
  rq, rs = _reference_quantize_cpu(x, block)
  assert _bits_equal(s, rs) and _bits_equal(q, rq), "public op differs from the reference"
  # vmap folds into rows, one launch (128x128: each example's 150 rows zero-padded to 256)
  xb = jnp.stack([x[:150], x[150:]])
  fv = jax.jit(jax.vmap(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block)))
  assert fv.lower(xb).as_text().count("custom_call @" + QUANT) == 1
  qb, sb = fv(xb)
  for i in range(2):
    qi, si = _reference_quantize_cpu(xb[i], block)
    assert _bits_equal(sb[i], si) and _bits_equal(qb[i], qi), f"vmapped example {i} differs"


def test_quantize_transposed_scale_layout(rng):
  x = jnp.asarray(rng.standard_normal((301, 1000)).astype(np.float32)).astype(jnp.bfloat16)
  q, s = ffi_quantize(x, 1)
  qt, st = ffi_quantize(x, 1, scale_transposed=True)
  assert _bits_equal(q, qt)
  st = np.asarray(st)
  assert st.shape == (8, 304)
  assert _bits_equal(st[:, :301], np.asarray(s).T)
  assert np.all(st[:, 301:] == 1.0), "pad entries must be 1"


@pytest.mark.parametrize("block_rows", [1, 128])
def test_quantize_properties(rng, block_rows):
  r, c = 256, 512
  x = rng.standard_normal((r, c)).astype(np.float32)
  x[:block_rows, :128] = 0.0                    # an all-zero block
  x[-block_rows:, -128:] *= 1e30                # far beyond e4m3's range before scaling
  q, s = ffi_quantize(jnp.asarray(x), block_rows)
  q32 = np.asarray(q).astype(np.float32)
  s = np.asarray(s)
  assert np.all(np.isfinite(q32)) and np.all(np.isfinite(s))
  # Zero block: scale 1, q exactly 0.
  assert s[0, 0] == 1.0 and np.all(q32[:block_rows, :128] == 0.0)
  # Every other block's amax maps to +-448 (saturating, never beyond).
  blocks = np.abs(q32).reshape(r // block_rows, block_rows, c // 128, 128).max(axis=(1, 3))
  blocks[0, 0] = 448.0
  assert np.all(blocks == 448.0), blocks.min()
  # Round trip: |x - q*s| <= half an e4m3 ulp of the block max (2^-4 relative to 448... )
  deq = np_dequantize(q, s, (block_rows, 128))
  bmax = np.repeat(np.repeat(s * 448.0, block_rows, 0), 128, 1)
  assert np.all(np.abs(deq - x) <= bmax * 2.0**-4 + 1e-30)


def test_quantize_nan_block_stays_visible(rng):
  x = rng.standard_normal((4, 256)).astype(np.float32)
  x[1, 5] = np.nan
  q, s = ffi_quantize(jnp.asarray(x), 1)
  s = np.asarray(s)
  assert np.isnan(s[1, 0]) and np.isfinite(s[1, 1]) and np.isfinite(s[0]).all()
  assert np.isnan(np.asarray(q).astype(np.float32)[1, :128]).all()


# ---------------------------------------------------------------------------
# Dual quantization (x and x^T in one pass)
# ---------------------------------------------------------------------------

def ffi_quantize_dual(x, t_block_rows, scale_transposed=False, scale_t_transposed=False,
                      block_rows=1):
  return _dual_launch()(x, t_block_rows, scale_transposed, scale_t_transposed, block_rows)


# (block_rows, t_block_rows): x in 1x128 and x^T in 1x128 (fp8_dot's x) or 128x128 (its
# g), or both in 128x128 (its w)
DUAL_MODES = [(1, 1), (1, 128), (128, 128)]


DUAL_SHAPES = [(1, 16), (128, 128), (300, 1000), (257, 130), (1000, 24), (64, 4096), (4096, 40)]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
@pytest.mark.parametrize("block_rows,t_block_rows", DUAL_MODES)
@pytest.mark.parametrize("r,c", DUAL_SHAPES)
def test_quantize_dual_bit_exact(rng, r, c, block_rows, t_block_rows, dtype):
  x = rng.standard_normal((r, c)).astype(np.float32)
  x *= (10.0 ** rng.uniform(-4, 4, (r, 1))).astype(np.float32)   # rows of very different size
  x *= (10.0 ** rng.uniform(-2, 2, (1, c))).astype(np.float32)   # and columns
  x[rng.random(x.shape) < 0.01] *= 300.0
  x = jnp.asarray(x).astype(dtype)
  (q, s), (qt, st) = ffi_quantize_dual(x, t_block_rows, block_rows=block_rows)
  rq, rs = _reference_quantize_cpu(x, (block_rows, 128))
  rqt, rst = _reference_quantize_cpu(np.asarray(x).T, (t_block_rows, 128))
  assert s.shape == rs.shape and q.shape == rq.shape
  assert _bits_equal(s, rs) and _bits_equal(q, rq), "x's quantization differs"
  assert st.shape == rst.shape and qt.shape == rqt.shape
  assert _bits_equal(st, rst), "x^T's scales differ from the reference quantizer"
  assert _bits_equal(qt, rqt), "qt differs from the reference quantizer"


@pytest.mark.parametrize("block_rows,t_block_rows", DUAL_MODES)
def test_quantize_dual_special_values(rng, block_rows, t_block_rows):
  r, c = 384, 256
  x = rng.standard_normal((r, c)).astype(np.float32)
  x[:128, :128] = 0.0             # an all-zero tile: zero blocks both ways
  x[128:256, 128:] *= 1e30        # far beyond e4m3's range before scaling
  x[300, 7] = np.nan              # NaN: its row block and its column block
  (q, s), (qt, st) = ffi_quantize_dual(jnp.asarray(x), t_block_rows, block_rows=block_rows)
  rq, rs = _reference_quantize_cpu(x, (block_rows, 128))
  rqt, rst = _reference_quantize_cpu(x.T, (t_block_rows, 128))
  assert _bits_equal(s, rs) and _bits_equal(q, rq)
  assert _bits_equal(st, rst) and _bits_equal(qt, rqt)
  st, qt32 = np.asarray(st), np.asarray(qt).astype(np.float32)
  assert st[0, 0] == 1.0 and np.all(qt32[:128, :128] == 0.0)
  assert np.isnan(st[7, 2] if t_block_rows == 1 else st[0, 2])
  assert np.all(np.abs(qt32[np.isfinite(qt32)]) <= 448.0)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("t_block_rows", [1, 128])
@pytest.mark.parametrize("r,c", [(1, 16), (257, 130), (1000, 24), (301, 1000), (4096, 40)])
def test_quantize_dual_gemm_scale_layout(rng, r, c, t_block_rows, dtype):
  """scale_transposed / scale_t_transposed: the same values in the fp8 GEMM's A-scale
  layout (ceil(C/128), round_up(R, 4)) / (ceil(R/128), round_up(C, 4)), pad entries 1;
  q and qt unchanged."""
  x = rng.standard_normal((r, c)).astype(np.float32)
  x *= (10.0 ** rng.uniform(-4, 4, (r, 1))).astype(np.float32)
  x = jnp.asarray(x).astype(dtype)
  (q, s), (qt, st) = ffi_quantize_dual(x, t_block_rows)
  ts_t = t_block_rows == 1
  (q2, s2), (qt2, st2) = ffi_quantize_dual(x, t_block_rows, True, ts_t)
  assert _bits_equal(q, q2) and _bits_equal(qt, qt2)
  for got, plain, rows in ((s2, s, r), (st2, st, c)) if ts_t else ((s2, s, r),):
    got, plain = np.asarray(got), np.asarray(plain)
    rows4 = -(-rows // 4) * 4
    assert got.shape == (plain.shape[1], rows4), (got.shape, plain.shape)
    assert _bits_equal(got[:, :rows], plain.T), "transposed scales differ"
    assert np.all(got[:, rows:] == 1.0), "pad entries must be 1"
  if not ts_t:
    assert _bits_equal(st, st2)


@pytest.mark.parametrize("kw,msg", [
    (dict(t_block_rows=1, block_rows=128), "block_rows 128 needs t_block_rows 128"),
    (dict(t_block_rows=128, block_rows=128, scale_transposed=True), "block_rows 128 needs"),
    (dict(t_block_rows=128, scale_t_transposed=True), "scale_t_transposed needs t_block_rows 1"),
])
def test_quantize_dual_rejects_bad_attributes(kw, msg):
  # The handler refuses combinations the kernel does not implement, with a sentence.
  x = jnp.ones((256, 256), jnp.bfloat16)
  with pytest.raises(Exception, match=msg):
    jax.block_until_ready(_dual_launch()(x, **kw))


def with_and_without(make_context, f, *args):
  """f(*args) and f's lowered text inside the context make_context() returns, then
  outside it; JAX's caches are cleared before each (the settings are read at trace
  time)."""
  out = []
  for inside in (True, False):
    jax.clear_caches()
    with (make_context() if inside else contextlib.nullcontext()):
      out.append((f(*args), f.lower(*args).as_text()))
  return out


def _disabled(monkeypatch, targets):
  """A context in which JAX_SM100_DISABLE_TARGETS=targets."""
  @contextlib.contextmanager
  def ctx():
    with monkeypatch.context() as m:
      m.setenv("JAX_SM100_DISABLE_TARGETS", targets)
      yield
  return ctx


def assert_same_bits(tree_a, tree_b):
  for a, b in zip(jax.tree.leaves(tree_a), jax.tree.leaves(tree_b)):
    assert _bits_equal(np.asarray(a).astype(np.float32), np.asarray(b).astype(np.float32))


def test_fp8_dot_fused_scales_are_bit_identical(rng):
  # a's scales written by the quantizers in the GEMM's layout (default) or transposed
  # by XLA (tuning.override(fp8_fused_scales=False)): the same bits, value and grads. M = 301 and
  # K = 700 exercise the pad entries and a partial K block.
  x = jnp.asarray(rng.standard_normal((301, 700)).astype(np.float32)).astype(jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((700, 392)).astype(np.float32) * 0.05).astype(jnp.bfloat16)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)
  f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  (base, base_text), (fused, fused_text) = with_and_without(
      lambda: tuning.override(fp8_fused_scales=False), f, x, w)
  assert "scale_transposed = 1" not in base_text
  assert "scale_t_transposed = 1 : i32, scale_transposed = 1" in fused_text
  assert_same_bits(base, fused)


def test_fp8_dot_vmap_with_fused_scales_on_the_kernels(rng):
  # vmap of fp8_dot's value and grads over a batch of x: the batching rules take the
  # kernel-layout scales back to the documented layout and fold the batch into M; the
  # same bits as with XLA transposing the scales, and each example close to the
  # float64 grads of the unquantized product.
  x = jnp.asarray(rng.standard_normal((3, 130, 384)).astype(np.float32)).astype(jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((384, 256)).astype(np.float32) * 0.05).astype(jnp.bfloat16)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)
  f = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1)), (0, None)))
  (base, _), (fused, fused_text) = with_and_without(
      lambda: tuning.override(fp8_fused_scales=False), f, x, w)
  assert "jax_sm100_fp8_gemm" in fused_text
  assert_same_bits(base, fused)
  _, (dx, dw) = fused
  for i in range(x.shape[0]):
    x64, w64 = (np.asarray(v.astype(jnp.float32), np.float64) for v in (x[i], w))
    y64 = x64 @ w64
    g64 = 2.0 * y64  # d(sum y^2)/dy
    for got, ref, name in ((dx[i], g64 @ w64.T, "dx"), (dw[i], x64.T @ g64, "dw")):
      got = np.asarray(got.astype(jnp.float32), np.float64)
      assert calc_diff(got, ref) < 5e-3, (i, name, calc_diff(got, ref))


def test_fp8_dot_with_dual_quantize_is_bit_identical(rng, monkeypatch):
  # fp8_dot's value and grads with the dual kernel == without it (the separate
  # quantize launches): the kernel only fuses, it must not change a bit.
  x = jnp.asarray(rng.standard_normal((2, 300, 512)).astype(np.float32)).astype(jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((512, 384)).astype(np.float32) * 0.05).astype(jnp.bfloat16)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)
  f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  (base, base_text), (dual, dual_text) = with_and_without(
      _disabled(monkeypatch, DUAL), f, x, w)
  assert DUAL not in base_text and DUAL in dual_text
  assert_same_bits(base, dual)
