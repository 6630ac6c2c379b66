"""The sm_100a M-grouped GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_grouped_emu_test.cc compiles
ffi/include/jax_sm100/kernels/sm100/grouped_gemm_roles.h with the emulator's EmuOps (the
one seam; no second copy of the kernel) and runs every case against a float64 reference
of ragged_dot's rule: G = 1, several groups of uneven sizes, empty groups, a group smaller
than a tile, sum(sizes) < M (rows in no group must be exact zeros), sizes past M clamped
and negative ones, all groups empty, M, N and K not multiples of the tile, both rhs
layouts, 128- and 256-wide tiles, bf16/f16 in and bf16/f16/f32 out, a group table small
enough that lookups walk group sizes (span > 1), with fewer resident clusters than work
items so that cluster launch control hands out the tiles.

The planted-fault tests apply one mutation each to a copy of the kernel headers (a tile
decoded into the wrong group, the store mask one row short, the rows in no group left
unwritten, the last tile of the order dropped, a staging buffer reused before its TMA
store read it) and require the emulated run to fail.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run


SRC = ROOT / "tests" / "emu" / "sm100_grouped_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/grouped_gemm_roles.h"

pytestmark = needs_toolchain


def test_emulated_grouped_gemm(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "grouped_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 9 and all(l.startswith("ok ") for l in cases)
  # The grid really was work-stealing, rows in no group were checked, every layout,
  # tile width and output type ran.
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 50 and all(s > 0 for s in stolen)
  zero_rows = [int(l.split("zero rows ", 1)[1].split(",", 1)[0]) for l in cases]
  assert sum(1 for z in zero_rows if z > 0) >= 4
  for needle in (" G=1 ", "trans_rhs", "128x128", "128x256", "->f32", "->f16", "->bf16", "f16->",
                 ",0,", "-5"):
    assert any(needle in l for l in cases), needle


# name: (exact text in grouped_gemm_roles.h, replacement)
FAULTS = {
    # B of the previous group for every group but the first.
    "wrong_group": ("*tile = p.order.tile(table, p.group_sizes, work, cache);",
                    "*tile = p.order.tile(table, p.group_sizes, work, cache);"
                    " if (tile->group > 0 && tile->group < p.order.groups) tile->group -= 1;"),
    # A group's partial last tile stores one row too few.
    "mask_off_by_one": (": t.row_end - t.row0;", ": t.row_end - t.row0 - 1;"),
    # The rows in no group are never written.
    "zero_rows_unwritten": ("if (kind == GroupedWork::kNone) continue;",
                            "if (kind != GroupedWork::kCompute) continue;"),
    # A staging buffer reused while its TMA store may still read it (after a masked
    # chunk the newest bulk group is not the other buffer's).
    "staging_reuse": ("if (last_was_tma) Ops::tma_store_wait_read_1();",
                      "if (true) Ops::tma_store_wait_read_1();"),
    # The order's last tile is taken for one past the count.
    "last_tile_dropped": ("if (work >= count) return GroupedWork::kNone;",
                          "if (work >= count - 1) return GroupedWork::kNone;"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, ROLES, old, new, tmp_path)