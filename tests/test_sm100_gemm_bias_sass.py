"""SASS checks of the sm_100a bias/activation GEMM (ffi/src/sm100/gemm_bias_inst_*.cu): no
machine here runs it, so the machine code itself is inspected.

1. The four launch units compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernels: every instantiation of
   sm100_gemm_bias_kernel (3 tilings x 5 activations x 4 type pairs = 60) holds the
   kind::f16 UMMA (UTCHMMA; .2CTA for the pair, never mixed), the commit (UTCBAR), the TMEM
   load (LDTM), TMA load and store (UTMALDG, UTMASTG: at least two store sites, d and pre),
   the CLC try_cancel (UGETNEXTWORKID) and the bias load (LDG), and is not a trap stub.
   Per activation: relu adds FMNMX and gelu / silu add MUFU (exp / tanh) over the same
   tiling and types' kernel without an activation.
2. ptxas's usage of each instantiation: registers within budget, no stack, no local
   memory (no spills).

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
UNITS = sorted((REPO / "ffi" / "src" / "sm100").glob("gemm_bias_inst_*.cu"))
KERNEL = "sm100_gemm_bias_kernel"
INSTANTIATIONS = 60
REQUIRED = {
    "tcgen05.mma.kind::f16": SASS_UMMA,
    "tcgen05.commit": SASS_UMMA_COMMIT,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
    "bias load": "LDG",
}
# kernels::Activation's value in the mangled name: ...ActivationE<value>E...
_ACT = re.compile(r"ActivationE(\d)E")
RELU, TRANSCENDENTAL = {1}, {2, 3, 4}
TARGET = "jax_sm100_gemm_bias"


def _activation(name):
  m = _ACT.search(name)
  return int(m.group(1)) if m else None


def bias_problems(kernels):
  """What keeps each of `kernels` ({name: mnemonics}) from being the sm_100a bias GEMM."""
  problems = []
  plain = {_ACT.sub("", _base(n)): body for n, body in kernels.items() if _activation(n) == 0}
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in REQUIRED.items() if not has(body, family)]
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
    if sum(has([m], SASS_TMA_STORE) for m in body) < 2:
      problems.append(f"{name}: one TMA store site (d and pre need two)")
    act, base = _activation(name), plain.get(_ACT.sub("", _base(name)))
    if act is None:
      problems.append(f"{name}: no activation in the name")
    elif base is not None and act in RELU and not has(body, "FMNMX"):
      problems.append(f"{name}: relu without FMNMX")
    elif base is not None and act in TRANSCENDENTAL and (
        sum(has([m], "MUFU") for m in body) <= sum(has([m], "MUFU") for m in base)):
      problems.append(f"{name}: no MUFU beyond the kernel without an activation")
  return problems + cta_group_problems(kernels)


@pytest.fixture(scope="module")
def unit_cubins(tmp_path_factory):
  assert len(UNITS) == 4, UNITS
  out_dir = tmp_path_factory.mktemp("bias_sass")
  return [compile_unit(unit, out_dir) for unit in UNITS]


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == INSTANTIATIONS, sorted(kernels)
  assert {_activation(n) for n in kernels} == {0, 1, 2, 3, 4}
  problems = bias_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} instantiations ({where})")


def test_bias_check_rejects():
  """The check passes on bodies holding every required instruction and fails on a stub,
  without each requirement, with one store site, and with an activation that adds nothing."""
  full = ["UTCHMMA", "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D", "UTMASTG.3D",
          "UGETNEXTWORKID.SELFCAST", "LDG.E"]
  k = lambda act: f"_Z...GemmConfigILi128ELi1EEE6__halfS5_LNS0_10ActivationE{act}EEEv"
  good = {k(0): full + ["MUFU.EX2"], k(1): full + ["FMNMX", "MUFU.EX2"],
          k(2): full + ["MUFU.EX2", "MUFU.EX2"]}
  assert bias_problems(good) == []
  assert "trap stub" in bias_problems({k(0): ["LDC", "BPT.TRAP", "BRA", "NOP"]})[0]
  for what, family in REQUIRED.items():
    problems = bias_problems({k(0): [m for m in full if not has([m], family)]})
    assert problems and what in problems[0], (what, problems)
  assert bias_problems({k(0): full[:4] + full[5:]})
  assert bias_problems({**good, k(1): full + ["MUFU.EX2"]})
  assert bias_problems({**good, k(2): full + ["FMNMX", "MUFU.EX2"]})


def test_sm100_gemm_bias_units_sass(unit_cubins, capsys):
  kernels, usage = unit_kernels(unit_cubins, KERNEL)
  _check(kernels, usage, capsys, "the launch units compiled here")



def test_sm100_gemm_bias_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
