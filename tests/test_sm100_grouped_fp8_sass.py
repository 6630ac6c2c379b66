"""SASS checks of the sm_100a FP8 blockwise M-grouped GEMM (ffi/src/sm100/
grouped_fp8_launch.cu): no machine here runs it, so the machine code itself is inspected.

1. The launch unit compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernel: sm100_grouped_fp8_gemm_kernel (one
   instantiation, 128 x 128) holds the kind::f8f6f4 UMMA (UTCQMMA) and no kind::f16 one,
   the UMMA commit, the TMEM load, TMA load and store, the CLC try_cancel, and the 16-byte
   global stores of a group's partial last tile (STG.E.128); only cta_group::1 forms; not
   a trap stub.
2. ptxas's usage is printed: registers within budget, no stack, no local memory (the
   128-float accumulator of each epilogue thread stays in registers).

The instruction names are pinned by the probes of tests/test_sm100_sass.py and
tests/test_sm100_fp8_sass.py; the parsing and the stub / budget definitions are theirs.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from test_sm100_fp8_sass import SASS_UMMA_F8F6F4, fp8_problems
from test_sm100_sass import (
    _base, check_usage, compile_unit, cta_group_problems, extension_kernels, has,
    unit_kernels)

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "ffi" / "src" / "sm100" / "grouped_fp8_launch.cu"
KERNEL = "sm100_grouped_fp8_gemm_kernel"
TARGET = "jax_sm100_fp8_grouped_gemm"
SASS_ROW_STORE = "STG.E.128"  # the masked row-by-row store of a group's last tile


def grouped_fp8_problems(kernels):
  """What keeps each of `kernels` from being the FP8 grouped GEMM: the FP8 GEMM's
  problems (fp8_problems), no 16-byte row store, a 2-SM form."""
  problems = fp8_problems(kernels) + cta_group_problems(kernels)
  for name, body in sorted(kernels.items()):
    if not has(body, SASS_ROW_STORE):
      problems.append(f"{name}: no 16-byte global store ({SASS_ROW_STORE}) for partial tiles")
    if any(".2CTA" in m for m in body):
      problems.append(f"{name}: a 2-SM (cta_group::2) form")
  return problems


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == 1, sorted(kernels)
  problems = grouped_fp8_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} ({where})")


def test_grouped_fp8_check_rejects():
  full = [SASS_UMMA_F8F6F4, "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D",
          "UGETNEXTWORKID.SELFCAST", SASS_ROW_STORE]
  assert grouped_fp8_problems({"k": full}) == []
  assert grouped_fp8_problems({"k": [m for m in full if m != SASS_ROW_STORE]})
  assert grouped_fp8_problems({"k": [m for m in full if m != SASS_UMMA_F8F6F4]})
  assert grouped_fp8_problems({"k": full + ["UTCQMMA.2CTA"]})
  assert grouped_fp8_problems({"k": ["LDC", "BPT.TRAP", "BRA", "NOP"]})


@pytest.fixture(scope="module")
def unit_cubin(tmp_path_factory):
  return compile_unit(UNIT, tmp_path_factory.mktemp("grouped_fp8_sass"))


def test_sm100_grouped_fp8_unit_sass(unit_cubin, capsys):
  kernels, usage = unit_kernels([unit_cubin], KERNEL)
  _check(kernels, usage, capsys, "the launch unit compiled here")



def test_sm100_grouped_fp8_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
