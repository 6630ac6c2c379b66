"""The sm_100a bias/activation GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_gemm_bias_emu_test.cc compiles ffi/include/jax_sm100/kernels/sm100/
gemm_bias_roles.h (the epilogue; the load and MMA roles are gemm_roles.h's) with the
emulator's EmuOps (the one seam; no second copy of the kernel) and checks d = act(z) and
pre = z, z = alpha * A @ B + bias, element by element against float64: every activation,
bias on and off, pre on and off (with no activation pre is d's chunk stored twice), all four
layouts, bf16/f16 inputs with 16-bit and f32 outputs, partial tiles in M, N and K, batched
and broadcast operands, 128x128, 128x256 and the 2-SM 256x256 pair, with fewer resident
clusters than tiles so that cluster launch control hands out work.

The planted-fault tests apply one mutation each to a copy of the kernel headers (the bias
read one column off, pre written after the activation, the activation applied twice) and
require the emulated run to fail.
"""
from __future__ import annotations

import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_gemm_bias_emu_test.cc"
ROLES = "jax_sm100/kernels/sm100/gemm_bias_roles.h"

pytestmark = needs_toolchain


def test_emulated_gemm_bias(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "gemm_bias_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 12 and all(l.startswith("ok ") for l in cases)
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 20  # the grid really was work-stealing
  for needle in ("none ", "relu ", "gelu_tanh ", "gelu_erf ", "silu ", " bias", " nobias",
                 " pre M=", "bias M=", "cluster 2", "tile 128x128", "tile 128x256", "->f32",
                 "f16->f16", "bf16->bf16", "trans_a trans_b", " trans_a:", " trans_b:",
                 "batch=2", "batch=3"):
    assert any(needle in l for l in cases), needle


# name: (header relative to ffi/include, exact text, replacement)
FAULTS = {
    "bias_column_shifted": (ROLES,
                            "std::memcpy(bias, slice + chunk * kCols + j * kPerLoad, sizeof(bias));",
                            "std::memcpy(bias, slice + chunk * kCols + j * kPerLoad + 1, sizeof(bias));"),
    "pre_after_activation": (ROLES,
                             "pre_vals[i] = static_cast<Out>(z);",
                             "pre_vals[i] = static_cast<Out>(y);"),
    "activation_twice": (ROLES,
                         "const float y = apply_activation<Act>(z);",
                         "const float y = apply_activation<Act>(apply_activation<Act>(z));"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)