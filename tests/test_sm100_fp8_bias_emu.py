"""The sm_100a FP8 bias/activation GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_fp8_bias_emu_test.cc compiles ffi/include/jax_sm100/kernels/sm100/
fp8_bias_roles.h (over the FP8 GEMM's load, MMA and per-K promotion of fp8_roles.h) with
the emulator's Ops (EmuOps plus the kind::f8f6f4 tensor core of emu_fp8_ops.h): every
activation, with and without a bias (NaN past N, so a read past the end shows), partial
M, N and K tiles, K = 16, more K blocks than input and TMEM stages, fewer resident
clusters than tiles so that cluster launch control hands out work; d element by element
against float64.

The planted-fault tests apply one mutation each to a copy of the kernel headers and
require the emulated run to fail: the bias of the next column, the bias of the tile's
first column range whatever its N tile, the slice written for the first tile only (stale
bias on later tiles), the activation not applied, and the bias not added.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_fp8_bias_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/fp8_bias_roles.h"

pytestmark = needs_toolchain


def test_emulated_fp8_bias_gemm(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "fp8_bias_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if "stolen by CLC" in l]
  assert len(cases) == 7 and all(l.startswith("ok ") for l in cases), res.stdout
  assert sum(int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases) >= 10
  for needle in ("none ", "relu ", "gelu_tanh ", "gelu_erf ", "silu ", "K=16 ", "K=1040 "):
    assert any(needle in l for l in cases), needle
  assert any("+ bias" in l for l in cases) and any("+ bias" not in l for l in cases)


# name: (header relative to ffi/include, exact text, replacement)
FAULTS = {
    "bias_of_the_next_column": (
        ROLES, "const int col = t.n_col + static_cast<int>(row);",
        "const int col = t.n_col + static_cast<int>(row) + 1;"),
    "bias_of_the_first_n_tile": (
        ROLES, "const int col = t.n_col + static_cast<int>(row);",
        "const int col = static_cast<int>(row);"),
    "slice_written_for_the_first_tile_only": (
        ROLES, "    slice[row] = bias_share;",
        "    if (work == static_cast<int>(Ops::cluster_idx())) slice[row] = bias_share;"),
    "activation_not_applied": (
        ROLES, "out[i] = static_cast<Out>(apply_activation<Act>(z));", "out[i] = static_cast<Out>(z);"),
    "bias_not_added": (
        ROLES, "const float z = acc[chunk * kCols + q * kPer + i] + bias[i];",
        "const float z = acc[chunk * kCols + q * kPer + i] + 0.f * bias[i];"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)
