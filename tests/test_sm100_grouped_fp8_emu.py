"""The sm_100a FP8 blockwise M-grouped GEMM's own role functions run on the CPU emulator
(tests/emu).

tests/emu/sm100_grouped_fp8_emu_test.cc compiles
ffi/include/jax_sm100/kernels/sm100/grouped_fp8_roles.h (with the dense FP8 kernel's
per-K-block pieces from fp8_roles.h and the grouped work list and store from
grouped_gemm_roles.h) with the emulator's EmuFp8Ops and runs every case against a float64
reference of the dequantized product per group: uneven groups, empty groups, a group
smaller than a tile, sum(sizes) < M (rows in no group must be exact zeros), sizes past M
clamped and negative ones, all groups empty, G = 1, M, N and K not multiples of the tile
(N across two B-scale blocks, K = 16), five K blocks (the input and TMEM rings wrap), a
group table small enough that lookups walk group sizes, with fewer resident clusters than
work items so that cluster launch control hands out the tiles. Scales are 2^U(-3, 3) per
row and K block (A) and per group, N block and K block (B), so a scale taken from the
wrong group, block or row shows.

The planted-fault tests apply one mutation each to a copy of the kernel headers and
require the emulated run to fail.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_grouped_fp8_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/grouped_fp8_roles.h"

pytestmark = needs_toolchain


def test_emulated_grouped_fp8_gemm(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "grouped_fp8_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 7 and all(l.startswith("ok ") for l in cases)
  # The grid really was work-stealing, rows in no group were checked (exact zeros), and
  # the products are close to the reference by DeepGEMM's measure.
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 50 and all(s > 0 for s in stolen)
  zero_rows = [int(l.split("zero rows ", 1)[1].split(",", 1)[0]) for l in cases]
  assert sum(1 for z in zero_rows if z > 0) >= 3
  diffs = [float(l.split("calc_diff ", 1)[1].split(",", 1)[0]) for l in cases]
  assert max(diffs) < 1e-4
  for needle in (" G=1 ", ",0,", "-5", "(5 K blocks)", "K=16 "):
    assert any(needle in l for l in cases), needle


# name: (header, exact text, replacement)
FAULTS = {
    # B of the previous group for every group but the first.
    "b_of_wrong_group": (ROLES, "t.n_tile * Cfg::kBlockN, t.group, kb);",
                         "t.n_tile * Cfg::kBlockN, t.group > 0 ? t.group - 1 : 0, kb);"),
    # B's scales of group 0 for every group.
    "b_scale_of_wrong_group": (ROLES, "(static_cast<int64_t>(t.group) * p.n_blocks + t.n_tile)",
                               "(static_cast<int64_t>(0) * p.n_blocks + t.n_tile)"),
    # B's scales of the first N block for every N tile.
    "b_scale_of_wrong_n_block": (ROLES, "+ t.n_tile) * p.gemm.k_blocks;", "+ 0) * p.gemm.k_blocks;"),
    # A's scales of the 128-aligned rows, not of the tile's own rows (a group's tiles
    # start at any row; the dense kernel's always at a multiple of 128).
    "a_scale_rows_aligned": ("jax_sm100/kernels/sm100/fp8_roles.h",
                             "&p.tma_sfa, bar, row0, kb, 0);", "&p.tma_sfa, bar, row0 / 128 * 128, kb, 0);"),
    # The MMA waits for tiles of the rows in no group, which nothing loads: a hang.
    "mma_on_zero_tiles": (ROLES, "!= GroupedWork::kCompute) continue;\n    fp8_mma_tile",
                          "== GroupedWork::kNone) continue;\n    fp8_mma_tile"),
    # The rows in no group are never written.
    "zero_rows_unwritten": (ROLES, "if (kind == GroupedWork::kNone) continue;",
                            "if (kind != GroupedWork::kCompute) continue;"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)
