"""The self-test family of the bf16/fp16 M-grouped GEMM (`grouped_gemm`), registered in
jax_sm100._selftest_families.FAMILIES (which imports this module at its end)."""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import tuning
from jax_sm100._selftest_families import _UNIT_ROUNDOFF, FAMILIES, Case, Family

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
