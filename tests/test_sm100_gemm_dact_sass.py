"""SASS checks of the sm_100a activation-backward GEMM (ffi/src/sm100/gemm_dact_inst_*.cu):
no machine here runs it, so the machine code itself is inspected.

1. The two launch units compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernels: every instantiation of
   sm100_gemm_dact_kernel (2 tilings x 4 activations x 2 input types = 16) holds the
   kind::f16 UMMA (UTCHMMA; .2CTA for the pair, never mixed), the commit (UTCBAR), the TMEM
   load (LDTM), TMA loads (A, B and the pre-activation c) and store (UTMALDG, UTMASTG), the
   CLC try_cancel (UGETNEXTWORKID), the column sums' 16 butterfly shuffles (SHFL.BFLY) and
   their f32 reduction to global memory (REDG...ADD.F32), and is not a trap stub. Per
   activation: gelu and silu hold at least two MUFU (the exp and the sigmoid's
   reciprocal) beyond relu's kernel of the same tiling and type (relu's derivative is a
   comparison; its few MUFU are the scheduler's integer divisions).
2. ptxas's usage of each instantiation: registers within budget, no stack, no local
   memory (no spills: the butterfly's 16 values stay in registers).

The instruction names are pinned by the probes of tests/test_sm100_sass.py; the parsing and
the stub / budget definitions are theirs.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_sm100_sass import (
    SASS_CLC_TRY_CANCEL, SASS_TMA_LOAD, SASS_TMA_STORE, SASS_TMEM_LOAD, SASS_UMMA,
    SASS_UMMA_COMMIT, _base, check_usage, compile_unit, cta_group_problems,
    extension_kernels, has, is_stub, unit_kernels)

REPO = Path(__file__).resolve().parents[1]
UNITS = sorted((REPO / "ffi" / "src" / "sm100").glob("gemm_dact_inst_*.cu"))
KERNEL = "sm100_gemm_dact_kernel"
INSTANTIATIONS = 16
SHUFFLES_PER_SUM = 16  # warp_column_sum16: 8 + 4 + 2 + 1 + 1
REQUIRED = {
    "tcgen05.mma.kind::f16": SASS_UMMA,
    "tcgen05.commit": SASS_UMMA_COMMIT,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
    "butterfly shuffle": "SHFL.BFLY",
    "f32 reduction to global memory": "REDG.E.ADD.F32",
}
# kernels::Activation's value in the mangled name: ...ActivationE<value>E...
_ACT = re.compile(r"ActivationE(\d)E")
RELU, TRANSCENDENTAL = {1}, {2, 3, 4}
TARGET = "jax_sm100_gemm_dact"


def _activation(name):
  m = _ACT.search(name)
  return int(m.group(1)) if m else None


def dact_problems(kernels):
  """What keeps each of `kernels` ({name: mnemonics}) from being the sm_100a dact GEMM."""
  problems = []
  relu = {_ACT.sub("", _base(n)): body for n, body in kernels.items() if _activation(n) in RELU}
  mufu_of = lambda body: sum(has([m], "MUFU") for m in body)
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in REQUIRED.items() if not has(body, family)]
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
    shuffles = sum(has([m], "SHFL.BFLY") for m in body)
    if shuffles and shuffles % SHUFFLES_PER_SUM:
      problems.append(f"{name}: {shuffles} butterfly shuffles, not a multiple of {SHUFFLES_PER_SUM}")
    act, base = _activation(name), relu.get(_ACT.sub("", _base(name)))
    if act is None:
      problems.append(f"{name}: no activation in the name")
    elif act in TRANSCENDENTAL and base is not None and mufu_of(body) < mufu_of(base) + 2:
      problems.append(f"{name}: {mufu_of(body)} MUFU, relu's kernel {mufu_of(base)}: "
                      "a transcendental derivative without its exp and reciprocal")
  return problems + cta_group_problems(kernels)


@pytest.fixture(scope="module")
def unit_cubins(tmp_path_factory):
  assert len(UNITS) == 2, UNITS
  out_dir = tmp_path_factory.mktemp("dact_sass")
  return [compile_unit(unit, out_dir) for unit in UNITS]


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == INSTANTIATIONS, sorted(kernels)
  assert {_activation(n) for n in kernels} == {1, 2, 3, 4}
  problems = dact_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} instantiations ({where})")


def test_dact_check_rejects():
  """The check passes on bodies holding every required instruction and fails on a stub,
  without each requirement, with a partial butterfly, and with the wrong MUFU count."""
  full = ["UTCHMMA", "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D", "UGETNEXTWORKID.SELFCAST",
          "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU"] + ["SHFL.BFLY"] * 16
  k = lambda act: f"_Z...GemmConfigILi256ELi1EEE6__halfLNS0_10ActivationE{act}EEEv"
  good = {k(1): full + ["MUFU.RCP"], k(2): full + ["MUFU.RCP", "MUFU.EX2", "MUFU.RCP"]}
  assert dact_problems(good) == []
  assert "trap stub" in dact_problems({k(1): ["LDC", "BPT.TRAP", "BRA", "NOP"]})[0]
  for what, family in REQUIRED.items():
    problems = dact_problems({k(1): [m for m in full if not has([m], family)]})
    assert problems and what in problems[0], (what, problems)
  assert dact_problems({k(1): full[:-1]})
  assert dact_problems({**good, k(2): full + ["MUFU.RCP", "MUFU.EX2"]})


def test_sm100_gemm_dact_units_sass(unit_cubins, capsys):
  kernels, usage = unit_kernels(unit_cubins, KERNEL)
  _check(kernels, usage, capsys, "the launch units compiled here")


def test_sm100_gemm_dact_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
