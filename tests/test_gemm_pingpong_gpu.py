"""GPU tests of the sm90 ping-pong GEMM (tilings (64, 256, 1) and (64, 256, 2)): the two
consumer warpgroups take alternate whole tiles, pass over each other's input stages by
advancing their ring cursor, take turns on the main loop and read C through one ring
each (kernels/sm90/gemm.cuh, "Ping-pong").

What can go wrong there only shows with many tiles per CTA (the turn barriers' phases,
the cursor advanced over rings that wrap several times, an odd tile count leaving one
warpgroup a tile more), so every shape here gives each CTA several tiles, with K block
counts that are not multiples of the 4 input stages and f32 outputs whose 8 epilogue
chunks per tile wrap the 3-deep C rings. Float64 references on fresh random data; the
plain, residual, bias/activation and dact targets.

Marked `gpu`: skipped unless the default device is an sm_90 GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from test_gemm_gpu import (_gemm_fn, _ref, _rel_err, _rand, _residual_fn, _rng,  # noqa: E402
                           _shape_a, _shape_b)
from test_gemm_bias_kernel_gpu import _run as bias_run  # noqa: E402

pytestmark = pytest.mark.gpu

PINGPONG = [(64, 256, 1), (64, 256, 2)]
# (m, n, k): 64-row tiles -> 2048/64 * 2048/256 = 256 tiles (about 2 per CTA pair member,
# 1.9 per CTA); 4160 x 1800 = 65 x 8 = 520 tiles (an odd M tile count: pairs with one
# CTA past M); K blocks 15 (1000) and 3 (136 < the 4 stages), and 1 (K = 16).
SHAPES = [(2048, 2048, 1000), (4160, 1800, 136), (4160, 1800, 16), (8192, 1024, 520)]


@pytest.mark.parametrize("tile", PINGPONG, ids=lambda t: "c%d" % t[2])
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False),
                                             (True, True)])
def test_plain_and_residual_many_tiles(tile, m, n, k, trans_a, trans_b):
  tiling = tile + (8,)
  rng = _rng()
  a = _rand(_shape_a((), m, k, trans_a), jnp.bfloat16, rng)
  b = _rand(_shape_b((), k, n, trans_b), jnp.bfloat16, rng)
  c = _rand((m, n), jnp.bfloat16, rng)
  d = _gemm_fn(trans_a, trans_b, (m, n), jnp.bfloat16, tiling)(a, b)
  ref = _ref(a, b, trans_a, trans_b)
  assert _rel_err(d, ref) <= 1e-2
  d = _residual_fn(trans_a, trans_b, 0.5, -1.5, (m, n), jnp.bfloat16, False, tiling)(a, b, c)
  assert _rel_err(d, _ref(a, b, trans_a, trans_b, c, 0.5, -1.5)) <= 1e-2


@pytest.mark.parametrize("tile", PINGPONG, ids=lambda t: "c%d" % t[2])
@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.float16])
def test_out_dtypes_wrap_the_c_rings(tile, out_dtype):
  # f32: 8 epilogue chunks per 64x256 tile through a 3-deep C ring per warpgroup.
  tiling = tile + (8,)
  m, n, k = 4160, 1800, 456
  rng = _rng()
  a = _rand((2, m, k), jnp.bfloat16, rng)
  b = _rand((k, n), jnp.bfloat16, rng)
  c = _rand((2, m, n), out_dtype, rng)
  d = _gemm_fn(False, False, (2, m, n), out_dtype, tiling)(a, b)
  assert d.dtype == out_dtype
  assert _rel_err(d, np.broadcast_to(_ref(a, b, False, False), (2, m, n))) <= 1e-2
  d = _residual_fn(False, False, 1.0, 1.0, (2, m, n), out_dtype, False, tiling)(a, b, c)
  assert _rel_err(d, _ref(a, b, False, False, c, 1.0, 1.0)) <= 1e-2


@pytest.mark.parametrize("tile", PINGPONG, ids=lambda t: "c%d" % t[2])
@pytest.mark.parametrize("act", ["gelu_tanh", "relu", "none"])
@pytest.mark.parametrize("m,n,k", [(4160, 1800, 1000), (8192, 1024, 16)])
def test_bias_activation_many_tiles(tile, act, m, n, k):
  # The bias kernel's own checks (d and pre element by element against float64).
  bias_run(m, n, k, act=act, trans_b=True, tiling=tile)
