"""Kernel tuning as data: configs, the default choice per GPU kind, overrides.

Every kernel launch carries its configuration as FFI attributes (visible in the
lowered HLO and part of the jit cache key):

  GemmConfig(block_m, block_n, cluster_m, group_m, split_k)   bf16/fp16 GEMMs
  Fp8Config(block_m, block_n, cluster, pair_along_n, group_m)  FP8 blockwise GEMMs

The default for a call comes from `gemm_config` / `fp8_config`: rules whose
numbers (candidate tiles, efficiency guesses, thresholds, group sizes) live in
the HEURISTICS table, keyed by architecture, and that depend on the device's SM
count (`sm_count`). A bf16/fp16 GEMM product is first dispatched by measurements
(jax_sm100._dispatch_table: the jax_sm100.autotune cache, then the shipped table
of the GPU kind): our kernel with a measured tiling, the kernel with the heuristic,
or XLA's own dot where that was measured faster; override(dispatch=...) forces it.
`override(...)` replaces the choice for the calls traced inside it;
`explain(f, *args)` lists which path and configuration each of f's products takes,
and why.

Like jax_sm100.backend(), all of this is read when an op is traced: a function
already traced (and cached) by jax.jit keeps the configuration it was traced
with. Trace again (a new jax.jit, or jax.clear_caches()) to apply an override
to it.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import warnings
from typing import Any, Mapping

import numpy as np

from jax_sm100 import _dispatch_table
from jax_sm100._tuning_tables import DEFAULT_SM_COUNT, HEURISTICS, SM_COUNTS
from jax_sm100._util import cdiv

__all__ = [
    "GemmConfig", "Fp8Config", "GEMM_TILINGS", "SM100_GEMM_TILINGS", "ARCH_GEMM_TILINGS",
    "FP8_TILINGS", "HEURISTICS", "SM_COUNTS", "DEFAULT_SM_COUNT", "sm_count", "gemm_config",
    "gemm_tilings", "fp8_config", "override", "current", "fp8_fused_scales", "explain",
    "Settings",
    "GroupedConfig", "GROUPED_TILINGS", "GROUPED_TILINGS_BY_KIND", "ARCH_GROUPED_TILINGS",
    "grouped_tilings", "grouped_config",
    "SM100_FP8_TILINGS", "ARCH_FP8_TILINGS",
    "SPLIT_K_TILINGS", "ARCH_SPLIT_K_TILINGS", "MAX_SPLIT_K", "gemm_candidates", "split_k_for",
    "candidate_config",
]

# The configurations (their own module; re-exported here).
from jax_sm100._tuning_configs import (  # noqa: F401  (re-exported)
    ARCH_FP8_TILINGS, ARCH_GEMM_TILINGS, ARCH_SPLIT_K_TILINGS, FP8_TILINGS, GEMM_TILINGS,
    GROUP_M_RANGE, MAX_SPLIT_K, SM100_FP8_TILINGS, SM100_GEMM_TILINGS, SPLIT_K_TILINGS,
    Fp8Config, GemmConfig, _check_group_m, _check_split_k, _int_field, fp8_residual_has)


# ---------------------------------------------------------------------------
# The SM count (the heuristic table and SM counts are data: _tuning_tables.py)
# ---------------------------------------------------------------------------


def _device(device):
  if device is not None:
    return device
  from jax_sm100 import _backend
  return _backend._default_device()


def sm_count(device=None) -> int:
  """Streaming multiprocessors of `device` (default: the default device): its
  `core_count` where it reports one, else SM_COUNTS by device kind, else 132."""
  dev = _device(device)
  if getattr(dev, "platform", "gpu") == "gpu":
    n = getattr(dev, "core_count", None)
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0:
      return int(n)
  kind = str(getattr(dev, "device_kind", "")).lower()
  for sub, count in SM_COUNTS:
    if sub.lower() in kind:
      return count
  return DEFAULT_SM_COUNT


def _arch(device) -> str:
  """The HEURISTICS key for `device`: 'sm100' for compute capability 10.0, else the
  sm90 table (the one used where a device has no entry of its own: CPUs, cpu_ffi)."""
  from jax_sm100 import _backend
  cc = _backend._compute_capability(device) if hasattr(device, "platform") else None
  key = f"sm{cc[0]}{cc[1]}" if cc else "sm90"
  return key if key in HEURISTICS else "sm90"


def _table(device, kind: str) -> tuple[str, dict]:
  """(arch, HEURISTICS[arch][kind]) for `device`; the sm90 table where the arch has no
  `kind` entry."""
  arch = _arch(device)
  if kind not in HEURISTICS[arch]:
    arch = "sm90"
  return arch, HEURISTICS[arch][kind]


def gemm_tilings(device=None) -> tuple:
  """The (block_m, block_n, cluster_m) tilings the bf16/fp16 GEMM kernel of `device`'s
  architecture has (default: the default device): SM100_GEMM_TILINGS on compute
  capability 10.0, else GEMM_TILINGS."""
  return ARCH_GEMM_TILINGS.get(_arch(_device(device)), GEMM_TILINGS)


def gemm_candidates(device=None) -> tuple:
  """What the measured dispatch chooses among on `device`: gemm_tilings(device), then
  each split-K tiling as (block_m, block_n, cluster_m, 0), the 0 standing for
  split_k_for(the product's shape) (named '64x64c1k' in tables and the suite)."""
  arch = _arch(_device(device))
  return gemm_tilings(device) + tuple(t + (0,) for t in ARCH_SPLIT_K_TILINGS.get(arch, ()))


def split_k_for(m: int, n: int, k: int, batch: int, block_m: int, block_n: int,
                sms: int) -> int:
  """The split-K factor of an m x n x k product (`batch` of them) on block_m x block_n
  tiles: as many K slices as keep the tiles' clusters within `ctas_per_sm` CTAs per SM,
  each slice at least `min_k_blocks` K blocks of 64, at most MAX_SPLIT_K
  (HEURISTICS["sm90"]["gemm"]["split_k"]); 1: no split."""
  rule = HEURISTICS["sm90"]["gemm"]["split_k"]
  tiles = max(1, batch * cdiv(m, block_m) * cdiv(n, block_n))
  s = min(MAX_SPLIT_K, rule["ctas_per_sm"] * sms // tiles, cdiv(k, 64) // rule["min_k_blocks"])
  return max(1, s)


def candidate_config(candidate, m: int, n: int, k: int, batch: int = 1,
                     device=None) -> GemmConfig:
  """The GemmConfig of a gemm_candidates() entry for one product (group_m from the
  heuristic table; a split candidate's split_k from split_k_for)."""
  dev = _device(device)
  group_m = _table(dev, "gemm")[1]["group_m"]
  bm, bn, cm = (int(v) for v in candidate[:3])
  split = 1
  if len(candidate) > 3:
    split = int(candidate[3]) or split_k_for(m, n, k, batch, bm, bn, sm_count(dev))
  return GemmConfig(bm, bn, cm, group_m, split)


# ---------------------------------------------------------------------------
# The default choice
# ---------------------------------------------------------------------------

def _cheapest_tile(tiles, m: int, n: int, batch: int, sms: int) -> tuple[tuple, str]:
  """((block_m, block_n, efficiency, tile count), why) for the entry of `tiles`
  ((block_m, block_n, efficiency) each) with the fewest estimated waves * tile area /
  efficiency, the first listed on a tie: the cost model of every architecture's rule."""
  best, best_cost = None, 0.0
  for bm, bn, eff in tiles:
    t = batch * cdiv(m, bm) * cdiv(n, bn)
    cost = cdiv(t, sms) * bm * bn / eff
    if best is None or cost < best_cost:
      best, best_cost = (bm, bn, eff, t), cost
  bm, bn, eff, t = best
  return best, (f"{bm}x{bn} tiles: fewest estimated waves*area/efficiency ({cdiv(t, sms)} "
                f"wave(s) of {t} tiles on {sms} SMs, efficiency {eff})")


def _gemm_choice(m: int, n: int, k: int, batch: int, sms: int,
                 table) -> tuple[GemmConfig, str]:
  if "pair" in table:
    return _gemm_choice_sm100(m, n, batch, sms, table)
  rule = table["split_k"]
  if "tiling" in rule and m <= rule["max_m"] and k >= rule["min_k"]:
    bm, bn, cm = rule["tiling"]
    tiles = batch * cdiv(m, bm) * cdiv(n, bn)
    split = split_k_for(m, n, k, batch, bm, bn, sms)
    if tiles <= rule["max_tile_share"] * sms and split > 1:
      return (GemmConfig(bm, bn, cm, table["group_m"], split),
              f"split-K: {tiles} tiles of {bm}x{bn} on {sms} SMs, K = {k} split {split} ways "
              f"(M <= {rule['max_m']}, K >= {rule['min_k']}, tiles <= "
              f"{rule['max_tile_share']} x SMs)")
  (bm, bn, _, tiles), why = _cheapest_tile(table["tiles"], m, n, batch, sms)
  rule = table["cluster_m"]
  m_tiles = cdiv(m, bm)
  pairs = (bm in rule["block_m"] and m_tiles >= rule["min_m_tiles"]
           and (m_tiles % rule["size"] == 0 or not rule["even_m_tiles"])
           and (tiles > sms or not rule["more_tiles_than_sms"]))
  cluster = rule["size"] if pairs else 1
  why = (f"{why}; cluster {cluster}"
         + (" (M tiles pair up, more tiles than SMs)" if pairs else ""))
  return GemmConfig(bm, bn, cluster, table["group_m"]), why


def _gemm_choice_sm100(m: int, n: int, batch: int, sms: int, table) -> tuple[GemmConfig, str]:
  """The sm100 rule (HEURISTICS["sm100"]["gemm"]): the sm90 cost model over the 1-SM
  tiles; a 128x256 choice becomes the 2-SM pair when M has two or more tiles and the
  pairs fill the SMs."""
  (bm, bn, _, _), why = _cheapest_tile(table["tiles"], m, n, batch, sms)
  rule = table["pair"]
  pbm, pbn, pcl = rule["tiling"]
  m_tiles = cdiv(m, pbm)
  pairs = batch * cdiv(m_tiles, pcl) * cdiv(n, pbn)
  if ((bm, bn) == (pbm, pbn) and m_tiles >= rule["min_m_tiles"]
      and (pairs * pcl >= sms or not rule["fill_sms"])):
    why += f"; the 2-SM pair ({pairs} pair tiles of {pcl * pbm}x{pbn} fill {sms} SMs)"
    return GemmConfig(pbm, pbn, pcl, table["group_m"]), why
  return GemmConfig(bm, bn, 1, table["group_m"]), why + "; 1 SM per tile"


def _check_arch_tiling(cfg: GemmConfig, arch: str, how: str) -> None:
  """ValueError when `cfg`'s tiling is not one that `arch`'s GEMM kernel has."""
  tilings = ARCH_GEMM_TILINGS.get(arch)
  tiling = (cfg.block_m, cfg.block_n, cfg.cluster_m)
  if cfg.split_k > 1 and tiling not in ARCH_SPLIT_K_TILINGS.get(arch, SPLIT_K_TILINGS):
    raise ValueError(f"jax_sm100.tuning: {how}: split_k = {cfg.split_k} has no {arch} kernel "
                     f"(the split-K GEMM is sm90's, tilings "
                     f"{', '.join(map(str, SPLIT_K_TILINGS))}).")
  if tilings is not None and tiling not in tilings:
    raise ValueError(f"jax_sm100.tuning: {how}: (block_m, block_n, cluster_m) = {tiling} has "
                     f"no {arch} GEMM kernel; the {arch} GEMM has "
                     f"{', '.join(map(str, tilings))}.")


def _check_arch_fp8_tiling(cfg: Fp8Config, arch: str, how: str) -> None:
  """ValueError when `cfg`'s form is not one that `arch`'s FP8 kernel has."""
  tilings = ARCH_FP8_TILINGS.get(arch)
  tiling = (cfg.block_m, cfg.block_n, cfg.cluster, cfg.pair_along_n)
  if tilings is not None and tiling not in tilings:
    raise ValueError(f"jax_sm100.tuning: {how}: (block_m, block_n, cluster, pair_along_n) = "
                     f"{tiling} has no {arch} FP8 kernel; the {arch} FP8 GEMM has "
                     f"{', '.join(map(str, tilings))}.")


def gemm_config(m: int, n: int, k: int, *, batch: int = 1, residual: bool = False,
                device=None) -> GemmConfig:
  """The default GemmConfig for a (batch of) m x n x k GEMM(s) on `device`.

  m, n: the kernel's output rows and columns (after the launch layer's 16-byte
  padding; explain() shows them); batch: the output's batch count. The rule is the
  same with and without the residual epilogue; k enters only the split-K choice.
  """
  del residual
  dev = _device(device)
  return _gemm_choice(m, n, k, batch, sm_count(dev), _table(dev, "gemm")[1])[0]


def _fp8_choice(m: int, n: int, residual: bool, sms: int, table) -> tuple[Fp8Config, str]:
  if "tiling" in table:  # an architecture whose FP8 kernel has one form (sm100)
    bm, bn, cl, along_n = table["tiling"]
    return (Fp8Config(bm, bn, cl, along_n, table["group_m"]),
            f"{bm}x{bn} tiles, {cl} CTA per cluster: the only form of this architecture's kernel")
  candidates = [(bm, bn, eff_one_m_tile if m <= 128 else eff)
                for bm, bn, eff, eff_one_m_tile in table["tiles"]
                if not residual or fp8_residual_has(bm)]
  (bm, bn, _, tiles), why = _cheapest_tile(candidates, m, n, 1, sms)
  if residual:
    why += " among the residual kernel's 128-row tiles"
  pair = table["pair"][bm]
  if pair == "m" and m > bm and tiles >= sms:
    cluster, along_n = 2, False
    why += "; a pair along M sharing B"
  elif pair == "n" and n > bn and tiles >= sms:
    cluster, along_n = 2, True
    why += "; a pair along N sharing A"
  else:
    cluster, along_n = 1, False
    why += "; 1 CTA per cluster"
  return Fp8Config(bm, bn, cluster, along_n, table["group_m"]), why


def fp8_config(m: int, n: int, k: int, *, residual: bool = False, device=None) -> Fp8Config:
  """The default Fp8Config for an m x n x k FP8 blockwise GEMM on `device`.

  n: the kernel's output columns (padded to a multiple of 8 by the launch layer).
  With residual=True the choice is one the residual target has (128-row tiles).
  """
  del k
  dev = _device(device)
  return _fp8_choice(m, n, residual, sm_count(dev), _table(dev, "fp8")[1])[0]


# ---------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
  """The tuning settings an op call is traced with (see current()).

  gemm / fp8: None (the default choice), a config (used for every such launch), or
  a partial override: a tuple of (field, value) pairs applied on top of each
  launch's default choice. fp8_fused_scales: fp8_dot's quantizers write a's scales
  as transposed A scales, which its GEMMs read as they are (True, the default), or
  XLA transposes them. dispatch: how bf16/fp16 GEMM products pick kernel or XLA's
  dot ('auto': measured, 'kernel', 'xla', 'heuristic': the kernel with the heuristic
  configuration, no measurements; for FP8 launches, which have no XLA path, only
  'heuristic' matters: it skips their measured forms). autotune_cache: None or True
  (the default file), False (off) or a path. grouped: None or a GroupedConfig for every grouped launch.
  gemm_choice: set by the ops per product, not by override():
  (GemmConfig or None, why) from the measured dispatch (jax_sm100._dispatch_table).
  """
  gemm: Any = None
  fp8: Any = None
  fp8_fused_scales: bool = True
  dispatch: str = "auto"
  autotune_cache: Any = None
  grouped: Any = None
  gemm_choice: Any = None


_SETTINGS = contextvars.ContextVar("jax_sm100_tuning", default=Settings())


def current() -> Settings:
  """The settings in force here (the innermost override(), else the defaults)."""
  return _SETTINGS.get()


def fp8_fused_scales() -> bool:
  """Whether fp8_dot's quantizers write a's scales as transposed A scales for its GEMMs."""
  return current().fp8_fused_scales


def _field_values(cls) -> dict:
  """Each tiling field's compiled values, e.g. {"block_m": [64, 128], ...}."""
  tilings = GEMM_TILINGS if cls is GemmConfig else FP8_TILINGS
  names = [f.name for f in dataclasses.fields(cls)][:len(tilings[0])]
  return {name: sorted({t[i] for t in tilings}) for i, name in enumerate(names)}


def _as_setting(kind: str, cls, value):
  """An override argument as Settings holds it (see Settings), each value checked."""
  if value is None or isinstance(value, cls):
    return value
  if not isinstance(value, Mapping):
    raise ValueError(f"override({kind}=...) takes a {cls.__name__}, a dict of some of its "
                     f"fields, or None; got {value!r}.")
  who = f"override({kind}=...)"
  valid = _field_values(cls)
  out = {}
  for k, v in value.items():
    if k == "group_m":
      out[k] = _check_group_m(who, v)
      continue
    if k == "split_k" and cls is GemmConfig:
      out[k] = _check_split_k(who, v)
      continue
    if k not in valid:
      fields = [f.name for f in dataclasses.fields(cls)]
      raise ValueError(f"{who}: unknown field {k!r}; {cls.__name__} has {', '.join(fields)}.")
    if k == "pair_along_n":
      if not isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{who}: pair_along_n must be a bool; got {v!r}.")
      v = bool(v)
    else:
      v = _int_field(who, k, v)
    if v not in valid[k]:
      raise ValueError(f"{who}: {k} must be one of {valid[k]}; got {v!r}.")
    out[k] = v
  return tuple(sorted(out.items())) or None


@contextlib.contextmanager
def override(*, gemm=None, fp8=None, fp8_fused_scales: bool | None = None,
             dispatch: str | None = None, autotune_cache=None, grouped=None):
  """Kernel configurations for the ops traced inside the `with` block.

    with jax_sm100.tuning.override(fp8=Fp8Config(128, 128, cluster=2)):
      y = jax.jit(f)(x, w)            # traced here: every FP8 GEMM in f uses it

  gemm: a GemmConfig for every bf16/fp16 GEMM launch, or a dict of some of its
    fields applied on top of each launch's default (e.g. {"group_m": 16},
    {"cluster_m": 1}, {"block_m": 64, "block_n": 64, "cluster_m": 1, "split_k": 4});
    fp8: the same with Fp8Config. A combination that is not compiled, or that the
    device architecture's kernel lacks (sm100: SM100_GEMM_TILINGS, no split-K), raises ValueError when an op is traced; the residual FP8
    GEMM takes 128-row tiles only, so a 192/256-row override raises for it.
  fp8_fused_scales: False makes fp8_dot's GEMMs transpose a's scales with XLA
    instead of taking them from the quantizers (for tests and benchmarks).
  dispatch: where each bf16/fp16 GEMM product (matmul, matmul_residual, dot_general,
    their gradients) runs: "auto" (the default: the autotune cache, then the shipped
    dispatch table of this GPU kind, then the kernel), "kernel" (always the kernel, in
    the measured best tiling where there is one), "xla" (always XLA's own dot where
    the kernel could run) or "heuristic" (the kernel configured by the heuristic,
    measurements ignored). A full GemmConfig in gemm= forces the kernel too (unless
    dispatch="xla" is in force); a partial gemm= dict only adjusts kernel launches.
    FP8 launches take their measured form (autotune cache, then the shipped table's
    FP8 entries: jax_sm100._dispatch_fp8) in every mode but "heuristic".
  autotune_cache: the jax_sm100.autotune cache file the ops read: a path, True (the
    default, ~/.cache/jax_sm100/autotune-<GPU kind>.json) or False (none).
  grouped: a GroupedConfig for every grouped launch (ragged_dot, its gradients,
    fp8_grouped_matmul, fp8_ragged_dot); a tile that a launch's kind lacks
    (grouped_tilings(kind, arch): 256-row tiles are FP8 only, and not on sm100) raises
    ValueError when traced.
  Omitted arguments keep the enclosing setting. Thread- and task-local
  (contextvars). Read at trace time: a function already traced by jax.jit keeps
  the configuration it was traced with; the choice shows in the lowered HLO as the
  custom call's attributes.
  """
  cur = current()
  new = Settings(
      gemm=cur.gemm if gemm is None else _as_setting("gemm", GemmConfig, gemm),
      fp8=cur.fp8 if fp8 is None else _as_setting("fp8", Fp8Config, fp8),
      fp8_fused_scales=(cur.fp8_fused_scales if fp8_fused_scales is None
                        else _bool_setting(fp8_fused_scales)),
      dispatch=cur.dispatch if dispatch is None else _dispatch_table.check_mode(dispatch),
      autotune_cache=(cur.autotune_cache if autotune_cache is None
                      else _dispatch_table.check_cache_setting(autotune_cache)),
      grouped=cur.grouped if grouped is None else _grouped_setting(grouped))
  token = _SETTINGS.set(new)
  try:
    yield new
  finally:
    _SETTINGS.reset(token)


def _grouped_setting(v):
  if not isinstance(v, GroupedConfig):
    raise ValueError(f"override(grouped=...) takes a GroupedConfig; got {v!r}.")
  return v


def _bool_setting(v) -> bool:
  if not isinstance(v, (bool, np.bool_)):
    raise ValueError(f"override(fp8_fused_scales=...) takes a bool; got {v!r}.")
  return bool(v)


def _apply(kind: str, default, setting):
  """The config a launch uses: `default` under `setting` (see Settings)."""
  if setting is None:
    return default, None
  if isinstance(setting, (GemmConfig, Fp8Config)):
    return setting, f"override({kind}={setting})"
  try:
    cfg = dataclasses.replace(default, **dict(setting))
  except ValueError as e:
    raise ValueError(f"override({kind}={dict(setting)}) on the default {default}: {e}") from None
  return cfg, f"override({kind}={dict(setting)}) on {default}"


def resolve_gemm(settings: Settings | None, m: int, n: int, k: int, batch: int,
                 residual: bool) -> tuple[GemmConfig, str]:
  """(config, why) for one bf16/fp16 GEMM launch (the launch layer's entry).

  An override whose tiling the device architecture's kernel does not have (e.g. a
  64-row tile on sm100) raises ValueError naming the tilings it has. The default is
  the measured dispatch's tiling for the product (settings.gemm_choice) where it has
  one, else the heuristic."""
  del residual
  dev = _device(None)
  arch, table = _table(dev, "gemm")
  default, why = _gemm_choice(m, n, k, batch, sm_count(dev), table)
  measured = settings.gemm_choice if settings else None
  if measured is not None:
    if measured[0] is not None:
      default, why = measured
    else:
      why = f"{measured[1]}; {why}"
  cfg, how = _apply("gemm", default, settings.gemm if settings else None)
  if how:
    _check_arch_tiling(cfg, arch, how)
  return cfg, how or why


def resolve_fp8(settings: Settings | None, m: int, n: int, k: int,
                residual: bool) -> tuple[Fp8Config, str]:
  """(config, why) for one FP8 GEMM launch (the launch layer's entry). The default is
  the measured dispatch's form for the launch (jax_sm100._dispatch_fp8: the autotune
  cache, then the shipped table) where it has one, else the heuristic; an override
  replaces or edits it."""
  from jax_sm100 import _dispatch_fp8
  dev = _device(None)
  arch, table = _table(dev, "fp8")
  default, why = _fp8_choice(m, n, residual, sm_count(dev), table)
  measured, note = _dispatch_fp8.decide(settings, m, n, k, residual, dev, arch, default.group_m)
  if measured is not None:
    default, why = measured, note
  elif note is not None:
    why = f"{note}; {why}"
  cfg, how = _apply("fp8", default, settings.fp8 if settings else None)
  if how:
    _check_arch_fp8_tiling(cfg, arch, how)
  if residual and not cfg.supports_residual:
    raise ValueError(f"jax_sm100.tuning: {how}: the residual FP8 GEMM runs 128-row tiles "
                     f"only; got block_m={cfg.block_m}.")
  return cfg, how or why


def explain(fn, *args, **kwargs):
  """Which path (kernel, xla or reference) and kernel configuration each product of
  fn(*args, **kwargs) takes here, and why: a list of jax_sm100 launches, products
  the measured dispatch sends to XLA's dot, and reference fallbacks (printable as a
  table). fn is traced, not run (arrays or
  jax.ShapeDtypeStruct)."""
  from jax_sm100 import _explain
  return _explain.explain(fn, *args, **kwargs)


# The grouped GEMMs' configurations (their own module; re-exported here).
from jax_sm100._tuning_grouped import (  # noqa: E402
    ARCH_GROUPED_TILINGS, GROUPED_HEURISTICS, GROUPED_TILINGS, GROUPED_TILINGS_BY_KIND,
    GroupedConfig, grouped_config, grouped_tilings)

# Environment variables that selected kernel variants before configs were data.
_RETIRED_ENV = ("JAX_SM100_FP8_FUSED_SCALES", "JAX_SM100_SM90_CONFIG", "JAX_SM100_SM90_CLUSTER",
                "JAX_SM100_FP8_BLOCK_M", "JAX_SM100_FP8_BLOCK_N", "JAX_SM100_FP8_CLUSTER",
                "JAX_SM100_FP8_OVERLAP", "JAX_SM100_FP8_CHAIN", "JAX_SM100_FP8_GROUP_M",
                "JAX_SM100_FP8_BALANCED_GRID")
_stale = [v for v in _RETIRED_ENV if v in os.environ]
if _stale:
  warnings.warn(f"jax_sm100: {', '.join(_stale)} no longer select kernel variants and are "
                "ignored; use jax_sm100.tuning.override(...).", RuntimeWarning, stacklevel=2)
