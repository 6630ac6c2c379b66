"""Kernel configurations of the grouped (mixture-of-experts) GEMMs: the compiled tiles per
kind, the default choice and its reasons. Re-exported by jax_sm100.tuning (the public
home); override(grouped=GroupedConfig(...)) replaces the choice for every grouped launch.

Kinds: 'gemm' (M-grouped bf16/fp16: ragged_dot's forward and lhs gradient), 'kgrouped'
(K-grouped: its rhs gradient), 'fp8' (FP8 blockwise M-grouped: fp8_grouped_matmul and
fp8_ragged_dot's forward and dx).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from jax_sm100._util import cdiv
from jax_sm100.tuning import _arch, _device, _int_field, current, sm_count

# (block_m, block_n) tiles each grouped target accepts (common/grouped_problem.h:
# kGroupedTilings, kFp8GroupedTilings); 128 x 256 on the FP8 target runs its 128 x 128
# kernel (an N tile lies in one 128-column B-scale block).
GROUPED_TILINGS_BY_KIND = {"gemm": ((128, 128), (128, 256)),
                           "kgrouped": ((128, 128), (128, 256)),
                           "fp8": ((128, 128), (128, 256), (256, 128))}
GROUPED_TILINGS = tuple(sorted({t for v in GROUPED_TILINGS_BY_KIND.values() for t in v}))
# Per architecture, kinds whose kernel has fewer tiles than the target accepts (elsewhere
# GROUPED_TILINGS_BY_KIND): the sm100 FP8 grouped kernel has 128-row tiles only (its
# handler refuses 256 x 128).
ARCH_GROUPED_TILINGS = {"sm100": {"fp8": ((128, 128), (128, 256))}}


def grouped_tilings(kind: str, arch: str) -> tuple:
  """The (block_m, block_n) tiles the `kind` grouped kernel has on `arch` ('sm90',
  'sm100'; other keys: every tile the target accepts)."""
  return ARCH_GROUPED_TILINGS.get(arch, {}).get(kind, GROUPED_TILINGS_BY_KIND[kind])


# Per architecture and kind: the tiles in order of preference. A tile is taken while its
# output tiles (an upper bound: every group may add one partial M tile) still fill every
# SM and the mean rows per group reach its "min_rows" (a group's last, partial tile
# wastes half a tile on average: 256-row tiles pay that back only on large groups).
GROUPED_HEURISTICS = {"sm90": {"gemm": ((128, 256), (128, 128)), "kgrouped": ((128, 128),),
                               "fp8": ((256, 128), (128, 128))},
                      "sm100": {"gemm": ((128, 256), (128, 128)), "kgrouped": ((128, 128),),
                                "fp8": ((128, 128),)}}
GROUPED_MIN_ROWS = {(256, 128): 1024}


@dataclasses.dataclass(frozen=True)
class GroupedConfig:
  """One grouped GEMM kernel choice: the output tile block_m x block_n (GROUPED_TILINGS;
  256 x 128 for the FP8 kind only), the FFI attributes block_m, block_n of the grouped
  targets."""
  block_m: int = 128
  block_n: int = 128

  def __post_init__(self):
    cls = type(self).__name__
    for f in ("block_m", "block_n"):
      object.__setattr__(self, f, _int_field(cls, f, getattr(self, f)))
    if (self.block_m, self.block_n) not in GROUPED_TILINGS:
      raise ValueError(f"{cls}: (block_m, block_n) = {(self.block_m, self.block_n)} is not "
                       f"compiled; valid: {', '.join(map(str, GROUPED_TILINGS))} (256-row "
                       f"tiles: FP8 only).")

  def attributes(self) -> dict:
    return dict(block_m=np.int32(self.block_m), block_n=np.int32(self.block_n))


_IN_FORCE = object()


def grouped_config(m: int, n: int, k: int, groups: int, *, kind: str = "gemm",
                   device=None, forced=_IN_FORCE) -> tuple[GroupedConfig, str]:
  """(config, why) for one grouped launch of `kind` ('gemm', 'kgrouped', 'fp8'): output
  (m, n) split into `groups` row groups (kgrouped: `groups` outputs of (k, n)). `forced`
  (default: the override(grouped=...) in force; the ops pass the one they were traced
  under) wins when not None; ValueError when `kind` lacks its tile."""
  if kind not in GROUPED_TILINGS_BY_KIND:
    raise ValueError(f"grouped_config: kind must be one of {sorted(GROUPED_TILINGS_BY_KIND)}; "
                     f"got {kind!r}.")
  if forced is _IN_FORCE:
    forced = current().grouped
  dev = _device(device)
  arch = _arch(dev)
  if forced is not None:
    tile = (forced.block_m, forced.block_n)
    have = grouped_tilings(kind, arch)
    if tile not in have:
      raise ValueError(f"jax_sm100.tuning.override(grouped={forced}): the {kind!r} grouped "
                       f"kernel has no {tile} tile on {arch}; it has "
                       f"{', '.join(map(str, have))}.")
    return forced, f"override(grouped={forced})"
  table = GROUPED_HEURISTICS.get(arch, GROUPED_HEURISTICS["sm90"])[kind]
  sms = sm_count(dev)
  mean_rows = m / max(groups, 1)
  for bm, bn in table:
    rows = groups * cdiv(k, bm) if kind == "kgrouped" else cdiv(m, bm) + groups
    tiles = rows * cdiv(n, bn)
    if (bm, bn) == table[-1]:
      return GroupedConfig(bm, bn), f"{bm}x{bn} tiles (<= {tiles} tiles on {sms} SMs)"
    need = GROUPED_MIN_ROWS.get((bm, bn), 0)
    if tiles >= sms and (kind == "kgrouped" or mean_rows >= need):
      why = f"{bm}x{bn} tiles (<= {tiles} tiles on {sms} SMs"
      return GroupedConfig(bm, bn), why + (f", {mean_rows:.0f} >= {need} rows per group)"
                                           if need else ")")
  raise AssertionError("unreachable")
