"""SASS checks of the sm_100a M-grouped GEMM (ffi/src/sm100/grouped_gemm_launch.cu): no
machine here runs it, so the machine code itself is inspected.

1. The launch unit compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernels: every instantiation of
   sm100_grouped_gemm_kernel (2 tiles x bf16/f16 in x bf16/f16/f32 out) holds the
   kind::f16 UMMA (UTCHMMA, only cta_group::1 forms: no .2CTA, no kind::f8f6f4 UTCQMMA),
   the UMMA commit (UTCBAR), the TMEM load (LDTM), TMA load and store (UTMALDG, UTMASTG)
   and the CLC try_cancel (UGETNEXTWORKID), and is not a trap stub.
2. ptxas's usage of each instantiation is printed: registers within budget, no stack, no
   local memory (no spills).

The instruction names are pinned by the probes of tests/test_sm100_sass.py and
tests/test_sm100_fp8_sass.py; the parsing and the stub / budget definitions are theirs.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from test_sm100_sass import (
    SASS_CLC_TRY_CANCEL, SASS_TMA_LOAD, SASS_TMA_STORE, SASS_TMEM_LOAD, SASS_UMMA,
    SASS_UMMA_COMMIT, _base, check_usage, compile_unit, cta_group_problems,
    extension_kernels, has, is_stub, unit_kernels)

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "ffi" / "src" / "sm100" / "grouped_gemm_launch.cu"
KERNEL = "sm100_grouped_gemm_kernel"
INSTANTIATIONS = 12
SASS_UMMA_F8F6F4 = "UTCQMMA"  # kind::f8f6f4 (tests/test_sm100_fp8_sass.py)
REQUIRED = {
    "tcgen05.mma.kind::f16": SASS_UMMA,
    "tcgen05.commit": SASS_UMMA_COMMIT,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
}
TARGET = "jax_sm100_grouped_gemm"


def grouped_problems(kernels):
  """What keeps each of `kernels` ({name: mnemonics}) from being the sm_100a M-grouped
  GEMM: a trap stub, a missing REQUIRED instruction, a 2-SM or an 8-bit UMMA."""
  problems = []
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in REQUIRED.items() if not has(body, family)]
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
    if any(".2CTA" in m for m in body):
      problems.append(f"{name}: a 2-SM (cta_group::2) form")
    if has(body, SASS_UMMA_F8F6F4):
      problems.append(f"{name}: a kind::f8f6f4 UMMA ({SASS_UMMA_F8F6F4})")
  return problems + cta_group_problems(kernels)


@pytest.fixture(scope="module")
def unit_cubin(tmp_path_factory):
  return compile_unit(UNIT, tmp_path_factory.mktemp("grouped_sass"))


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == INSTANTIATIONS, sorted(kernels)
  problems = grouped_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} instantiations ({where})")


def test_grouped_check_rejects():
  """The check passes on a body holding every required instruction and fails on a stub,
  without each requirement, and with a 2-SM or an 8-bit UMMA."""
  full = ["UTCHMMA", "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D", "UGETNEXTWORKID.SELFCAST"]
  assert grouped_problems({"k": full}) == []
  assert "trap stub" in grouped_problems({"k": ["LDC", "BPT.TRAP", "BRA", "NOP"]})[0]
  for what, family in REQUIRED.items():
    problems = grouped_problems({"k": [m for m in full if not has([m], family)]})
    assert problems and what in problems[0], (what, problems)
  assert grouped_problems({"k": full + ["UTCHMMA.2CTA"]})
  assert grouped_problems({"k": full + [SASS_UMMA_F8F6F4]})


def test_sm100_grouped_unit_sass(unit_cubin, capsys):
  kernels, usage = unit_kernels([unit_cubin], KERNEL)
  _check(kernels, usage, capsys, "the launch unit compiled here")



def test_sm100_grouped_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
