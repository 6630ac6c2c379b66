"""GPU tests of the sm90 split-K GEMM (kernels/sm90/gemm_splitk.cuh): the FFI targets
jax_sm100_gemm / _residual / _bias with split_k > 1, and the ops under a split-K config.

The kernel runs one cluster of split_k CTAs per 64 x BN tile, each over 1/split_k of the K
blocks, and reduces the fp32 partials through distributed shared memory in rank order.
What could go wrong, and what catches it:
  * a K slice lost or counted twice, a partial read from the wrong peer or the wrong
    pair: float64 references, relative error and (bias target) element-wise bounds;
  * slices without K blocks (split_k > K blocks): K of one block with split 8;
  * an output element the reduction never writes: the residual target with beta == 0
    never reads C, so C is a NaN-filled buffer aliased to the output;
  * run-to-run nondeterminism: two runs bit-identical;
  * epilogues: alpha/beta with C (broadcast over the batch), bias + every activation +
    pre (the bias kernel tests' element-wise checks), f16/f32 outputs;
  * layouts: all four (trans_a, trans_b), batches, partial M / N tiles.
Every test is marked `gpu` (skipped unless an sm_90 GPU is the default device).
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import tuning  # noqa: E402
import test_gemm_bias_kernel_gpu as bias_k  # noqa: E402
from test_gemm_gpu import (_gemm_fn, _rand, _ref, _rel_err, _residual_fn, _rng,  # noqa: E402
                           _row_errors, _run_gemm, _shape_a, _shape_b)

pytestmark = pytest.mark.gpu

SPLIT_TILES = [(64, 64, 1), (64, 128, 1)]
_ids = lambda t: "%dx%d" % t[:2]  # noqa: E731


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
@pytest.mark.parametrize("split", [2, 3, 8])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True),
                                             (True, True)])
def test_layouts_partial_tiles(tile, split, trans_a, trans_b):
  # 100 x 200: partial M and N tiles; K = 1000: 16 K blocks, the last partial, split
  # unevenly (3: 6 + 6 + 4; 8: 2 each).
  tiling = tile + (8, split)
  assert _run_gemm(104, 200, 1000, trans_a, trans_b, tiling=tiling) <= 1e-2
  assert _run_gemm(104, 200, 1000, trans_a, trans_b, batch_a=(2,), batch_b=(2,),
                   batch_d=(2,), tiling=tiling) <= 1e-2


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
@pytest.mark.parametrize("m", [1, 16, 64, 128])
@pytest.mark.parametrize("n,k", [(1536, 7168), (2048, 4096)])
def test_decode_shapes_heuristic_split(tile, m, n, k):
  # The shapes the kernel exists for, at the split the dispatch would give them.
  sms = tuning.sm_count(jax.devices()[0])
  split = tuning.split_k_for(m, n, k, 1, tile[0], tile[1], sms)
  assert split > 1, split
  assert _run_gemm(m, n, k, False, False, tiling=tile + (8, split)) <= 1e-2


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
@pytest.mark.parametrize("m", [1, 9, 40, 63])
def test_a_box_stops_at_m(tile, m):
  # One M tile: A's box stops at round_up(M, 8) rows (gemm_inst.h, short_a_rows); every
  # row checked on its own, batched A, after full-box launches left data in shared memory.
  tiling = tile + (8, 4)
  _run_gemm(128, 256, 2048, False, False, tiling=tiling)
  rng = _rng()
  a = _rand((3, m, 2048), jnp.bfloat16, rng)
  b = _rand((2048, 320), jnp.bfloat16, rng)
  d = _gemm_fn(False, False, (3, m, 320), jnp.bfloat16, tiling)(a, b)
  assert np.max(_row_errors(d, _ref(a, b, False, False))) <= 1e-2


@pytest.mark.parametrize("k", [8, 64, 200])
def test_more_slices_than_k_blocks(k):
  # K of 1 to 4 blocks with 8 slices: most CTAs of a cluster run no K block and add zeros.
  assert _run_gemm(72, 136, k, False, False, tiling=(64, 64, 1, 8, 8)) <= 1e-2
  assert _run_gemm(72, 136, k, True, True, tiling=(64, 128, 1, 8, 8)) <= 1e-2


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
def test_every_element_written(tile):
  # beta == 0: C is never read, so an output element the reduction skips keeps its NaN.
  m, n, k = 136, 392, 512
  rng = _rng()
  a = _rand((m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = jnp.full((m, n), jnp.nan, jnp.bfloat16)
  d = _residual_fn(False, False, 1.0, 0.0, (m, n), jnp.bfloat16, True, tile + (8, 4))(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2  # _rel_err fails on any NaN


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
def test_residual_out_dtypes_and_c_broadcast(tile, out_dtype):
  m, n, k = 72, 264, 1536
  rng = _rng()
  a = _rand((2, m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = _rand((m, n), out_dtype, rng)  # one C for both batch entries
  d = _residual_fn(False, False, 0.75, -1.25, (2, m, n), out_dtype, False, tile + (8, 5))(a, b, c)
  assert d.dtype == out_dtype
  assert _rel_err(d, _ref(a, b, False, False, c[None], 0.75, -1.25)) <= 1e-2


def test_fp16_inputs():
  assert _run_gemm(40, 264, 2048, False, True, jnp.float16, jnp.float16,
                   tiling=(64, 64, 1, 8, 6)) <= 1e-2


def test_f32_output_keeps_fp32_precision():
  # The reduction adds fp32 partials: an f32 output stays far below bf16's error.
  rng = _rng()
  a = _rand((64, 4096), jnp.bfloat16, rng)
  b = _rand((4096, 256), jnp.bfloat16, rng)
  e32 = _rel_err(_gemm_fn(False, False, (64, 256), jnp.float32, (64, 64, 1, 8, 8))(a, b),
                 _ref(a, b, False, False))
  assert e32 < 1e-5, e32


def test_deterministic():
  rng = _rng()
  a = _rand((16, 7168), jnp.bfloat16, rng)
  b = _rand((7168, 1536), jnp.bfloat16, rng)
  fn = _gemm_fn(False, False, (16, 1536), jnp.float32, (64, 64, 1, 8, 8))
  d1, d2 = np.asarray(fn(a, b)), np.asarray(fn(a, b))
  assert np.array_equal(d1, d2)


@pytest.mark.parametrize("tile", SPLIT_TILES, ids=_ids)
@pytest.mark.parametrize("act", list(bias_k.ACTS))
def test_bias_every_activation(tile, act):
  # Element-wise bounds (test_gemm_bias_kernel_gpu._run): d = act(z), pre = z,
  # z = a @ b + bias with a 10-sigma bias.
  bias_k._run(104, 200, 1000, act=act, want_pre=True, tiling=tile + (4,))


@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False)])
def test_bias_layouts_batches_f32(trans_a, trans_b):
  bias_k._run(72, 136, 520, act="silu", want_pre=False, trans_a=trans_a, trans_b=trans_b,
              batch_a=(3,), out_dtype=jnp.float32, tiling=(64, 64, 1, 3))
  bias_k._run(72, 136, 520, act="relu", with_bias=False, tiling=(64, 128, 1, 8))


@pytest.mark.parametrize("tiling,match", [
    ((64, 64, 1, 8, 9), r"split_k must be in \[1, 8\]"),
    ((64, 64, 1, 8, 0), r"split_k must be in \[1, 8\]"),
    ((128, 256, 1, 8, 2), r"split_k > 1 needs one of the split-K tilings"),
    ((128, 128, 2, 8, 4), r"split_k > 1 needs one of the split-K tilings"),
])
def test_invalid_split_is_rejected(tiling, match):
  a = jnp.ones((64, 64), jnp.bfloat16)
  with pytest.raises(Exception, match=match):
    _gemm_fn(False, False, (64, 64), jnp.bfloat16, tiling)(a, a).block_until_ready()


def test_op_under_split_config_values_grad_and_hlo():
  cfg = tuning.GemmConfig(64, 64, 1, split_k=4)
  rng = _rng()
  a = _rand((16, 2048), jnp.bfloat16, rng)
  b = _rand((2048, 512), jnp.bfloat16, rng)
  with tuning.override(gemm=cfg):
    f = jax.jit(jax_sm100.matmul)
    hlo = f.lower(a, b).as_text()
    d = f(a, b)
    ga, gb = jax.jit(jax.grad(lambda x, y: jax_sm100.matmul(x, y).astype(jnp.float32).sum(),
                              argnums=(0, 1)))(a, b)
  assert "split_k = 4" in hlo, hlo[:2000]
  assert _rel_err(d, _ref(a, b, False, False)) <= 1e-2
  ones = jnp.ones((16, 512), jnp.float32)
  assert _rel_err(ga, _ref(ones, b, False, True)) <= 1e-2  # dy @ b^T
  assert _rel_err(gb, _ref(a, ones, True, False)) <= 1e-2  # a^T @ dy
