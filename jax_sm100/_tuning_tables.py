"""The data behind jax_sm100.tuning's default kernel choices: the heuristic table per
architecture and the SM counts by device kind (re-exported by tuning, their public home;
tuning's module docstring says how they are read)."""
from __future__ import annotations

from typing import Any

HEURISTICS: dict[str, dict[str, Any]] = {
    # Hopper (H100/H200). Measured on H200s; see docs/ for the runs behind each number.
    "sm90": {
        "gemm": {
            # (block_m, block_n, efficiency guess). Estimated time of a tile shape =
            # waves * tile area / efficiency (bigger tiles reuse shared-memory operands
            # more); the lowest estimate wins, the first listed on a tie.
            "tiles": ((128, 256, 1.00), (128, 128, 0.85), (64, 128, 0.60), (64, 64, 0.45)),
            # 2-CTA clusters along M (B multicast) for these tile heights when the M tiles
            # pair up evenly and there is more than one wave of tiles: +3-20% on
            # multi-wave shapes, -8% on a single wave.
            "cluster_m": {"size": 2, "block_m": (128,), "min_m_tiles": 2,
                          "even_m_tiles": True, "more_tiles_than_sms": True},
            "group_m": 8,
            # The split-K kernel's factor (tuning.split_k_for): the tiles' clusters fill
            # up to ctas_per_sm CTAs per SM, each CTA running at least min_k_blocks K
            # blocks of 64. One per SM although two fit (96 KB of stages each): on an
            # H100, 64x128 tiles at 1x4096x7168 ran 24.8 us split 4 ways, 29.1 us 8 ways.
            "split_k": {"ctas_per_sm": 1, "min_k_blocks": 4,
                        # The heuristic takes the split-K kernel (tiles `tiling`, factor
                        # split_k_for) for products of at most `max_m` rows whose split
                        # tiles cover at most `max_tile_share` of the SMs and whose K is at
                        # least `min_k`: the H100 table's measured winners (M 1-64, N <=
                        # 2048, K > 3072: 1.07-1.24x XLA where the best plain tiling ran at
                        # 0.79-0.86x). GPUs and classes without a measured entry use it.
                        "tiling": (64, 128, 1), "max_m": 64, "max_tile_share": 0.125,
                        "min_k": 3072},
        },
        "fp8": {
            # (block_m, block_n, efficiency guess, efficiency guess when M fits one
            # 128-row tile). Estimated time of a tile shape = waves * tile area /
            # efficiency, as the bf16 rule; the lowest wins, the first listed on a tie.
            # The residual kernel has the 128-row tiles only. Fitted to an H100 run of
            # benchmarks/bench_fp8_suite.py (every form on 35 shapes, docs/results.md):
            # the rule's pick is within 3.5% of the fastest form on every shape. 256-row
            # tiles reuse A and B most; 64-wide tiles are slow on compute-bound shapes
            # but stream B well when one M tile makes the product memory-bound.
            "tiles": ((128, 128, 1.00, 1.00), (256, 128, 1.08, 1.08),
                      (192, 128, 0.93, 0.93), (128, 64, 0.65, 0.85)),
            # Cluster per tile height: a pair along "m" (sharing B) when there are two M
            # tiles, along "n" (sharing A) when there are two N tiles, or none; only
            # when the tiles fill every SM (a pair on a partial wave measured 1-12%
            # slower: 512x512x512, 1024^3, 2048^3).
            "pair": {128: "m", 192: None, 256: "n"},
            "group_m": 8,
        },
    },
    # Blackwell (B200). Not measured: no Blackwell GPU was available to this project, so
    # these are guesses from the kernel's structure, to be replaced by measurements.
    "sm100": {
        "gemm": {
            # (block_m, block_n, efficiency guess) on one SM: the lowest estimated
            # waves * tile area / efficiency wins, as on sm90 (so N <= 128 and small
            # M*N, where 128x256 tiles would leave SMs idle, take 128x128).
            "tiles": ((128, 256, 1.00), (128, 128, 0.85)),
            # The 2-SM pair (one 256x256 UMMA over a cluster of two, B split across the
            # pair) for 128x256 choices when M has at least min_m_tiles 128-row tiles
            # and the pair tiles fill every SM at least once (pairs >= SMs / 2).
            "pair": {"tiling": (128, 256, 2), "min_m_tiles": 2, "fill_sms": True},
            "group_m": 8,
            # Where no dispatch table covers the GPU kind (_dispatch_table.decide): a
            # product whose CTAs under this rule's tiling fill less than max_sm_share of
            # the SMs goes to XLA's dot. The sm100 GEMM has no split-K or small-M kernel
            # (decode products would stream B from a few SMs), cuBLAS has both. A
            # structural rule, not a measurement (no Blackwell GPU here); autotune
            # measures the product on the user's GPU.
            "few_tiles": {"max_sm_share": 0.5},
        },
        "fp8": {
            # The sm_100a FP8 kernel has one form (SM100_FP8_TILINGS): every choice is it.
            "tiling": (128, 128, 1, False),
            "group_m": 8,
        },
    },
}

# SM counts by device kind (substring, first match), when the device does not report
# its own (jax GPU devices expose `core_count`).
SM_COUNTS = (("H100 PCIe", 114), ("H100", 132), ("H200", 132), ("H800", 132),
             ("B200", 148))
DEFAULT_SM_COUNT = 132
