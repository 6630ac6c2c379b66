"""The sm_100a K-grouped GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_kgrouped_emu_test.cc compiles
ffi/include/jax_sm100/kernels/sm100/kgrouped_gemm_roles.h with the emulator's EmuOps and
runs every case against a float64 reference of ragged_dot's weight gradient (out[g] =
lhs[rows g]^T @ dy[rows g]): groups ending inside a 16-row UMMA slice (the load warp
zeroes the slice's rows past the group), slice-aligned groups, an empty group, a group of
one row, sizes past M and negative, all groups empty, several 64-row blocks, K and N off
the tile, 128- and 256-wide tiles, bf16/f16 in and bf16/f16/f32 out, a small group table,
with fewer resident clusters than tiles. The rows in no group hold NaN in both operands,
so a tail row left unzeroed or a slice issued past the group shows as NaN.

The planted-fault tests apply one mutation each to a copy of the kernel headers and
require the emulated run to fail.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_kgrouped_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/kgrouped_gemm_roles.h"

pytestmark = needs_toolchain


def test_emulated_kgrouped_gemm(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "kgrouped_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 6 and all(l.startswith("ok ") for l in cases)
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 40 and all(s > 0 for s in stolen)
  tails = [int(l.split("groups ending mid-slice ", 1)[1].split(",", 1)[0]) for l in cases]
  empty = [int(l.split("empty groups ", 1)[1].split(",", 1)[0]) for l in cases]
  assert sum(tails) >= 10 and sum(1 for e in empty if e) >= 3
  for needle in ("128x128", "128x256", "->f32", "->f16", "->bf16", "f16->", " G=1 ", "-4"):
    assert any(needle in l for l in cases), needle


FAULTS = {
    # The straddling slice's rows past the group are zeroed in A only (dy's NaN leaks).
    "tail_of_b_not_zeroed": ("for (int h = 0; h < Cfg::kBRows / 64; ++h)\n            for (int q",
                             "for (int h = 0; h < 0; ++h)\n            for (int q"),
    # ... in dy only (lhs's NaN leaks).
    "tail_of_a_not_zeroed": ("for (int h = 0; h < Cfg::kBlockM / 64; ++h)\n            for (int q",
                             "for (int h = 0; h < 0; ++h)\n            for (int q"),
    # Every slice of the last block issued, the ones wholly past the group included.
    "slices_past_the_group": ("kk * Cfg::kSliceRows < valid;", "kk * Cfg::kSliceRows < Cfg::kBlockK;"),
    # The rows of the previous group for every group but the first.
    "wrong_group_rows": ("p.groups.group_rows(table, p.group_sizes, t.batch, lo, hi);",
                         "p.groups.group_rows(table, p.group_sizes, t.batch > 0 ? t.batch - 1 : 0, lo, hi);"),
    # An empty group's tiles left unwritten.
    "empty_group_unwritten": ("if (hi <= lo) {  // an empty group: zeros, no accumulator",
                              "if (hi <= lo) { continue;  // an empty group: zeros, no accumulator"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, ROLES, old, new, tmp_path)
