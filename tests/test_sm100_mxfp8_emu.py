"""The sm_100a MXFP8 block-scaled GEMM's own role functions run on the CPU emulator.

tests/emu/sm100_mxfp8_emu_test.cc compiles ffi/include/jax_sm100/kernels/sm100/mx_gemm_roles.h
(with the bf16 GEMM's scheduler and epilogue roles it reuses) against the emulator's
EmuMxOps (tests/emu/emu_mx_ops.h: tcgen05.cp.32x128b.warpx4 with the ISA's multicast to
the four lane partitions, the block-scaled UMMA reading each partition's own scale
copy, the bulk copies of the scale tiles) and runs cases against a float64 reference of
the dequantized operands: 128- and 256-wide tiles, e4m3 / e5m2 in every mix, bf16 / f16
/ f32 output, partial tiles in M and N, K not a multiple of 128 (nor of 32), K below one
stage, more K stages than pipeline stages, NaN scales, CLC stealing.

The emulator's decoders are checked against ml_dtypes for all 256 codes of e4m3, e5m2
and e8m0; its modelled instructions against the ISA's statements (--primitives). Planted
faults, each a mutation of a copy of the kernel headers, must make the run fail: a scale
misaligned by one 32-element block (scale ID k+1 for the k-th UMMA of a stage), and a
scale tile copied to the wrong TMEM columns (B's into A's).
"""
from __future__ import annotations

import secrets

import ml_dtypes
import numpy as np
import pytest

from emu_harness import GRID_WAIT, INCLUDE, ROOT, build, needs_toolchain, planted_fault_failures, run

SRC = ROOT / "tests" / "emu" / "sm100_mxfp8_emu_test.cc"

pytestmark = needs_toolchain


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
  return build(SRC, INCLUDE, tmp_path_factory.mktemp("mx_emu") / "mx_emu")


def test_emulated_mxfp8_gemm(binary):
  res = run(binary, "--seed", str(secrets.randbits(31)), *GRID_WAIT)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
  cases = [l for l in res.stdout.splitlines() if l.startswith(("ok ", "FAIL"))]
  assert len(cases) >= 6 and all(l.startswith("ok ") for l in cases)
  stolen = [int(l.rsplit("stolen by CLC ", 1)[1]) for l in cases]
  assert sum(stolen) >= 10, "the grid did not steal work through CLC"
  for needle in ("tile 128x128", "tile 128x256", "e4m3 x e4m3", "e5m2 x e4m3", "e4m3 x e5m2",
                 "e5m2 x e5m2", "-> bf16", "-> f16", "-> f32", "NaN scales propagate", "K=96",
                 "K=208"):
    assert any(needle in l for l in cases), needle


def test_emulator_primitives(binary):
  res = run(binary, "--primitives", "--seed", str(secrets.randbits(31)), "--wait-ms", "5000")
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr


def test_decoders_match_ml_dtypes(binary):
  """The emulator's e4m3 / e5m2 / e8m0 decoding, all 256 codes, against ml_dtypes (the
  formats' reference implementation jax uses)."""
  res = run(binary, "--decoders")
  assert res.returncode == 0
  rows = [l.split() for l in res.stdout.splitlines()]
  assert len(rows) == 256
  codes = np.arange(256, dtype=np.uint8)
  for col, dt in ((1, ml_dtypes.float8_e4m3fn), (2, ml_dtypes.float8_e5m2),
                  (3, ml_dtypes.float8_e8m0fnu)):
    want = codes.view(dt).astype(np.float64)
    got = np.array([float.fromhex(r[col]) for r in rows])
    assert np.array_equal(np.isnan(got), np.isnan(want)), dt
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]), (dt, np.flatnonzero(got[ok] != want[ok])[:5])


# name: (header relative to ffi/include, exact text, replacement)
FAULTS = {
    "scale_misaligned_by_one_block": (
        "jax_sm100/kernels/sm100/mx_gemm_roles.h",
        "Cfg::kUmmaM, Cfg::kUmmaN, kk, kk);",
        "Cfg::kUmmaM, Cfg::kUmmaN, (kk + 1) % 4, kk);"),
    "scale_tile_to_wrong_tmem_columns": (
        "jax_sm100/kernels/sm100/mx_gemm_roles.h",
        "Ops::tmem_cp_32x128b_warpx4(tsfb + c * ptx::kMxScaleChunkCols,",
        "Ops::tmem_cp_32x128b_warpx4(tsfa + c * ptx::kMxScaleChunkCols,"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_fault_is_caught(fault, tmp_path):
  rel, old, new = FAULTS[fault]
  planted_fault_failures(SRC, fault, rel, old, new, tmp_path)