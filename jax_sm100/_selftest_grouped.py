"""The self-test families of the grouped GEMMs (`grouped_gemm`: M-grouped bf16/fp16;
`kgrouped_gemm`: K-grouped bf16/fp16; `fp8_grouped_gemm`: M-grouped FP8 blockwise),
registered in jax_sm100._selftest_families.FAMILIES (which imports this module at its
end)."""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import tuning
from jax_sm100._selftest_families import (_UNIT_ROUNDOFF, FAMILIES, Case, Family, _fp8_expected,
                                         _fp8_scales)

# ---------------------------------------------------------------------------
# The bf16/fp16 M-grouped GEMM (jax_sm100_grouped_gemm: ragged_dot's forward and its lhs
# gradient). A case is out[r] = a[r] @ b[g(r)] over the rows of each group, zeros for the
# rows in no group; b (G, K, N), or (G, N, K) when trans_b (the lhs gradient's layout).
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GroupedCase(Case):
  """A grouped case: `sizes` the group sizes (static, so the float64 reference knows the
  groups); a_shape (M, K), b_shape (G, K, N) or (G, N, K) when trans_b."""
  sizes: tuple = ()

  def shapes(self) -> str:
    return super().shapes() + f", groups {list(self.sizes)}"


# (M, N, K, sizes, trans_b, in, out): uneven groups with an empty one and one smaller than a
# tile, rows in no group (sum < M); G = 1 ending mid-tile at M, in the lhs gradient's
# layout; many small and empty groups, K across many K blocks. M, N and K not multiples of
# the tile.
_GROUPED_CASES = (
    (300, 264, 200, (150, 0, 37, 90), False, "bfloat16", "bfloat16"),
    (257, 136, 72, (257,), True, "float16", "float32"),
    (250, 392, 520, (3, 0, 60, 1, 0, 129, 2, 0, 40), False, "bfloat16", "float32"),
)


def _grouped_cases(family: str, tilings: tuple) -> list:
  out = []
  for ti, tiling in enumerate(tilings):
    for ci, (m, n, k, sizes, tb, din, dout) in enumerate(_GROUPED_CASES):
      if (ti + ci) % 2 == 1 and din == "bfloat16":  # each tiling also sees f16 -> f16
        din, dout = "float16", "float16"
      b = (len(sizes), n, k) if tb else (len(sizes), k, n)
      out.append(GroupedCase(family, tiling, False, tb, din, dout, (m, k), b, sizes=sizes))
  return out


def _grouped_tilings(backend: str) -> tuple:
  """The M-grouped kernel's tiles (block_m, block_n, cluster 1) on every backend."""
  return tuple((bm, bn, 1) for bm, bn in tuning.GROUPED_TILINGS_BY_KIND["gemm"])


def _grouped_kernel(case: GroupedCase, a, b, c):
  from jax_sm100 import _grouped
  forced = tuning.GroupedConfig(case.tiling[0], case.tiling[1])
  fn = _grouped._grouped_kernel(case.trans_b, np.dtype(jnp.dtype(case.out_dtype)), forced)
  return jax.jit(fn)(a, b, jnp.asarray(case.sizes, jnp.int32))


def _grouped_reference(case: GroupedCase, a, b, c):
  from jax_sm100 import _grouped
  return jax.jit(lambda a, b: _grouped.ref_grouped(
      a, b, jnp.asarray(case.sizes, jnp.int32), case.trans_b, jnp.dtype(case.out_dtype)))(a, b)


def _grouped_expected(case: GroupedCase, a, b, c):
  """(float64 result, scalar tolerance) as _gemm_expected's, per group; the rows in no
  group must be zeros (a wrong group, a lost row or an unwritten one is O(1) or more)."""
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  if case.trans_b:
    b64 = np.swapaxes(b64, -1, -2)
  want = np.zeros((a.shape[0], b64.shape[-1]))
  absprod = np.zeros_like(want)
  start = 0
  for g, size in enumerate(case.sizes):
    end = min(start + max(size, 0), a.shape[0])
    want[start:end] = a64[start:end] @ b64[g]
    absprod[start:end] = np.abs(a64[start:end]) @ np.abs(b64[g])
    start = end
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * float(np.abs(want).max())
         + 8.0 * math.sqrt(max(case.k, 1)) * 2.0**-24 * float(absprod.max()) + 1e-30)
  return want, tol


FAMILIES["grouped_gemm"] = Family("grouped_gemm", ("jax_sm100_grouped_gemm",),
                                  lambda tilings: _grouped_cases("grouped_gemm", tilings),
                                  _grouped_tilings, _grouped_kernel, _grouped_reference,
                                  _grouped_expected)


# ---------------------------------------------------------------------------
# The K-grouped GEMM (jax_sm100_kgrouped_gemm: ragged_dot's weight gradient). A case is
# out[g] = lhs[rows g]^T @ dy[rows g], (G, K, N), zeros for an empty group; a_shape = lhs
# (M, K) (trans_a: the contraction runs over its rows), b_shape = dy (M, N).
# ---------------------------------------------------------------------------

# (M, N, K, sizes, in, out): groups ending inside a 16-row slice next to rows in no group,
# an empty group and one of a single row; G = 1 over every row; many small groups.
_KGROUPED_CASES = (
    (300, 136, 200, (37, 0, 150, 1, 70), "bfloat16", "float32"),
    (257, 264, 136, (257,), "float16", "float16"),
    (250, 392, 72, (3, 0, 60, 1, 0, 129, 2, 0, 40), "bfloat16", "bfloat16"),
)


def _kgrouped_cases(family: str, tilings: tuple) -> list:
  return [GroupedCase(family, tiling, True, False, din, dout, (m, k), (m, n), sizes=sizes)
          for tiling in tilings for m, n, k, sizes, din, dout in _KGROUPED_CASES]


def _kgrouped_tilings(backend: str) -> tuple:
  return tuple((bm, bn, 1) for bm, bn in tuning.grouped_tilings("kgrouped", backend))


def _kgrouped_kernel(case: GroupedCase, a, b, c):
  from jax_sm100._launch import grouped as launch
  forced = tuning.GroupedConfig(case.tiling[0], case.tiling[1])
  fn = launch._kgrouped_kernel(np.dtype(jnp.dtype(case.out_dtype)), forced)
  return jax.jit(fn)(a, b, jnp.asarray(case.sizes, jnp.int32))


def _kgrouped_reference(case: GroupedCase, a, b, c):
  from jax_sm100._launch import grouped as launch
  return jax.jit(lambda a, b: launch.ref_kgrouped(
      a, b, jnp.asarray(case.sizes, jnp.int32), jnp.dtype(case.out_dtype)))(a, b)


def _kgrouped_expected(case: GroupedCase, a, b, c):
  """(float64 result, scalar tolerance) as _grouped_expected's, per group over its rows."""
  a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
  want = np.zeros((len(case.sizes), a64.shape[1], b64.shape[1]))
  absprod = np.zeros_like(want)
  start = 0
  for g, size in enumerate(case.sizes):
    end = min(start + max(size, 0), a64.shape[0])
    want[g] = a64[start:end].T @ b64[start:end]
    absprod[g] = np.abs(a64[start:end]).T @ np.abs(b64[start:end])
    start = end
  tol = (2.0 * _UNIT_ROUNDOFF[case.out_dtype] * float(np.abs(want).max())
         + 8.0 * math.sqrt(max(case.k, 1)) * 2.0**-24 * float(absprod.max()) + 1e-30)
  return want, tol


FAMILIES["kgrouped_gemm"] = Family("kgrouped_gemm", ("jax_sm100_kgrouped_gemm",),
                                   lambda tilings: _kgrouped_cases("kgrouped_gemm", tilings),
                                   _kgrouped_tilings, _kgrouped_kernel, _kgrouped_reference,
                                   _kgrouped_expected)


# ---------------------------------------------------------------------------
# The FP8 blockwise M-grouped GEMM (jax_sm100_fp8_grouped_gemm: fp8_grouped_matmul,
# fp8_ragged_dot's forward and dx). A case is a (M, K) e4m3 x b (G, N, K) e4m3 per group
# with the dense FP8 family's scales (powers of two read off each block's first element,
# per group for b), bf16 out, zeros for the rows in no group.
# ---------------------------------------------------------------------------

# (M, N, K, sizes): uneven groups with an empty one and one smaller than a tile, rows in
# no group, N across three B-scale blocks; G = 1 ending mid-tile; many small and empty
# groups, K across five K blocks (the rings wrap) with a partial last one.
_FP8_GROUPED_CASES = (
    (300, 264, 272, (150, 0, 37, 90)),
    (257, 136, 144, (257,)),
    (250, 392, 560, (3, 0, 60, 1, 0, 129, 2, 0, 40)),
)


def _fp8_grouped_cases(family: str, tilings: tuple) -> list:
  out = []
  for ti, tiling in enumerate(tilings):
    for ci, (m, n, k, sizes) in enumerate(_FP8_GROUPED_CASES):
      if (ti + ci) % 2 == 1 and len(tilings) > 1 and ci != 1:
        continue  # each tiling sees the G = 1 case and every other of the rest
      out.append(GroupedCase(family, tiling, False, True, "float8_e4m3fn", "bfloat16", (m, k),
                             (len(sizes), n, k), sizes=sizes))
  return out


def _fp8_grouped_tilings(backend: str) -> tuple:
  """The FP8 grouped target's tiles on `backend` (sm100: 128-row ones; elsewhere, CPUs
  included, the sm90 set)."""
  return tuple((bm, bn, 1) for bm, bn in tuning.grouped_tilings("fp8", backend))


def _fp8_grouped_scales(a, b):
  """a_scale (M, ceil(K/128)), b_scale (G, ceil(N/128), ceil(K/128)) as _fp8_scales."""
  sa = _fp8_scales(a, b[0])[0]
  sb = np.stack([_fp8_scales(a, bg)[1] for bg in np.asarray(b)])
  return sa, sb


def _fp8_grouped_kernel(case: GroupedCase, a, b, c):
  from jax_sm100._launch import grouped as launch
  from jax_sm100._launch.fp8 import transpose_a_scale
  sa, sb = _fp8_grouped_scales(a, b)
  forced = tuning.GroupedConfig(case.tiling[0], case.tiling[1])
  fn = launch._fp8_kernel(forced)
  gs = jnp.asarray(case.sizes, jnp.int32)
  return jax.jit(lambda a, sa, b, sb: fn(a, transpose_a_scale(sa), b, sb, gs))(a, sa, b, sb)


def _fp8_grouped_reference(case: GroupedCase, a, b, c):
  from jax_sm100._launch import grouped as launch
  sa, sb = _fp8_grouped_scales(a, b)
  gs = jnp.asarray(case.sizes, jnp.int32)
  return jax.jit(lambda a, sa, b, sb: launch.ref_fp8_grouped(
      a, sa, b, sb, gs, jnp.dtype(case.out_dtype)))(a, sa, b, sb)


def _fp8_grouped_expected(case: GroupedCase, a, b, c):
  """(float64 result, scalar tolerance): per group, the dense FP8 family's expectation on
  its rows (_fp8_expected's bound); zeros for the rows in no group."""
  a, b = np.asarray(a), np.asarray(b)
  want = np.zeros((a.shape[0], b.shape[1]))
  tol = 1e-30
  start = 0
  for g, size in enumerate(case.sizes):
    end = min(start + max(size, 0), a.shape[0])
    if end > start:
      dense = dataclasses.replace(case, a_shape=(end - start, a.shape[1]), b_shape=b.shape[1:])
      want[start:end], t = _fp8_expected(dense, a[start:end], b[g], None)
      tol = max(tol, t)
    start = end
  return want, tol


FAMILIES["fp8_grouped_gemm"] = Family("fp8_grouped_gemm", ("jax_sm100_fp8_grouped_gemm",),
                                      lambda tilings: _fp8_grouped_cases("fp8_grouped_gemm", tilings),
                                      _fp8_grouped_tilings, _fp8_grouped_kernel,
                                      _fp8_grouped_reference, _fp8_grouped_expected)
