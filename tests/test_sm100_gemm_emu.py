"""The sm_100a GEMM's own role functions run on the CPU emulator (tests/emu).

tests/emu/sm100_gemm_emu_test.cc compiles ffi/include/jax_sm100/kernels/sm100/gemm_roles.h
with the emulator's EmuOps (the one seam; no second copy of the kernel) and runs every
case against a float64 reference: all four transpose layouts, bf16/f16 inputs,
bf16/f16/f32 outputs, partial tiles in M, N and K, batched and broadcast operands, the
residual epilogue, 128x128, 128x256 and the 2-SM 256x256 pair, with fewer resident
clusters than tiles so that cluster launch control hands out work.

The planted-fault tests apply one mutation each to a copy of the kernel headers (a wrong
descriptor field, a wrong swizzle, a missing UMMA commit, an off-by-one barrier phase,
overlapping TMEM accumulators) and require the emulated run to fail: these prove that
the emulator would notice such bugs.
"""
from __future__ import annotations

import pathlib
import secrets

import pytest

from emu_harness import GRID_WAIT, INCLUDE, build, needs_toolchain, planted_fault_failures, run

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "emu" / "sm100_gemm_emu_test.cc"

pytestmark = needs_toolchain


def test_emulated_gemm(tmp_path):
  binary = build(SRC, INCLUDE, tmp_path / "gemm_emu")
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 12 and all(l.startswith("ok ") for l in cases)
  # The grid really was work-stealing, and every layout and the pair ran.
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 20
  for needle in ("cluster 2", "trans_a trans_b", " trans_a:", " trans_b:", "residual",
                 "->f32", "->f16", "->bf16", "f16->"):
    assert any(needle in l for l in cases), needle


# name: (header relative to ffi/include, exact text, replacement)
FAULTS = {
    "descriptor_sbo": ("jax_sm100/kernels/sm100/gemm_roles.h",
                       "ptx::make_umma_smem_desc(a_addr + kk * a_step, a_lbo, 1024,",
                       "ptx::make_umma_smem_desc(a_addr + kk * a_step, a_lbo, 512,"),
    "swizzle_64B": ("jax_sm100/kernels/sm100/gemm_roles.h",
                    "ptx::make_umma_smem_desc(b_addr + kk * b_step, b_lbo, 1024, ptx::UmmaSwizzle::k128B)",
                    "ptx::make_umma_smem_desc(b_addr + kk * b_step, b_lbo, 1024, ptx::UmmaSwizzle::k64B)"),
    "missing_commit": ("jax_sm100/kernels/sm100/cta_skeleton.h",
                       "      else Ops::umma_commit(tiles.mbar());", ""),
    "phase_off_by_one": ("jax_sm100/pipeline/pipeline_state.h",
                         "consumer_start() { return PipelineState{0u, 0u}; }",
                         "consumer_start() { return PipelineState{0u, 1u}; }"),
    "tmem_overlap": ("jax_sm100/kernels/sm100/cta_skeleton.h",
                     "Cfg::kTmemCols, Cfg::kBlockN, Cfg::kPair",
                     "Cfg::kTmemCols, Cfg::kBlockN / 2, Cfg::kPair"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)