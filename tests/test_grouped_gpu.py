"""GPU tests of the sm90 grouped (mixture-of-experts) GEMM kernels: the FFI targets
jax_sm100_grouped_gemm, jax_sm100_kgrouped_gemm and jax_sm100_fp8_grouped_gemm, through
the public ops (jax_sm100.ragged_dot, its gradient, fp8_grouped_matmul, fp8_ragged_dot)
and directly (every tile the defaults use, trans_rhs), at MoE sizes: G in {8, 32, 128}
experts, M up to 8192 tokens, K, N in {2048, 7168}, uniform / skewed (empty experts) /
short (rows in no group) / overflowing group sizes.

Every test is marked `gpu` and skipped unless the default device is an sm_90 GPU.
Each output is checked in full, group by group, against an fp32 product on the device
(per-group relative error, so one wrong small group cannot hide in a big norm; rows in
no group and empty groups must be exactly zero), and at sampled rows (every checked
group's first and last row) against float64 NumPy. Fresh random data every run (seed
printed; JAX_SM100_TEST_SEED replays it).
"""
from __future__ import annotations

import functools
import os
import secrets
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100 import _ffi_registry as reg  # noqa: E402
from jax_sm100 import tuning  # noqa: E402
from conftest import calc_diff  # noqa: E402

GROUPED, KGROUPED, FP8_GROUPED = ("jax_sm100_grouped_gemm", "jax_sm100_kgrouped_gemm",
                                  "jax_sm100_fp8_grouped_gemm")
BF16, F32, E4M3 = jnp.bfloat16, jnp.float32, jnp.float8_e4m3fn
HIGHEST = lax.Precision.HIGHEST

pytestmark = pytest.mark.gpu

_seed = [int(os.environ.get("JAX_SM100_TEST_SEED", secrets.randbits(31)))]
print(f"test_grouped_gpu: base seed {_seed[0]}")


def _rng():
  _seed[0] += 1
  return np.random.default_rng(_seed[0])


def test_kernel_targets_are_registered():
  missing = {GROUPED, KGROUPED, FP8_GROUPED} - set(reg.registered_targets())
  assert not missing, f"FFI targets not registered: {sorted(missing)}"


# ---------------------------------------------------------------------------
# Group sizes and data
# ---------------------------------------------------------------------------

def make_sizes(pattern, g, m, rng):
  """uniform: equal groups summing to M; skewed: power-law sizes with a quarter of the
  experts empty, summing to M; short: sum(sizes) ~ 0.7 M; overflow: the running sum
  passes M inside a group (later groups empty)."""
  if pattern == "uniform":
    s = np.full(g, m // g)
    s[-1] += m - s.sum()
  elif pattern in ("skewed", "short"):
    p = rng.pareto(1.0, g) + 1e-3
    p[rng.permutation(g)[:g // 4]] = 0
    total = m if pattern == "skewed" else int(0.7 * m)
    s = np.floor(p / p.sum() * total).astype(np.int64)
    s[np.argmax(s)] += total - s.sum()
  elif pattern == "overflow":
    s = np.full(g, m // g + m // (2 * g) + 3)
  else:
    raise ValueError(pattern)
  return s.astype(np.int32)


def bounds(sizes, m):
  b, s = [0], 0
  for v in sizes:
    s = min(s + max(int(v), 0), m)
    b.append(s)
  return b


def rand(rng, shape, dtype=BF16, scale=1.0):
  return jnp.asarray((rng.standard_normal(shape, dtype=np.float32) * scale)).astype(dtype)


def f64(x):
  return np.asarray(jnp.asarray(x).astype(F32), np.float64)


# ---------------------------------------------------------------------------
# Checks (fp32 on the device for every group, float64 at sampled rows)
# ---------------------------------------------------------------------------

def _bucket(rows):
  return max(128, 1 << (int(rows) - 1).bit_length())


@functools.partial(jax.jit, static_argnames=("rows", "trans"))
def _group_err(lhs, rhs_g, out, start, size, *, rows, trans):
  """(sum of squared errors, sum of squared reference) of out[start:start+size] against
  lhs[start:start+size] @ rhs_g (rhs_g^T when trans) in fp32; lhs and out padded by
  `rows` rows at the end so that the window never runs off."""
  a = lax.dynamic_slice_in_dim(lhs, start, rows).astype(F32)
  o = lax.dynamic_slice_in_dim(out, start, rows).astype(F32)
  b = rhs_g.astype(F32)
  ref = jnp.dot(a, b.T if trans else b, precision=HIGHEST)
  keep = (jnp.arange(rows) < size)[:, None]
  return jnp.sum(jnp.where(keep, (o - ref) ** 2, 0)), jnp.sum(jnp.where(keep, ref ** 2, 0))


@functools.partial(jax.jit, static_argnames=("rows",))
def _kgroup_err(lhs, dy, out_g, start, size, *, rows):
  a = lax.dynamic_slice_in_dim(lhs, start, rows).astype(F32)
  d = lax.dynamic_slice_in_dim(dy, start, rows).astype(F32)
  a = jnp.where((jnp.arange(rows) < size)[:, None], a, 0)
  ref = jnp.dot(a.T, d, precision=HIGHEST)
  return jnp.sum((out_g.astype(F32) - ref) ** 2), jnp.sum(ref ** 2)


def _pad_rows(x, rows):
  return jnp.pad(x, ((0, rows), (0, 0)))


def check_mgrouped(out, lhs, rhs, sizes, *, trans=False, bound=1e-2, fp8=False, rng=None):
  """out (M, N) = lhs[r] @ rhs[g(r)] (rhs (G, N, K) when trans) for every group, zeros
  past the last group. lhs/rhs may be dequantized FP8 (fp8: DeepGEMM's calc_diff too)."""
  m = lhs.shape[0]
  b = bounds(sizes, m)
  outa = np.asarray(jnp.all(jnp.isfinite(out.astype(F32))))
  assert outa, "non-finite outputs"
  if b[-1] < m:
    assert bool(jnp.all(out[b[-1]:] == 0)), "rows in no group are not zero"
  top = _bucket(max(int(np.max(np.diff(b))), 1))
  lp, op = _pad_rows(lhs, top), _pad_rows(out, top)
  for g in range(len(sizes)):
    size = b[g + 1] - b[g]
    if size == 0:
      continue
    e2, r2 = _group_err(lp, rhs[g], op, b[g], size, rows=_bucket(size), trans=trans)
    rel = float(np.sqrt(e2 / max(float(r2), 1e-300)))
    assert rel <= bound, f"group {g} (rows {b[g]}:{b[g + 1]}): relative error {rel:.3g}"
  # float64 at sampled rows: the first and last row of up to 8 groups, and a few more.
  rng = rng or _rng()
  nonempty = [g for g in range(len(sizes)) if b[g + 1] > b[g]]
  picked = sorted(set(rng.choice(nonempty, min(8, len(nonempty)), replace=False).tolist()
                      + [nonempty[0], nonempty[-1]]))
  for g in picked:
    rows = sorted({b[g], b[g + 1] - 1, int(rng.integers(b[g], b[g + 1]))})
    w = f64(rhs[g])
    ref = f64(lhs[np.asarray(rows)]) @ (w.T if trans else w)
    got = f64(out[np.asarray(rows)])
    rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)
    assert rel <= bound, f"float64 rows {rows} of group {g}: relative error {rel:.3g}"
    if fp8:
      assert calc_diff(got, ref) < 1e-3, f"rows {rows} of group {g}: calc_diff"


def check_kgrouped(out, lhs, dy, sizes, bound=1e-2, rng=None):
  """out (G, K, N)[g] = lhs_g^T @ dy_g; empty groups exactly zero."""
  m = lhs.shape[0]
  b = bounds(sizes, m)
  top = _bucket(max(int(np.max(np.diff(b))), 1))
  lp, dp = _pad_rows(lhs, top), _pad_rows(dy, top)
  for g in range(len(sizes)):
    size = b[g + 1] - b[g]
    if size == 0:
      assert bool(jnp.all(out[g] == 0)), f"empty group {g} is not zero"
      continue
    e2, r2 = _kgroup_err(lp, dp, out[g], b[g], size, rows=_bucket(size))
    rel = float(np.sqrt(e2 / max(float(r2), 1e-300)))
    assert rel <= bound, f"group {g} (rows {b[g]}:{b[g + 1]}): relative error {rel:.3g}"
  rng = rng or _rng()
  nonempty = [g for g in range(len(sizes)) if b[g + 1] > b[g]]
  for g in rng.choice(nonempty, min(4, len(nonempty)), replace=False):
    ks = np.unique(np.r_[0, lhs.shape[1] - 1, rng.integers(0, lhs.shape[1], 6)])
    ref = f64(lhs[b[g]:b[g + 1]][:, ks]).T @ f64(dy[b[g]:b[g + 1]])
    got = f64(out[g][ks])
    rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)
    assert rel <= bound, f"float64 rows {ks.tolist()} of group {g}: relative error {rel:.3g}"


# ---------------------------------------------------------------------------
# Direct FFI launches
# ---------------------------------------------------------------------------

def ffi_grouped(lhs, rhs, gs, trans_rhs, out_dtype, tile):
  n = rhs.shape[1] if trans_rhs else rhs.shape[2]
  f = jax.ffi.ffi_call(GROUPED, jax.ShapeDtypeStruct((lhs.shape[0], n), out_dtype))
  return jax.jit(lambda *o: f(*o, trans_rhs=trans_rhs, block_m=np.int32(tile[0]),
                              block_n=np.int32(tile[1])))(lhs, rhs, gs)


def ffi_kgrouped(lhs, dy, gs, out_dtype, tile):
  g = gs.shape[0]
  f = jax.ffi.ffi_call(KGROUPED, jax.ShapeDtypeStruct((g, lhs.shape[1], dy.shape[1]), out_dtype))
  return jax.jit(lambda *o: f(*o, block_m=np.int32(tile[0]), block_n=np.int32(tile[1])))(
      lhs, dy, gs)


def _tiles(kind):
  return sorted(set(tuning.GROUPED_HEURISTICS["sm90"][kind]))


# ---------------------------------------------------------------------------
# M-grouped (ragged_dot forward)
# ---------------------------------------------------------------------------

MGROUPED_CASES = [  # (G, M, K, N, pattern)
    (8, 8192, 7168, 2048, "uniform"),
    (8, 8192, 2048, 7168, "skewed"),
    (32, 8192, 7168, 2048, "skewed"),
    (32, 4000, 2048, 7168, "short"),   # M not a multiple of the tile; rows in no group
    (128, 8192, 2048, 2048, "skewed"),
    (128, 8192, 2048, 2048, "overflow"),
    (1, 3000, 2048, 2048, "uniform"),
]


@pytest.mark.parametrize("g,m,k,n,pattern", MGROUPED_CASES)
def test_ragged_dot_kernel(g, m, k, n, pattern):
  rng = _rng()
  sizes = make_sizes(pattern, g, m, rng)
  lhs, rhs = rand(rng, (m, k)), rand(rng, (g, k, n), scale=k ** -0.5)
  f = jax.jit(jax_sm100.ragged_dot)
  assert GROUPED in f.lower(lhs, rhs, jnp.asarray(sizes)).as_text()
  out = f(lhs, rhs, jnp.asarray(sizes))
  check_mgrouped(out, lhs, rhs, sizes, rng=rng)


@pytest.mark.parametrize("tile", _tiles("gemm"))
@pytest.mark.parametrize("trans_rhs", [False, True])
@pytest.mark.parametrize("out_dtype", [BF16, jnp.float16, F32])
def test_grouped_ffi_tiles_layouts_dtypes(tile, trans_rhs, out_dtype):
  rng = _rng()
  g, m, k, n = 16, 2500, 1032, 776  # partial tiles in M, N and K everywhere
  sizes = make_sizes("skewed", g, m, rng)
  in_dtype = jnp.float16 if out_dtype == jnp.float16 else BF16
  lhs = rand(rng, (m, k), in_dtype)
  rhs = rand(rng, (g, n, k) if trans_rhs else (g, k, n), in_dtype, scale=k ** -0.5)
  out = ffi_grouped(lhs, rhs, jnp.asarray(sizes), trans_rhs, out_dtype, tile)
  assert out.dtype == out_dtype
  check_mgrouped(out, lhs, rhs, sizes, trans=trans_rhs, rng=rng)


@pytest.mark.parametrize("tile,g", [((128, 256), 300), ((128, 128), 4200)])
def test_grouped_ffi_chunked_group_table(tile, g):
  # More groups than the tile's shared-memory group table holds (128x256: 246 entries,
  # 128x128: 4096): lookups walk group sizes from global memory (span > 1).
  rng = _rng()
  m, k, n = 2 * g + 1000, 128, 256
  sizes = make_sizes("skewed", g, m, rng)
  lhs, rhs = rand(rng, (m, k)), rand(rng, (g, k, n), scale=k ** -0.5)
  out = ffi_grouped(lhs, rhs, jnp.asarray(sizes), False, BF16, tile)
  check_mgrouped(out, lhs, rhs, sizes, rng=rng)


def test_group_sizes_are_read_on_the_device():
  # One jitted function, several size patterns: nothing about the groups is baked in.
  rng = _rng()
  g, m, k, n = 32, 4096, 2048, 2048
  lhs, rhs = rand(rng, (m, k)), rand(rng, (g, k, n), scale=k ** -0.5)
  traces = []

  def op(lhs, rhs, sizes):
    traces.append(sizes)  # runs once per trace
    return jax_sm100.ragged_dot(lhs, rhs, sizes)
  f = jax.jit(op)
  for pattern in ("uniform", "skewed", "short", "overflow"):
    sizes = make_sizes(pattern, g, m, rng)
    check_mgrouped(f(lhs, rhs, jnp.asarray(sizes)), lhs, rhs, sizes, rng=rng)
  zeros = np.zeros(g, np.int32)
  assert not bool(jnp.any(f(lhs, rhs, jnp.asarray(zeros)) != 0))
  # Traced once: the sizes are a device operand, never a constant of the program. (Not
  # jit's cache size: jax may keep more than one executable-cache entry for one trace.)
  assert len(traces) == 1


# ---------------------------------------------------------------------------
# K-grouped (ragged_dot's rhs gradient) and the gradients end to end
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("g,m,k,n,pattern", [(8, 8192, 2048, 7168, "skewed"),
                                             (32, 8192, 7168, 2048, "short"),
                                             (128, 8192, 2048, 2048, "skewed"),
                                             (32, 4000, 2048, 2048, "overflow")])
def test_kgrouped_kernel(g, m, k, n, pattern):
  rng = _rng()
  sizes = make_sizes(pattern, g, m, rng)
  lhs, dy = rand(rng, (m, k)), rand(rng, (m, n))
  for tile in _tiles("kgrouped"):
    out = ffi_kgrouped(lhs, dy, jnp.asarray(sizes), BF16, tile)
    check_kgrouped(out, lhs, dy, sizes, rng=rng)


def test_kgrouped_partial_tiles_and_f32():
  rng = _rng()
  g, m, k, n = 12, 3001, 1000, 776
  sizes = make_sizes("skewed", g, m, rng)
  lhs, dy = rand(rng, (m, k)), rand(rng, (m, n))
  out = jax.jit(lambda l, d, s: jax_sm100.ragged_dot_general(
      l, d, s, lax.RaggedDotDimensionNumbers((([0], [0]), ([], [])), [0], []),
      preferred_element_type=F32))(lhs, dy, jnp.asarray(sizes))
  assert out.dtype == F32
  check_kgrouped(out, lhs, dy, sizes, rng=rng)


@pytest.mark.parametrize("g,pattern", [(8, "uniform"), (32, "skewed"), (128, "short")])
def test_ragged_dot_grads_on_the_kernels(g, pattern):
  rng = _rng()
  m, k, n = 4096, 2048, 2048
  sizes = make_sizes(pattern, g, m, rng)
  gs = jnp.asarray(sizes)
  lhs, rhs, ct = rand(rng, (m, k)), rand(rng, (g, k, n), scale=k ** -0.5), rand(rng, (m, n))
  f = lambda l, r: jax_sm100.ragged_dot(l, r, gs)
  text = jax.jit(lambda l, r, c: jax.vjp(f, l, r)[1](c)).lower(lhs, rhs, ct).as_text()
  assert GROUPED in text and KGROUPED in text
  dl, dr = jax.jit(lambda l, r, c: jax.vjp(f, l, r)[1](c))(lhs, rhs, ct)
  check_mgrouped(dl, ct, rhs, sizes, trans=True, rng=rng)  # ct[r] @ rhs[g]^T
  check_kgrouped(dr, lhs, ct, sizes, rng=rng)


# ---------------------------------------------------------------------------
# FP8
# ---------------------------------------------------------------------------

def _quantize_experts(w):
  """w (G, N, K) per expert in 128x128 blocks: (q, scale (G, N/128, K/128))."""
  return jax.jit(jax.vmap(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=(128, 128))))(w)


@jax.jit
def _dequantize(q, s):
  """q * s with 1x128 or 128x128 blocks (by s's shape), fp32; q (..., R, C)."""
  r, c = q.shape[-2:]
  br = 1 if s.shape[-2] == r else 128
  s = jnp.repeat(jnp.repeat(s, br, axis=-2), 128, axis=-1)[..., :r, :c]
  return q.astype(F32) * s


@pytest.mark.parametrize("g,m,k,n,pattern", [(8, 8192, 7168, 2048, "uniform"),
                                             (32, 8192, 7168, 2048, "skewed"),
                                             (32, 8192, 2048, 7168, "short"),
                                             (128, 8192, 2048, 2048, "overflow"),
                                             (8, 2000, 1000, 776, "skewed"),  # partial blocks
                                             (4, 3000, 512, 120, "skewed")])  # one N tile
@pytest.mark.parametrize("block_m", [128, 256])
def test_fp8_grouped_kernel(g, m, k, n, pattern, block_m):
  """Both FP8 kernels (128-row tiles: overlapped promotion; 256-row: two waves, on a pair
  of CTAs along N when N spans two tiles: with 776 columns the last pair's second tile is
  past N) on every pattern, forced through override(grouped=...)."""
  rng = _rng()
  sizes = make_sizes(pattern, g, m, rng)
  x, w = rand(rng, (m, k), F32), rand(rng, (g, n, k), F32)
  aq, a_s = jax_sm100.quantize_fp8_blockwise(x, scale_transposed=True)
  bq, b_s = _quantize_experts(w)
  with tuning.override(grouped=tuning.GroupedConfig(block_m, 128)):
    f = jax.jit(lambda *o: jax_sm100.fp8_grouped_matmul(*o, a_scale_transposed=True))
    text = f.lower(aq, a_s, bq, b_s, jnp.asarray(sizes)).as_text()
    out = f(aq, a_s, bq, b_s, jnp.asarray(sizes))
  assert FP8_GROUPED in text and f"block_m = {block_m} : i32" in text
  a_deq, b_deq = _dequantize(aq, a_s.T), _dequantize(bq, b_s)
  check_mgrouped(out, a_deq, b_deq, sizes, trans=True, bound=2e-2, fp8=True, rng=rng)


def test_fp8_ragged_dot_forward_and_grads():
  rng = _rng()
  g, m, k, n = 32, 4096, 2048, 2048
  sizes = make_sizes("skewed", g, m, rng)
  gs = jnp.asarray(sizes)
  x, w, ct = rand(rng, (m, k)), rand(rng, (g, k, n), scale=k ** -0.5), rand(rng, (m, n))
  f = lambda x, w: jax_sm100.fp8_ragged_dot(x, w, gs)
  run = jax.jit(lambda x, w, c: (lambda y, vjp: (y, *vjp(c)))(*jax.vjp(f, x, w)))
  text = run.lower(x, w, ct).as_text()
  assert FP8_GROUPED in text and KGROUPED in text
  y, dx, dw = run(x, w, ct)
  # The recipe: x and ct in 1x128 blocks, w[g] in 128x128 blocks (read both ways).
  xq, xs = jax_sm100.quantize_fp8_blockwise(x)
  cq, cs = jax_sm100.quantize_fp8_blockwise(ct)
  wtq, wts = _quantize_experts(jnp.swapaxes(w, 1, 2))
  check_mgrouped(y, _dequantize(xq, xs), _dequantize(wtq, wts), sizes, trans=True, bound=2e-2,
                 fp8=True, rng=rng)
  w_deq = jnp.swapaxes(_dequantize(wtq, wts), 1, 2)  # (G, K, N): dx's (G, N', K') operand
  check_mgrouped(dx, _dequantize(cq, cs), w_deq, sizes, trans=True, bound=2e-2, fp8=True,
                 rng=rng)
  check_kgrouped(dw, x, ct, sizes, rng=rng)


# ---------------------------------------------------------------------------
# CUDA graphs (XLA command buffers)
# ---------------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp, jax_sm100
    assert jax_sm100.backend() == "sm90", jax_sm100.backend()
    rng = np.random.default_rng(int.from_bytes(__import__("os").urandom(4), "little"))
    g, m, k, n = 16, 1024, 512, 384

    @jax.jit
    def f(x, w, gs, ct):
        y, vjp = jax.vjp(lambda x, w: jax_sm100.ragged_dot(x, w, gs), x, w)
        y8 = jax_sm100.fp8_ragged_dot(x, w, gs)
        return (y, *vjp(ct), y8)

    worst = 0.0
    for i in range(6):  # distinct buffers and distinct group sizes every call
        x, ct = (jnp.asarray(rng.standard_normal(s), jnp.bfloat16) for s in [(m, k), (m, n)])
        w = jnp.asarray(rng.standard_normal((g, k, n)) / np.sqrt(k), jnp.bfloat16)
        sizes = rng.multinomial(m - 100 * (i % 2), np.ones(g) / g).astype(np.int32)
        y, dx, dw, y8 = jax.block_until_ready(f(x, w, jnp.asarray(sizes), ct))
        X, W, C = (np.asarray(v, np.float64) for v in (x, w, ct))
        b = np.concatenate([[0], np.cumsum(sizes)])
        ref, dref, wref = np.zeros((m, n)), np.zeros((m, k)), np.zeros((g, k, n))
        for e in range(g):
            ref[b[e]:b[e + 1]] = X[b[e]:b[e + 1]] @ W[e]
            dref[b[e]:b[e + 1]] = C[b[e]:b[e + 1]] @ W[e].T
            wref[e] = X[b[e]:b[e + 1]].T @ C[b[e]:b[e + 1]]
        for got, want, bound in ((y, ref, 1e-2), (dx, dref, 1e-2), (dw, wref, 1e-2),
                                 (y8, ref, 6e-2)):
            err = np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)
            assert err < bound, (i, err, bound)
            worst = max(worst, err)
    print("worst relative error", worst)
""")


def test_results_stay_right_under_command_buffers():
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL"
                      " --xla_gpu_graph_min_graph_size=1").strip()
  res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300, cwd="/")
  print(res.stdout)
  assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
  assert "worst relative error" in res.stdout
