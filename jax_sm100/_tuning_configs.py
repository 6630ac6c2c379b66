"""The kernel configurations, the FFI attribute contract of the GEMM targets: which
(block_m, block_n, cluster...) combinations each architecture's kernels are compiled
for, and the frozen GemmConfig / Fp8Config values that carry one choice. Re-exported by
jax_sm100.tuning, the public home of these names."""
from __future__ import annotations

import dataclasses

import numpy as np

# ---------------------------------------------------------------------------
# Configurations (the FFI attribute contract)
# ---------------------------------------------------------------------------

# (block_m, block_n, cluster_m) combinations the bf16/fp16 GEMM is compiled for: every
# one on sm_90a (the FFI attribute contract, what GemmConfig accepts).
GEMM_TILINGS = ((128, 256, 1), (128, 256, 2), (128, 128, 1), (128, 128, 2), (64, 128, 1),
                (64, 64, 1))
# The sm_100a GEMM's tilings, a subset: 128x256 and 128x128 tiles on one SM, and the 2-SM
# pair (128, 256, 2): a cluster of two CTAs issuing one 256x256 UMMA (cta_group::2), each
# CTA holding 128 rows of A and half of B.
SM100_GEMM_TILINGS = ((128, 256, 1), (128, 128, 1), (128, 256, 2))
# The tilings each architecture's GEMM kernel has (HEURISTICS keys); a launch on an
# architecture with an entry here takes only these.
ARCH_GEMM_TILINGS = {"sm90": GEMM_TILINGS, "sm100": SM100_GEMM_TILINGS}
# The sm90 tilings that also exist as split-K kernels (GemmConfig.split_k > 1: a cluster
# of split_k CTAs per output tile, each running 1/split_k of K, the partials reduced
# through distributed shared memory), and the largest split (the portable cluster size).
SPLIT_K_TILINGS = ((64, 64, 1), (64, 128, 1))
MAX_SPLIT_K = 8
# A measured candidate of the dispatch (tables, autotune, the suite): a tiling, or a
# tiling with a fourth entry 0 for "split K by split_k_for(shape)" ('64x64c1k').
ARCH_SPLIT_K_TILINGS = {"sm90": SPLIT_K_TILINGS, "sm100": ()}
# (block_m, block_n, cluster, pair_along_n) combinations the FP8 GEMM is compiled for;
# the residual FP8 GEMM runs the 128-row ones only.
FP8_TILINGS = ((128, 64, 1, False), (128, 64, 2, False), (128, 128, 1, False),
               (128, 128, 2, False), (192, 128, 1, False), (256, 128, 1, False),
               (256, 128, 2, True))
# The sm_100a FP8 GEMM's forms, a subset: 128x128 tiles on one SM (plain and residual).
SM100_FP8_TILINGS = ((128, 128, 1, False),)
# The forms each architecture's FP8 kernel has (HEURISTICS keys); a launch on an
# architecture with an entry here takes only these.
ARCH_FP8_TILINGS = {"sm90": FP8_TILINGS, "sm100": SM100_FP8_TILINGS}
GROUP_M_RANGE = (1, 64)


def fp8_residual_has(block_m: int) -> bool:
  """Whether the residual FP8 target (the beta * c epilogue) has forms of block_m rows:
  it has the 128-row tiles only. The one home of that rule (Fp8Config.supports_residual,
  the heuristic, the measured dispatch and the self-test ask it)."""
  return block_m == 128


def _int_field(cls: str, name: str, v) -> int:
  if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
    raise ValueError(f"{cls}: {name} must be an int; got {v!r}.")
  return int(v)


def _check_split_k(cls: str, v) -> int:
  v = _int_field(cls, "split_k", v)
  if not 1 <= v <= MAX_SPLIT_K:
    raise ValueError(f"{cls}: split_k must be in [1, {MAX_SPLIT_K}]; got {v}.")
  return v


def _check_group_m(cls: str, v) -> int:
  v = _int_field(cls, "group_m", v)
  lo, hi = GROUP_M_RANGE
  if not lo <= v <= hi:
    raise ValueError(f"{cls}: group_m must be in [{lo}, {hi}]; got {v}.")
  return v


@dataclasses.dataclass(frozen=True)
class GemmConfig:
  """One compiled bf16/fp16 GEMM kernel choice.

  block_m x block_n: the output tile per CTA; cluster_m: CTAs per cluster along M
  (2: pairs of M tiles share a multicast B tile); group_m: M tiles per group of the
  persistent tile order (L2 reuse); split_k > 1: the split-K kernel (a cluster of
  split_k CTAs per output tile, each running 1/split_k of K; SPLIT_K_TILINGS only, sm90
  only). Valid (block_m, block_n, cluster_m): GEMM_TILINGS; group_m in [1, 64];
  split_k in [1, MAX_SPLIT_K]. The sm100 kernel has a subset, SM100_GEMM_TILINGS (there
  (128, 256, 2) is the 2-SM pair); a launch on sm100 with another tiling raises
  ValueError when it is traced.
  """
  block_m: int
  block_n: int
  cluster_m: int = 1
  group_m: int = 8
  split_k: int = 1

  def __post_init__(self):
    cls = type(self).__name__
    for f in ("block_m", "block_n", "cluster_m"):
      object.__setattr__(self, f, _int_field(cls, f, getattr(self, f)))
    object.__setattr__(self, "group_m", _check_group_m(cls, self.group_m))
    object.__setattr__(self, "split_k", _check_split_k(cls, self.split_k))
    tiling = (self.block_m, self.block_n, self.cluster_m)
    if tiling not in GEMM_TILINGS:
      raise ValueError(f"{cls}: (block_m, block_n, cluster_m) = {tiling} is not compiled; "
                       f"valid: {', '.join(map(str, GEMM_TILINGS))}.")
    if self.split_k > 1 and tiling not in SPLIT_K_TILINGS:
      raise ValueError(f"{cls}: split_k > 1 needs a split-K tiling "
                       f"({', '.join(map(str, SPLIT_K_TILINGS))}); got {tiling}.")

  def attributes(self) -> dict:
    """The FFI attributes of jax_sm100_gemm[_residual] for this choice."""
    return dict(block_m=np.int32(self.block_m), block_n=np.int32(self.block_n),
                cluster_m=np.int32(self.cluster_m), group_m=np.int32(self.group_m),
                split_k=np.int32(self.split_k))


@dataclasses.dataclass(frozen=True)
class Fp8Config:
  """One compiled FP8 blockwise GEMM kernel choice.

  block_m x block_n: the output tile per CTA (128-row tiles overlap the scale
  promotion with the next MMAs; 192 rows: three math warpgroups; 256 rows: two
  128-row waves per K block); cluster: CTAs per cluster (2: a pair sharing a
  multicast tile), pair_along_n: the pair lies along N and shares A (256-row tiles)
  rather than along M sharing B; group_m: M tiles (in cluster rows) per group of the
  persistent tile order. Valid (block_m, block_n, cluster, pair_along_n):
  FP8_TILINGS; group_m in [1, 64]. The residual target takes 128-row tiles only.
  """
  block_m: int
  block_n: int
  cluster: int = 1
  pair_along_n: bool = False
  group_m: int = 8

  def __post_init__(self):
    cls = type(self).__name__
    for f in ("block_m", "block_n", "cluster"):
      object.__setattr__(self, f, _int_field(cls, f, getattr(self, f)))
    if not isinstance(self.pair_along_n, (bool, np.bool_)):
      raise ValueError(f"{cls}: pair_along_n must be a bool; got {self.pair_along_n!r}.")
    object.__setattr__(self, "pair_along_n", bool(self.pair_along_n))
    object.__setattr__(self, "group_m", _check_group_m(cls, self.group_m))
    tiling = (self.block_m, self.block_n, self.cluster, self.pair_along_n)
    if tiling not in FP8_TILINGS:
      raise ValueError(f"{cls}: (block_m, block_n, cluster, pair_along_n) = {tiling} is not "
                       f"compiled; valid: {', '.join(map(str, FP8_TILINGS))}.")

  @property
  def supports_residual(self) -> bool:
    """Whether the residual target (beta * c epilogue) has this kernel: 128-row tiles."""
    return fp8_residual_has(self.block_m)

  def attributes(self) -> dict:
    """The FFI attributes of jax_sm100_fp8_gemm[_residual] for this choice."""
    return dict(block_m=np.int32(self.block_m), block_n=np.int32(self.block_n),
                cluster=np.int32(self.cluster), pair_along_n=bool(self.pair_along_n),
                group_m=np.int32(self.group_m))
