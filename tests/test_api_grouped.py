"""The grouped (mixture-of-experts) ops on a CPU: jax_sm100.ragged_dot, ragged_dot_general,
fp8_grouped_matmul and fp8_ragged_dot, on the reference path and on the cpu_ffi path (the
grouped FFI targets' CPU handlers through the real launch layer: padding, group_sizes
operand, custom_vjp), against float64 NumPy models of the group rule and of the FP8 recipe,
and against jax.lax.ragged_dot where the rule is lax's.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _tuning_grouped, tuning
from jax_sm100 import _selftest_guard
from conftest import (UNIT_ROUNDOFF, assert_matmul_close, f64, np_dequantize, np_quantize_f32,
                      random_array)

BF16, F16, F32, E4M3 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.float8_e4m3fn
GROUPED, KGROUPED, FP8_GROUPED = ("jax_sm100_grouped_gemm", "jax_sm100_kgrouped_gemm",
                                  "jax_sm100_fp8_grouped_gemm")
HIGHEST = lax.Precision.HIGHEST


def launched(calls):
  return {c[0] for c in calls} if calls is not None else set()


# ---------------------------------------------------------------------------
# float64 models
# ---------------------------------------------------------------------------

def np_bounds(sizes, m):
  """The group rule: group g owns rows [b[g], b[g+1]) (a negative size counts as 0)."""
  b, s = [0], 0
  for v in np.asarray(sizes):
    s = min(s + max(int(v), 0), m)
    b.append(s)
  return b


def np_ragged(lhs, rhs, sizes):
  """out[r] = lhs[r] @ rhs[g(r)], zeros for rows in no group; float64."""
  b = np_bounds(sizes, lhs.shape[0])
  out = np.zeros((lhs.shape[0], rhs.shape[2]))
  for g in range(rhs.shape[0]):
    out[b[g]:b[g + 1]] = lhs[b[g]:b[g + 1]] @ rhs[g]
  return out


def np_kgrouped(lhs, dy, sizes):
  """out[g] = lhs_g^T @ dy_g, (G, K, N); float64."""
  b = np_bounds(sizes, lhs.shape[0])
  return np.stack([lhs[b[g]:b[g + 1]].T @ dy[b[g]:b[g + 1]] for g in range(len(sizes))])


def size_patterns(g, m, rng):
  """Named group-size patterns for G groups over M rows."""
  uniform = [m // g] * (g - 1) + [m - (g - 1) * (m // g)]
  p = rng.pareto(1.0, g) + 1e-3
  p[rng.permutation(g)[:g // 4]] = 0  # some empty experts
  p = p / p.sum()
  skewed = np.floor(p * m).astype(int)
  skewed[np.argmax(skewed)] += m - skewed.sum()
  empty = np.zeros(g, int)
  empty[::2] = uniform[0] * 2 if g > 1 else m
  empty[-1] += m - empty.sum() if g > 1 else 0
  short = np.floor(np.asarray(uniform) * 0.6).astype(int)
  over = np.asarray(uniform) + m // (2 * g) + 3  # overflows M inside a group
  return {"uniform": uniform, "skewed": list(skewed), "empty": list(np.maximum(empty, 0)),
          "short": list(short), "overflow": list(over)}


PATTERNS = ["uniform", "skewed", "empty", "short", "overflow"]


def operands(rng, m, k, n, g, dtype=BF16):
  return random_array(rng, (m, k), dtype), random_array(rng, (g, k, n), dtype, scale=0.2)


# ---------------------------------------------------------------------------
# ragged_dot: forward
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("g", [1, 4, 8])
def test_ragged_dot_patterns(rng, path, g, pattern):
  m, k, n = 300, 72, 40  # M not a multiple of 128
  sizes = size_patterns(g, m, rng)[pattern]
  lhs, rhs = operands(rng, m, k, n, g)
  out = jax.jit(jax_sm100.ragged_dot)(lhs, rhs, jnp.asarray(sizes, jnp.int32))
  assert out.shape == (m, n) and out.dtype == BF16
  ref = np_ragged(f64(lhs), f64(rhs), sizes)
  assert_matmul_close(out, ref, np_ragged(abs(f64(lhs)), abs(f64(rhs)), sizes), k, BF16,
                      what=f"{path[0]} G={g} {pattern} {sizes}")
  if path[0] == "cpu_ffi":
    assert GROUPED in launched(path[1])


@pytest.mark.parametrize("in_dtype,out_dtype", [(BF16, BF16), (BF16, F32), (F16, F16),
                                                (F16, F32), (BF16, F16), (F32, F32)])
def test_ragged_dot_dtypes_and_unaligned_shapes(rng, path, in_dtype, out_dtype):
  m, k, n, g = 77, 37, 13, 4  # K and N span no multiple of 16 bytes: the launch pads
  sizes = size_patterns(g, m, rng)["skewed"]
  lhs, rhs = operands(rng, m, k, n, g, in_dtype)
  out = jax.jit(lambda l, r, s: jax_sm100.ragged_dot(l, r, s, out_dtype=out_dtype))(
      lhs, rhs, jnp.asarray(sizes, jnp.int32))
  assert out.dtype == out_dtype and out.shape == (m, n)
  assert_matmul_close(out, np_ragged(f64(lhs), f64(rhs), sizes),
                      np_ragged(abs(f64(lhs)), abs(f64(rhs)), sizes), k, out_dtype)
  if path[0] == "cpu_ffi":
    assert (GROUPED in launched(path[1])) == (in_dtype != F32)  # f32 inputs: reference


def test_ragged_dot_matches_lax_including_overflow(rng, path):
  m, k, n, g = 200, 64, 24, 4
  lhs, rhs = operands(rng, m, k, n, g)
  for sizes in ([250, 0, 0, 0], [60, 100, 70, 90], [0, 0, 0, 1000], [10, 20, 30, 40]):
    gs = jnp.asarray(sizes, jnp.int32)
    ours = jax.jit(lambda l, r, s: jax_sm100.ragged_dot(l, r, s, preferred_element_type=F32))(
        lhs, rhs, gs)
    theirs = lax.ragged_dot(lhs.astype(F32), rhs.astype(F32), gs, precision=HIGHEST)
    # Two fp32 accumulations of the same exact products in different orders: each is
    # within K * 2^-24 * sum|a*b| of the exact sum (and so of each other, doubled).
    bound = 2 * k * 2.0**-24 * np_ragged(abs(f64(lhs)), abs(f64(rhs)), sizes) + 1e-30
    assert np.all(np.abs(f64(ours) - f64(theirs)) <= bound), str(sizes)


def test_negative_sizes_count_as_zero_when_traced(rng, path):
  # Invalid input; the documented behaviour where it cannot be refused (lax would let the
  # groups overlap instead).
  m, k, n, g = 40, 16, 8, 3
  lhs, rhs = operands(rng, m, k, n, g)
  sizes = [3, -2, 30]
  out = jax.jit(jax_sm100.ragged_dot)(lhs, rhs, jnp.asarray(sizes, jnp.int32))
  assert_matmul_close(out, np_ragged(f64(lhs), f64(rhs), sizes),
                      np_ragged(abs(f64(lhs)), abs(f64(rhs)), sizes), k, BF16)


def test_group_sizes_of_other_integer_dtypes(rng, path):
  m, k, n, g = 50, 16, 8, 3
  lhs, rhs = operands(rng, m, k, n, g)
  ref = np_ragged(f64(lhs), f64(rhs), [10, 20, 40])
  for dt in (np.int8, np.uint8, np.int16, np.uint32):
    out = jax_sm100.ragged_dot(lhs, rhs, np.asarray([10, 20, 40], dt))
    assert_matmul_close(out, ref, np_ragged(abs(f64(lhs)), abs(f64(rhs)), [10, 20, 40]), k, BF16)


def test_degenerate_shapes(rng, path):
  lhs = random_array(rng, (6, 8), BF16)
  out = jax_sm100.ragged_dot(lhs, jnp.zeros((0, 8, 8), BF16), jnp.zeros((0,), jnp.int32))
  assert out.shape == (6, 8) and not np.asarray(f64(out)).any()  # no groups: zeros
  out = jax_sm100.ragged_dot(jnp.zeros((0, 8), BF16), jnp.ones((2, 8, 8), BF16),
                             jnp.asarray([0, 0], jnp.int32))
  assert out.shape == (0, 8)
  out = jax_sm100.ragged_dot(jnp.zeros((5, 0), BF16), jnp.ones((2, 0, 8), BF16),
                             jnp.asarray([2, 3], jnp.int32))
  assert out.shape == (5, 8) and not np.asarray(f64(out)).any()


# ---------------------------------------------------------------------------
# ragged_dot: gradients
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["uniform", "skewed", "short", "overflow"])
@pytest.mark.parametrize("g", [1, 4, 8])
def test_ragged_dot_grads(rng, path, g, pattern):
  m, k, n = 150, 40, 24
  sizes = size_patterns(g, m, rng)[pattern]
  gs = jnp.asarray(sizes, jnp.int32)
  lhs, rhs = operands(rng, m, k, n, g)
  ct = random_array(rng, (m, n), BF16)
  _, vjp = jax.vjp(lambda l, r: jax_sm100.ragged_dot(l, r, gs), lhs, rhs)
  dl, dr = jax.jit(vjp)(ct)
  assert dl.dtype == BF16 and dr.dtype == BF16 and dr.shape == (g, k, n)
  L, R, C = f64(lhs), f64(rhs), f64(ct)
  dl_ref = np_ragged(C, np.swapaxes(R, 1, 2), sizes)
  dr_ref = np_kgrouped(L, C, sizes)
  # The float64 closed forms are jax.grad of lax.ragged_dot's (f32, exact inputs).
  _, lax_vjp = jax.vjp(lambda l, r: lax.ragged_dot(l, r, gs, precision=HIGHEST),
                       lhs.astype(F32), rhs.astype(F32))
  # lax's fp32 accumulation is within (terms) * 2^-24 * sum|products| of the float64 forms.
  bounds = (n * 2.0**-24 * np_ragged(abs(C), np.swapaxes(abs(R), 1, 2), sizes),
            m * 2.0**-24 * np_kgrouped(abs(L), abs(C), sizes))
  for ours, theirs, bound in zip((dl_ref, dr_ref), lax_vjp(ct.astype(F32)), bounds):
    assert np.all(np.abs(ours - f64(theirs)) <= bound + 1e-30)
  assert_matmul_close(dl, dl_ref, np_ragged(abs(C), np.swapaxes(abs(R), 1, 2), sizes), n, BF16,
                      what="dlhs")
  assert_matmul_close(dr, dr_ref, np_kgrouped(abs(L), abs(C), sizes), m, BF16, what="drhs")
  if path[0] == "cpu_ffi":
    assert {GROUPED, KGROUPED} <= launched(path[1])


def test_grads_with_f32_output_and_f16(rng, path):
  m, k, n, g = 90, 24, 16, 3
  sizes = [20, 0, 50]
  gs = jnp.asarray(sizes, jnp.int32)
  for dtype, out_dtype in ((BF16, F32), (F16, F16)):
    lhs, rhs = operands(rng, m, k, n, g, dtype)
    ct = random_array(rng, (m, n), out_dtype)
    _, vjp = jax.vjp(lambda l, r: jax_sm100.ragged_dot(l, r, gs, out_dtype=out_dtype), lhs, rhs)
    dl, dr = vjp(ct)
    assert dl.dtype == dtype and dr.dtype == dtype
    L, R, C = f64(lhs), f64(rhs), f64(ct)
    assert_matmul_close(dl, np_ragged(C, np.swapaxes(R, 1, 2), sizes),
                        np_ragged(abs(C), np.swapaxes(abs(R), 1, 2), sizes), n, dtype)
    assert_matmul_close(dr, np_kgrouped(L, C, sizes), np_kgrouped(abs(L), abs(C), sizes), m, dtype)


# ---------------------------------------------------------------------------
# ragged_dot_general
# ---------------------------------------------------------------------------

def test_ragged_dot_general_forms(rng, path):
  m, k, n, g = 60, 24, 16, 3
  sizes = [25, 5, 20]
  gs = jnp.asarray(sizes, jnp.int32)
  lhs, rhs = operands(rng, m, k, n, g)
  basic = jax_sm100.ragged_dot_general(lhs, rhs, gs, lax.RaggedDotDimensionNumbers(
      (([1], [1]), ([], [])), [0], [0]))
  assert_matmul_close(basic, np_ragged(f64(lhs), f64(rhs), sizes),
                      np_ragged(abs(f64(lhs)), abs(f64(rhs)), sizes), k, BF16)
  dy = random_array(rng, (m, n), BF16)
  kdims = lax.RaggedDotDimensionNumbers((([0], [0]), ([], [])), [0], [])
  f = lambda l, d: jax_sm100.ragged_dot_general(l, d, gs, kdims)
  out, vjp = jax.vjp(f, lhs, dy)
  L, D = f64(lhs), f64(dy)
  assert_matmul_close(out, np_kgrouped(L, D, sizes), np_kgrouped(abs(L), abs(D), sizes), m, BF16)
  ct = random_array(rng, (g, k, n), BF16)
  dl, dd = vjp(ct)
  C = f64(ct)
  b = np_bounds(sizes, m)
  dl_ref, dd_ref = np.zeros((m, k)), np.zeros((m, n))
  for i in range(g):
    dl_ref[b[i]:b[i + 1]] = D[b[i]:b[i + 1]] @ C[i].T
    dd_ref[b[i]:b[i + 1]] = L[b[i]:b[i + 1]] @ C[i]
  assert_matmul_close(dl, dl_ref, abs(D) @ abs(C).max(0).T, n, BF16)
  assert_matmul_close(dd, dd_ref, abs(L) @ abs(C).max(0), k, BF16)
  if path[0] == "cpu_ffi":
    assert {GROUPED, KGROUPED} <= launched(path[1])
  # A batched form goes to lax unchanged.
  bl, br = random_array(rng, (2, m, k), F32), random_array(rng, (g, 2, k, n), F32)
  bdims = lax.RaggedDotDimensionNumbers((([2], [2]), ([0], [1])), [1], [0])
  bgs = jnp.asarray([sizes, sizes], jnp.int32)
  np.testing.assert_array_equal(
      np.asarray(jax_sm100.ragged_dot_general(bl, br, bgs, bdims)),
      np.asarray(lax.ragged_dot_general(bl, br, bgs, bdims)))


# ---------------------------------------------------------------------------
# Dispatch: HLO, disabled targets, vmap, explain, other backends
# ---------------------------------------------------------------------------

def test_custom_calls_in_hlo_on_cpu_ffi(rng, cpu_ffi):
  m, k, n, g = 64, 128, 32, 4
  lhs, rhs = operands(rng, m, k, n, g)
  gs = jnp.asarray([16, 16, 0, 32], jnp.int32)
  loss = lambda l, r: jnp.sum(jax_sm100.ragged_dot(l, r, gs).astype(F32) ** 2)
  text = jax.jit(jax.grad(loss, (0, 1))).lower(lhs, rhs).as_text()
  for t in (GROUPED, KGROUPED):
    assert re.search(rf"custom_call.*{t}", text), t
  fp8 = lambda x, w: jnp.sum(jax_sm100.fp8_ragged_dot(x, w, gs).astype(F32) ** 2)
  text = jax.jit(jax.grad(fp8, (0, 1))).lower(lhs, rhs).as_text()
  for t in (FP8_GROUPED, KGROUPED, "jax_sm100_quantize_fp8"):
    assert t in text, t


def test_disabled_targets_take_the_reference(rng, cpu_ffi, monkeypatch):
  m, k, n, g = 64, 32, 16, 2
  lhs, rhs = operands(rng, m, k, n, g)
  gs = jnp.asarray([30, 20], jnp.int32)
  monkeypatch.setenv(_ffi_registry.DISABLE_TARGETS_ENV, GROUPED)
  jax.clear_caches()
  loss = lambda l, r: jnp.sum(jax_sm100.ragged_dot(l, r, gs).astype(F32) ** 2)
  text = jax.jit(jax.grad(loss, (0, 1))).lower(lhs, rhs).as_text()
  assert GROUPED not in text and KGROUPED in text
  rep = tuning.explain(lambda l, r: jax_sm100.ragged_dot(l, r, gs), lhs, rhs)
  assert any(d.path == "reference" and "disabled" in d.why for d in rep), str(rep)
  out = jax_sm100.ragged_dot(lhs, rhs, gs)
  assert_matmul_close(out, np_ragged(f64(lhs), f64(rhs), [30, 20]),
                      np_ragged(abs(f64(lhs)), abs(f64(rhs)), [30, 20]), k, BF16)


def test_explain_names_the_grouped_launches(rng, cpu_ffi):
  lhs, rhs = operands(rng, 300, 64, 256, 8)
  gs = jnp.full((8,), 37, jnp.int32)
  rep = tuning.explain(jax.grad(lambda l, r: jnp.sum(jax_sm100.ragged_dot(l, r, gs)), (0, 1)),
                       lhs, rhs)
  kernels = {d.target: d for d in rep if d.path == "kernel"}
  assert set(kernels) == {GROUPED, KGROUPED}, str(rep)
  assert "8 groups" in kernels[GROUPED].why and "tiles" in kernels[GROUPED].why


@pytest.mark.parametrize("in_axes", [(0, None, None), (0, None, 0), (None, 0, None), (0, 0, 0)])
def test_vmap(rng, path, in_axes):
  b, m, k, n, g = 3, 40, 16, 8, 3
  lhs = random_array(rng, (b, m, k) if in_axes[0] == 0 else (m, k), BF16)
  rhs = random_array(rng, (b, g, k, n) if in_axes[1] == 0 else (g, k, n), BF16)
  sizes = np.asarray([[10, 5, 20], [0, 40, 0], [13, 13, 13]])
  gs = jnp.asarray(sizes if in_axes[2] == 0 else sizes[0], jnp.int32)
  out = jax.jit(jax.vmap(jax_sm100.ragged_dot, in_axes=in_axes))(lhs, rhs, gs)
  for i in range(b):
    pick = lambda x, ax: x[i] if ax == 0 else x
    s = sizes[i] if in_axes[2] == 0 else sizes[0]
    L, R = f64(pick(lhs, in_axes[0])), f64(pick(rhs, in_axes[1]))
    assert_matmul_close(out[i], np_ragged(L, R, s), np_ragged(abs(L), abs(R), s), k, BF16)


def test_sm90_lowers_to_the_kernels_and_sm100_to_the_reference(rng, fake_sm90, monkeypatch):
  lhs, rhs = operands(rng, 64, 32, 16, 2)
  gs = jnp.asarray([30, 20], jnp.int32)
  f = jax.grad(lambda l, r: jnp.sum(jax_sm100.ragged_dot(l, r, gs).astype(F32)), (0, 1))
  text = jax.jit(f).lower(lhs, rhs).as_text()
  assert GROUPED in text and KGROUPED in text
  assert re.search(r"block_m = 128 : i32", text)
  monkeypatch.setattr(_backend, "_device_backend", lambda: "sm100")
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset({"jax_sm100_gemm"}))
  jax.clear_caches()
  text = jax.jit(f).lower(lhs, rhs).as_text()
  assert GROUPED not in text and KGROUPED not in text
  rep = tuning.explain(lambda l, r: jax_sm100.ragged_dot(l, r, gs), lhs, rhs)
  assert any("no sm_100a kernel" in d.why for d in rep), str(rep)


def _family_result(passed, family="grouped_gemm"):
  return _selftest_guard.FamilyResult(family, "sm100", "fake", passed, (), 0,
                                      None if passed else f"{family} self-test failed (planted)")


def test_sm100_grouped_kernels_behind_the_selftest(rng, fake_sm90, monkeypatch):
  """On sm100 every grouped target has an sm_100a kernel: the M-grouped (forward, lhs
  gradient), the K-grouped (rhs gradient) and the FP8 M-grouped (fp8_ragged_dot's forward
  and dx), each run once its family's first-use self-test passed (stubbed: lowering
  only); a failed self-test sends that family's target to the reference."""
  lhs, rhs = operands(rng, 64, 32, 16, 2)
  gs = jnp.asarray([30, 20], jnp.int32)
  f = jax.grad(lambda l, r: jnp.sum(jax_sm100.ragged_dot(l, r, gs).astype(F32)), (0, 1))
  monkeypatch.setattr(_backend, "_device_backend", lambda: "sm100")
  monkeypatch.setattr(_ffi_registry, "sm100_targets",
                      lambda: frozenset({"jax_sm100_gemm", "jax_sm100_quantize_fp8",
                                         "jax_sm100_quantize_fp8_dual", GROUPED, KGROUPED,
                                         FP8_GROUPED}))
  asked = []
  monkeypatch.setattr(_selftest_guard, "ensure",
                      lambda family, backend: asked.append(family) or _family_result(True, family))
  jax.clear_caches()
  text = jax.jit(f).lower(lhs, rhs).as_text()
  assert GROUPED in text and KGROUPED in text  # dlhs and drhs (the forward is dead in a grad)
  fwd = jax.jit(lambda l, r: jax_sm100.ragged_dot(l, r, gs)).lower(lhs, rhs).as_text()
  assert GROUPED in fwd
  fp8 = jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_ragged_dot(x, w, gs).astype(F32)), (0, 1))
  x, w = operands(rng, 64, 256, 128, 2)
  fp8_text = jax.jit(fp8).lower(x, w).as_text()
  assert FP8_GROUPED in fp8_text and KGROUPED in fp8_text  # dx in FP8, dw on the K-grouped
  assert {"grouped_gemm", "kgrouped_gemm", "fp8_grouped_gemm"} <= set(asked)
  rep = tuning.explain(f, lhs, rhs)
  assert any(d.target == GROUPED and d.path == "kernel" for d in rep), str(rep)
  assert any(d.target == KGROUPED and d.path == "kernel" for d in rep), str(rep)
  monkeypatch.setattr(_selftest_guard, "ensure", lambda family, backend: _family_result(False))
  jax.clear_caches()
  text = jax.jit(f).lower(lhs, rhs).as_text()
  assert GROUPED not in text
  rep = tuning.explain(lambda l, r: jax_sm100.ragged_dot(l, r, gs), lhs, rhs)
  assert any(d.target == GROUPED and "planted" in d.why for d in rep), str(rep)


def test_grouped_config_contract():
  for kind in ("gemm", "kgrouped", "fp8"):
    for m, n, k, g in ((8, 8, 8, 1), (8192, 7168, 2048, 128), (4096, 2048, 7168, 8)):
      cfg, why = tuning.grouped_config(m, n, k, g, kind=kind)
      assert (cfg.block_m, cfg.block_n) in tuning.GROUPED_TILINGS and why
  with pytest.raises(ValueError, match="not compiled"):
    tuning.GroupedConfig(64, 128)
  for kind, tiles in tuning.GROUPED_TILINGS_BY_KIND.items():
    assert set(tiles) <= set(tuning.GROUPED_TILINGS), kind


def test_grouped_config_fp8_tile_height_follows_group_rows():
  """256-row FP8 tiles for large groups (mean rows >= the table's minimum), 128 below."""
  need = _tuning_grouped.GROUPED_MIN_ROWS[(256, 128)]
  big, why = tuning.grouped_config(8 * need, 2048, 7168, 8, kind="fp8")
  small, _ = tuning.grouped_config(8 * need - 8, 2048, 7168, 8, kind="fp8")
  assert (big.block_m, small.block_m) == (256, 128), why
  assert "rows per group" in why
  for kind in ("gemm", "kgrouped"):  # no 256-row bf16 kernel
    assert tuning.grouped_config(8 * need, 2048, 7168, 8, kind=kind)[0].block_m == 128


def test_grouped_config_sm100_fp8_has_128_row_tiles_only(monkeypatch):
  """On sm100 the FP8 grouped kernel is 128 x 128 (128 x 256 runs it too): the heuristic
  never picks 256 rows there, a forced 256 x 128 raises naming the tiles it has, and the
  family's self-test covers exactly those tiles."""
  from jax_sm100 import selftest
  need = _tuning_grouped.GROUPED_MIN_ROWS[(256, 128)]
  assert tuning.grouped_config(8 * need, 2048, 7168, 8, kind="fp8")[0].block_m == 256  # sm90
  monkeypatch.setattr(_tuning_grouped, "_arch", lambda dev: "sm100")
  cfg, why = tuning.grouped_config(8 * need, 2048, 7168, 8, kind="fp8")
  assert (cfg.block_m, cfg.block_n) == (128, 128), why
  with pytest.raises(ValueError, match=r"no \(256, 128\) tile on sm100; it has \(128, 128\), "
                                       r"\(128, 256\)"):
    tuning.grouped_config(8 * need, 2048, 7168, 8, kind="fp8",
                          forced=tuning.GroupedConfig(256, 128))
  assert tuning.grouped_config(64, 256, 256, 2, kind="fp8",
                               forced=tuning.GroupedConfig(128, 256))[0].block_n == 256
  tiles = {c.tiling for c in selftest.cases("fp8_grouped_gemm", "sm100")}
  assert tiles == {(128, 128, 1), (128, 256, 1)}
  assert (256, 128, 1) in {c.tiling for c in selftest.cases("fp8_grouped_gemm", "sm90")}


def test_grouped_override_is_honoured_and_checked(rng, cpu_ffi):
  """override(grouped=...) reaches the custom call's attributes; a tile the kind lacks
  raises at trace time, naming the tiles it has; the CPU handlers accept exactly the
  per-kind tiles (FP8 256 x 128 computes the same product)."""
  m, k, n, g = 300, 256, 128, 3
  sizes = jnp.asarray([100, 0, 150], jnp.int32)
  x, w = operands(rng, m, k, n, g)  # bf16: the FP8 grouped target writes bf16
  fp8 = lambda x, w: jax_sm100.fp8_ragged_dot(x, w, sizes)
  want = np.asarray(jax.jit(fp8)(x, w)).astype(np.float64)
  with tuning.override(grouped=tuning.GroupedConfig(256, 128)):
    # A new function: a traced one keeps the configuration it was traced with.
    forced = jax.jit(lambda x, w: jax_sm100.fp8_ragged_dot(x, w, sizes))
    text = forced.lower(x, w).as_text()
    got = np.asarray(forced(x, w)).astype(np.float64)
    with pytest.raises(ValueError, match=r"'gemm' grouped kernel has no \(256, 128\) tile"):
      jax.jit(lambda x, w: jax_sm100.ragged_dot(x, w, sizes)).lower(x, w)
  assert re.search(r"block_m = 256 : i32", text), text[:2000]
  np.testing.assert_array_equal(got, want)  # the CPU handler's numerics do not depend on the tile
  with pytest.raises(ValueError, match="takes a GroupedConfig"):
    with tuning.override(grouped=(256, 128)):
      pass
  gs = np.asarray([1, 2], np.int32)
  bad = jax.ffi.ffi_call(GROUPED, jax.ShapeDtypeStruct((4, 8), BF16))
  with pytest.raises(Exception, match="no grouped kernel for"):
    call = lambda a, b, s: bad(a, b, s, trans_rhs=False, block_m=np.int32(256),
                               block_n=np.int32(128))
    jax.block_until_ready(jax.jit(call)(jnp.ones((4, 16), BF16), jnp.ones((2, 16, 8), BF16), gs))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

_L, _R = jnp.ones((10, 16), BF16), jnp.ones((3, 16, 8), BF16)
_GS = jnp.asarray([3, 3, 4], jnp.int32)
BAD = [
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS.astype(F32)), TypeError, "group_sizes.*integer"),
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS[:2]), ValueError, r"group_sizes.*\(3,\)"),
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS[None]), ValueError, "group_sizes.*shape"),
    (lambda: jax_sm100.ragged_dot(_L, _R, np.asarray([3, -1, 4])), ValueError,
     "group_sizes must be non-negative; group 1"),
    (lambda: jax_sm100.ragged_dot(_L, _R, [5, -5, 1]), ValueError, "non-negative"),
    (lambda: jax_sm100.ragged_dot(_L[None], _R, _GS), ValueError, "lhs must have rank 2"),
    (lambda: jax_sm100.ragged_dot(_L, _R[0], _GS), ValueError, "rhs must have rank 3"),
    (lambda: jax_sm100.ragged_dot(_L[:, :8], _R, _GS), ValueError, "same K"),
    (lambda: jax_sm100.ragged_dot(_L.astype(jnp.int32), _R, _GS), TypeError, "lhs must have dtype"),
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS, out_dtype=jnp.int8), TypeError, "out_dtype"),
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS, group_offset=jnp.zeros((1,), jnp.int32)),
     NotImplementedError, "group_offset"),
    (lambda: jax_sm100.ragged_dot(_L, _R, _GS, preferred_element_type=F32, out_dtype=BF16),
     ValueError, "disagree"),
    (lambda: jax_sm100.fp8_ragged_dot(_L, _R, _GS[:1]), ValueError, "group_sizes"),
    (lambda: jax_sm100.fp8_ragged_dot(_L, _R[0], _GS), ValueError, "w must have rank 3"),
    (lambda: jax_sm100.fp8_grouped_matmul(_L.astype(E4M3), jnp.ones((10, 1)), _R.astype(E4M3),
                                          jnp.ones((3, 1, 1)), _GS), ValueError, "same K"),
    (lambda: jax_sm100.fp8_grouped_matmul(_L.astype(E4M3), jnp.ones((10, 2)),
                                          jnp.swapaxes(_R, 1, 2).astype(E4M3),
                                          jnp.ones((3, 1, 1)), _GS), ValueError, "a_scale"),
    (lambda: jax_sm100.fp8_grouped_matmul(_L.astype(E4M3), jnp.ones((10, 1)),
                                          jnp.swapaxes(_R, 1, 2).astype(E4M3),
                                          jnp.ones((2, 1, 1)), _GS), ValueError, "b_scale"),
    (lambda: jax_sm100.fp8_grouped_matmul(_L, jnp.ones((10, 1)), jnp.swapaxes(_R, 1, 2),
                                          jnp.ones((3, 1, 1)), _GS), TypeError, "a must have"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input_raises_before_running(case, path):
  fn, exc, match = BAD[case]
  with pytest.raises(exc, match=match):
    fn()


def test_bad_input_raises_under_jit_too(path):
  with pytest.raises(ValueError, match=r"group_sizes.*\(3,\)"):
    jax.jit(jax_sm100.ragged_dot)(_L, _R, _GS[:2])
  with pytest.raises(TypeError, match="supports reverse-mode"):
    jax.jvp(lambda l: jax_sm100.ragged_dot(l, _R, _GS), (_L,), (_L,))


# ---------------------------------------------------------------------------
# FP8
# ---------------------------------------------------------------------------

def np_fp8_ragged(aq, a_s, bq, b_s, sizes):
  """Grouped (a * a_scale) @ (b[g] * b_scale[g])^T in float64, b (G, N, K)."""
  a = np_dequantize(aq, a_s, (1, 128))
  b = np.stack([np_dequantize(bq[i], b_s[i], (128, 128)) for i in range(bq.shape[0])])
  return np_ragged(a, np.swapaxes(b, 1, 2), sizes), np_ragged(
      abs(a), np.swapaxes(abs(b), 1, 2), sizes)


@pytest.mark.parametrize("k", [200, 100])  # K % 128 != 0; 100: K % 16 != 0 (padded)
@pytest.mark.parametrize("g,pattern", [(1, "short"), (4, "skewed"), (8, "empty"),
                                       (4, "overflow")])
@pytest.mark.parametrize("scale_t", [False, True])
def test_fp8_grouped_matmul(rng, path, g, pattern, k, scale_t):
  m, n = 150, 72
  sizes = size_patterns(g, m, rng)[pattern]
  x = random_array(rng, (m, k), F32)
  w = random_array(rng, (g, n, k), F32)
  aq, a_s = jax_sm100.quantize_fp8_blockwise(x, scale_transposed=scale_t)
  qs = [jax_sm100.quantize_fp8_blockwise(w[i], block=(128, 128)) for i in range(g)]
  bq, b_s = jnp.stack([q for q, _ in qs]), jnp.stack([s for _, s in qs])
  out = jax.jit(lambda *o: jax_sm100.fp8_grouped_matmul(*o, a_scale_transposed=scale_t))(
      aq, a_s, bq, b_s, jnp.asarray(sizes, jnp.int32))
  assert out.shape == (m, n) and out.dtype == BF16
  ref, absp = np_fp8_ragged(np.asarray(aq), np.asarray(a_s).T if scale_t else np.asarray(a_s),
                            np.asarray(bq), np.asarray(b_s), sizes)
  assert_matmul_close(out, ref, absp, k, BF16, what=f"G={g} {pattern}")
  if path[0] == "cpu_ffi":
    assert FP8_GROUPED in launched(path[1])
  with pytest.raises(TypeError, match="not differentiable"):
    jax.grad(lambda a: jnp.sum(jax_sm100.fp8_grouped_matmul(
        a, a_s, bq, b_s, jnp.asarray(sizes), a_scale_transposed=scale_t).astype(F32)))(aq)


@pytest.mark.parametrize("g,pattern,k,n", [(1, "uniform", 256, 128), (4, "skewed", 200, 72),
                                           (8, "overflow", 136, 264), (4, "short", 96, 40)])
def test_fp8_ragged_dot_forward_and_grads(rng, path, g, pattern, k, n):
  m = 160
  sizes = size_patterns(g, m, rng)[pattern]
  gs = jnp.asarray(sizes, jnp.int32)
  x = random_array(rng, (m, k), BF16)
  w = random_array(rng, (g, k, n), BF16, scale=0.1)
  ct = random_array(rng, (m, n), BF16)
  y, vjp = jax.vjp(lambda x, w: jax_sm100.fp8_ragged_dot(x, w, gs), x, w)
  dx, dw = jax.jit(vjp)(ct)
  assert (y.dtype, dx.dtype, dw.dtype) == (BF16, BF16, BF16)
  # The recipe in float64: x in 1x128 blocks along K, each w[g]^T in 128x128 blocks.
  xq, xs = np_quantize_f32(x, (1, 128))
  wts = [np_quantize_f32(np.asarray(f64(w[i])).T, (128, 128)) for i in range(g)]
  y_ref, y_abs = np_fp8_ragged(xq, xs, np.stack([q for q, _ in wts]),
                               np.stack([s for _, s in wts]), sizes)
  assert_matmul_close(y, y_ref, y_abs, k, BF16, what="y")
  # dx = Q(ct) (1x128 along N) @ Q(w[g])^T, the same 128x128 tiles of w read transposed.
  cq, cs = np_quantize_f32(ct, (1, 128))
  ws = [np_quantize_f32(np.asarray(f64(w[i])), (128, 128)) for i in range(g)]
  for (q, s), (qt, st) in zip(ws, wts):
    np.testing.assert_array_equal(np.asarray(q).view(np.uint8), np.asarray(qt).T.view(np.uint8))
    np.testing.assert_array_equal(s, st.T)
  dx_ref, dx_abs = np_fp8_ragged(cq, cs, np.stack([q for q, _ in ws]),
                                 np.stack([s for _, s in ws]), sizes)
  assert_matmul_close(dx, dx_ref, dx_abs, n, BF16, what="dx")
  # dw[g] = x_g^T @ ct_g from the unquantized operands (bf16 K-grouped product).
  X, C = f64(x), f64(ct)
  assert_matmul_close(dw, np_kgrouped(X, C, sizes), np_kgrouped(abs(X), abs(C), sizes), m, BF16,
                      what="dw")
  if path[0] == "cpu_ffi":
    assert {FP8_GROUPED, KGROUPED} <= launched(path[1])


def test_fp8_ragged_dot_other_dtypes_and_vmap(rng, path):
  m, k, n, g = 64, 128, 32, 2
  sizes = [40, 20]
  gs = jnp.asarray(sizes, jnp.int32)
  x, w = random_array(rng, (m, k), F32), random_array(rng, (g, k, n), F32)
  xq, xs = np_quantize_f32(x, (1, 128))
  wts = [np_quantize_f32(np.asarray(f64(w[i])).T, (128, 128)) for i in range(g)]
  y_ref, y_abs = np_fp8_ragged(xq, xs, np.stack([q for q, _ in wts]),
                               np.stack([s for _, s in wts]), sizes)
  y = jax_sm100.fp8_ragged_dot(x, w, gs)
  assert y.dtype == F32
  assert_matmul_close(y, y_ref, y_abs, k, F32)
  yb = jax.vmap(jax_sm100.fp8_ragged_dot, in_axes=(0, None, None))(
      jnp.stack([x, x]).astype(BF16), w.astype(BF16), gs)
  y1 = jax_sm100.fp8_ragged_dot(x.astype(BF16), w.astype(BF16), gs)
  # Under vmap the op takes lax's path, unbatched (cpu_ffi) the kernel's: the same
  # products summed in another order, so equal up to the output's rounding, not bits.
  # The reference is itself rounded to bf16: the two roundings may land one ulp apart
  # (a sum near a rounding boundary), so its rounding is the `extra` term.
  np.testing.assert_array_equal(np.asarray(f64(yb[0])), np.asarray(f64(yb[1])))
  assert_matmul_close(yb[0], f64(y1), y_abs, k, BF16, what="vmap",
                      extra=UNIT_ROUNDOFF[np.dtype(BF16)] * np.abs(f64(y1)))


# ---------------------------------------------------------------------------
# The MoE example
# ---------------------------------------------------------------------------

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "moe.py")


@pytest.mark.parametrize("variant", ["bf16", "fp8"])
def test_moe_example_trains(variant):
  pytest.importorskip("flax")
  pytest.importorskip("optax")
  env = dict(os.environ)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  args = [sys.executable, EXAMPLE, "--steps", "40", "--log-every", "10"]
  out = subprocess.run(args + (["--fp8"] if variant == "fp8" else []), env=env,
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stdout + out.stderr[-3000:]
  losses = [float(v) for v in re.findall(r"step +\d+ +loss ([\d.]+)", out.stdout)]
  assert len(losses) == 4 and losses[-1] < 0.9 * losses[0], out.stdout
  assert f"jax_sm100.backend() = {jax_sm100.backend()!r}" in out.stdout
