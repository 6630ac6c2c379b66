"""jax_sm100.tuning's default choices on CPU (stand-in devices of given SM counts): each
rule transcribed independently from its description (the bf16 rule from the C++ the
handlers applied before configurations became data), checked over thousands of shapes,
and pinned to measured winners where a measurement chose them.
"""
import itertools
import types

import jax
import numpy as np
import pytest

from jax_sm100 import tuning
from jax_sm100.tuning import GemmConfig

SM100_TILINGS = {(128, 256, 1), (128, 128, 1), (128, 256, 2)}  # the sm100 kernel's set
B200 = dict(kind="NVIDIA B200", cc="10.0")


# ---------------------------------------------------------------------------
# The former C++ rules, transcribed statement by statement (sm90_gemm_host.h:
# choose_config, choose_cluster; fp8_ffi.cu: pick_block_n, tile_efficiency,
# pick_block_m, pick_cluster; group_m 8 for both). No environment overrides.
# ---------------------------------------------------------------------------

def old_choose_config(m, n, batch, num_sms):
  cands = [(0, 128, 256, 1.00), (1, 128, 128, 0.85), (2, 64, 128, 0.60), (3, 64, 64, 0.45)]
  best, best_cost, first = 0, 0.0, True
  for cfg, bm, bn, eff in cands:
    tiles = batch * ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    waves = (tiles + num_sms - 1) // num_sms
    cost = float(waves) * bm * bn / eff
    if first or cost < best_cost:
      best, best_cost, first = cfg, cost, False
  return best


def old_choose_cluster(cfg, m, n, batch, num_sms):
  if cfg not in (0, 1):
    return 1
  bn = 256 if cfg == 0 else 128
  m_tiles = (m + 127) // 128
  tiles = batch * m_tiles * ((n + bn - 1) // bn)
  return 2 if (m_tiles >= 2 and m_tiles % 2 == 0 and tiles > num_sms) else 1


def old_gemm(m, n, batch, sms):
  cfg = old_choose_config(m, n, batch, sms)
  bm, bn = [(128, 256), (128, 128), (64, 128), (64, 64)][cfg]
  return (bm, bn, old_choose_cluster(cfg, m, n, batch, sms), 8)


def split_rule(m, n, k, batch, sms):
  """The sm90 heuristic's split-K rule, transcribed from HEURISTICS["sm90"]["gemm"]
  ["split_k"]'s description: 64x128 tiles, M <= 64, K >= 3072, at most sms/8 tiles; the
  factor fills one CTA per SM, >= 4 K blocks of 64 each, at most 8. 1: no split."""
  tiles = batch * -(-m // 64) * -(-n // 128)
  if m > 64 or k < 3072 or 8 * tiles > sms:
    return 1
  return max(1, min(8, sms // tiles, -(-k // 64) // 4))


def fp8_rule(m, n, residual, sms):
  """The sm90 FP8 rule, transcribed from its description (HEURISTICS["sm90"]["fp8"]):
  the tile with the fewest waves * area / efficiency, a pair when the tiles fill the SMs."""
  candidates = [(128, 128, 1.0), (256, 128, 1.08), (192, 128, 0.93),
                (128, 64, 0.85 if m <= 128 else 0.65)]
  costs = []
  for i, (bm, bn, eff) in enumerate(candidates):
    if residual and bm != 128:
      continue
    tiles = -(-m // bm) * -(-n // bn)
    costs.append(((tiles + sms - 1) // sms * bm * bn / eff, i, bm, bn, tiles))
  _, _, bm, bn, tiles = min(costs)
  if bm == 128 and m > 128 and tiles >= sms:
    return (bm, bn, 2, False, 8)
  if bm == 256 and n > 128 and tiles >= sms:
    return (bm, bn, 2, True, 8)
  return (bm, bn, 1, False, 8)


def gpu(sms=132, kind="NVIDIA H200", cc="9.0"):
  """A stand-in jax GPU device reporting `sms` SMs (None: no core_count)."""
  d = types.SimpleNamespace(platform="gpu", device_kind=kind, compute_capability=cc,
                            client=types.SimpleNamespace(platform_version="cuda 12080"))
  if sms is not None:
    d.core_count = sms
  return d


SIZES = [1, 7, 8, 16, 63, 64, 65, 127, 128, 129, 192, 255, 256, 257, 383, 384, 640, 1000,
         2048, 2112, 2176, 3000, 4096, 5000, 7168, 8192, 16384, 24576]
SM_COUNTS = [132, 114, 148, 78]


def _random_sizes(seed, count):
  rng = np.random.default_rng(seed)
  return [int(v) for v in rng.integers(1, 20000, count)]


@pytest.mark.parametrize("sms", SM_COUNTS)
def test_gemm_defaults_equal_the_former_rules(sms):
  dev = gpu(sms)
  shapes = list(itertools.product(SIZES, SIZES, [1, 2, 3, 8]))
  shapes += list(zip(_random_sizes(sms, 400), _random_sizes(sms + 1, 400),
                     [1 + v % 5 for v in _random_sizes(sms + 2, 400)]))
  for m, n, batch in shapes:
    # K below the split-K rule's minimum: the former rule, with and without a residual.
    got = tuning.gemm_config(m, n, 2048, batch=batch, device=dev)
    want = old_gemm(m, n, batch, sms)
    assert (got.block_m, got.block_n, got.cluster_m, got.group_m, got.split_k) == want + (1,), \
        (m, n, batch, sms)
    assert tuning.gemm_config(m, n, 64, batch=batch, residual=True, device=dev) == got
    # A long K: the split-K kernel where its rule says, else the same choice.
    for k in (3072, 7168):
      split = split_rule(m, n, k, batch, sms)
      got_k = tuning.gemm_config(m, n, k, batch=batch, device=dev)
      if split > 1:
        assert got_k == GemmConfig(64, 128, 1, 8, split), (m, n, k, batch, sms)
      else:
        assert got_k == got, (m, n, k, batch, sms)


@pytest.mark.parametrize("sms", SM_COUNTS)
def test_fp8_defaults_follow_the_rule(sms):
  dev = gpu(sms)
  shapes = list(itertools.product(SIZES, SIZES))
  shapes += list(zip(_random_sizes(sms + 3, 1000), _random_sizes(sms + 4, 1000)))
  seen = set()
  for m, n in shapes:
    for residual in (False, True):
      got = tuning.fp8_config(m, n, 4096, residual=residual, device=dev)
      want = fp8_rule(m, n, residual, sms)
      got_t = (got.block_m, got.block_n, got.cluster, got.pair_along_n, got.group_m)
      assert got_t == want, (m, n, residual, sms)
      if residual:
        assert got.block_m == 128 and got.supports_residual
      seen.add(got_t[:4])
  # the sweep reaches every default-reachable form (192 and 256 rows, both clusters)
  assert {(192, 128, 1, False), (256, 128, 2, True), (256, 128, 1, False),
          (128, 64, 2, False), (128, 64, 1, False), (128, 128, 2, False)} <= seen


# The fastest form an H100 measured (benchmarks/bench_fp8_suite.py, GPU time, every form
# of the kernel side by side) on shapes where the former rule missed it by 4-22%.
@pytest.mark.parametrize("shape,form", [
    ((2048, 2048, 2048), (256, 128, 1, False)),    # former 128x128 pair: 0.934 of it
    ((512, 4096, 7168), (128, 128, 1, False)),     # former 128x64 pair: 0.78
    ((512, 7168, 16384), (256, 128, 1, False)),    # former 128x128 pair: 0.90
    ((128, 24576, 1536), (128, 64, 1, False)),     # former 128x128: 0.93
    ((1024, 1024, 1024), (128, 64, 1, False)),     # former 128x64 pair: 0.96
    ((4096, 2112, 7168), (192, 128, 1, False)),    # kept
    ((4096, 4096, 7168), (256, 128, 2, True)),     # kept
])
def test_fp8_defaults_pick_the_measured_form(shape, form):
  got = tuning.fp8_config(*shape, device=gpu(132))
  assert (got.block_m, got.block_n, got.cluster, got.pair_along_n) == form


def test_sm_count_from_the_device_then_by_kind():
  assert tuning.sm_count(gpu(114)) == 114
  assert tuning.sm_count(gpu(None, kind="NVIDIA H100 80GB HBM3")) == 132
  assert tuning.sm_count(gpu(None, kind="NVIDIA H100 PCIe")) == 114
  assert tuning.sm_count(gpu(None, kind="NVIDIA H200")) == 132
  assert tuning.sm_count(gpu(None, kind="NVIDIA B200")) == 148
  assert tuning.sm_count(gpu(None, kind="Some Future GPU")) == tuning.DEFAULT_SM_COUNT == 132
  assert tuning.sm_count(jax.devices("cpu")[0]) == 132  # a CPU's cores are not SMs
  # the default device at call time
  assert tuning.sm_count() == tuning.sm_count(jax.devices()[0])


def test_the_sm_count_changes_the_choice():
  # 2048^3 bf16: 64 tiles of 128x256 is one wave on 132 SMs, 128x128 tiles are two
  assert tuning.gemm_config(2048, 2048, 2048, device=gpu(132)) == GemmConfig(128, 256, 1, 8)
  assert tuning.gemm_config(2048, 2048, 2048, device=gpu(32)).cluster_m == 2


def sm100_rule_as_described(m, n, batch, sms):
  """The sm100 rule as its table describes it: the sm90 cost model over 128x256
  (efficiency 1.0) and 128x128 (0.85); a 128x256 choice becomes the 2-SM pair when M
  has two 128-row tiles and the 256x256 pair tiles fill every SM."""
  c256 = -(-(batch * -(-m // 128) * -(-n // 256)) // sms) * 128 * 256 / 1.00
  c128 = -(-(batch * -(-m // 128) * -(-n // 128)) // sms) * 128 * 128 / 0.85
  if c128 < c256:
    return (128, 128, 1, 8)
  pairs = batch * -(-m // 256) * -(-n // 256)
  return (128, 256, 2 if m > 128 and 2 * pairs >= sms else 1, 8)


@pytest.mark.parametrize("sms", [148, 132, 80])
def test_sm100_defaults_follow_its_table(sms):
  dev = gpu(sms, **B200)
  seen = set()
  for m, n, batch in itertools.product(SIZES, SIZES, [1, 2, 5]):
    got = tuning.gemm_config(m, n, 4096, batch=batch, device=dev)
    t = (got.block_m, got.block_n, got.cluster_m, got.group_m)
    assert t == sm100_rule_as_described(m, n, batch, sms), (m, n, batch, sms)
    assert t[:3] in SM100_TILINGS
    seen.add(t[:3])
  assert seen == SM100_TILINGS
  # N <= 128: never a 256-wide tile; small M*N: 128x128; the 2-SM pair for a large
  # product, one SM per tile where the pairs would leave SMs idle
  for m, n in itertools.product(SIZES, [1, 8, 64, 127, 128]):
    assert tuning.gemm_config(m, n, 64, device=dev).block_n == 128
  assert tuning.gemm_config(512, 512, 4096, device=dev) == GemmConfig(128, 128, 1, 8)
  assert tuning.gemm_config(8192, 8192, 4096, device=dev) == GemmConfig(128, 256, 2, 8)
  pairs_short = int(np.sqrt(sms // 2 - 1)) * 256   # fewer 256x256 pair tiles than SMs/2
  assert tuning.gemm_config(pairs_short, pairs_short, 64, device=dev).cluster_m == 1
