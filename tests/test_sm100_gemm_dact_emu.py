"""The sm_100a activation-backward GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_gemm_dact_emu_test.cc compiles ffi/include/jax_sm100/kernels/sm100/
gemm_dact_roles.h (the epilogue; the load, MMA and C-load roles are the GEMM's) with the
emulator's EmuOps (the one seam; no second copy of the kernel) and checks d = alpha * A @ B
* act'(c) element by element and dbias (the column sums of the unrounded d over every row
and batch entry) column by column against float64: every activation, dbias on and off, all
four layouts, bf16 and f16, partial tiles in M, N and K, batched and broadcast operands (c
included), 128x256 and the 2-SM 256x256 pair, with fewer resident clusters than tiles so
that cluster launch control hands out work.

The planted-fault tests apply one mutation each to a copy of the kernel headers (the
activation instead of its derivative, a column sum sent to the next column, a butterfly
step that adds the kept half instead of the partner's) and require the emulated run to fail.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_gemm_dact_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/gemm_dact_roles.h"

pytestmark = needs_toolchain


def test_emulated_gemm_dact(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "gemm_dact_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 8 and all(l.startswith("ok ") for l in cases)
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 20  # the grid really was work-stealing
  for needle in ("relu ", "gelu_tanh ", "gelu_erf ", "silu ", " dbias", " nodbias", "cluster 2",
                 "tile 128x256", "tile 256x256", " f16 ", " bf16 ", "trans_a trans_b", " trans_a:",
                 " trans_b:", "batch=2", "batch=3", "c broadcast"):
    assert any(needle in l for l in cases), needle


# name: (header relative to ffi/include, exact text, replacement)
FAULTS = {
    "activation_not_derivative": (
        ROLES, "activation_grad<Act>(static_cast<float>(cvals[i]))",
        "apply_activation<Act>(static_cast<float>(cvals[i]))"),
    "column_sum_shifted": (
        ROLES, "j * kPerLoad + static_cast<int>(lane / 2);",
        "j * kPerLoad + static_cast<int>(lane / 2) + 1;"),
    "butterfly_adds_own_half": (
        ROLES, "v[i] = keep + Ops::shfl_xor(send, bit);", "v[i] = keep + Ops::shfl_xor(keep, bit);"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)
