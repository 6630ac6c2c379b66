"""SASS checks of the sm_100a FP8 GEMM with the fused bias/activation epilogue (ffi/src/
sm100/fp8_bias_launch.cu): no machine here runs it, so the machine code itself is
inspected.

1. The launch unit compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernels: sm100_fp8_bias_gemm_kernel, one
   instantiation per activation (five), each the FP8 GEMM (fp8_problems: the kind::f8f6f4
   UMMA and no kind::f16 one, the UMMA commit, the TMEM load, TMA load and store, the CLC
   try_cancel; not a trap stub), only cta_group::1 forms; relu adds FMNMX and gelu / silu
   add MUFU over the instantiation without an activation.
2. ptxas's usage is printed: registers within budget, no stack, no local memory (the
   128-float accumulator of each epilogue thread stays in registers).

The instruction names are pinned by the probes of tests/test_sm100_sass.py and
tests/test_sm100_fp8_sass.py; the parsing, the stub / budget definitions and the
activation's place in the mangled name are theirs and tests/test_sm100_gemm_bias_sass.py's.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from test_sm100_fp8_sass import SASS_UMMA_F8F6F4, fp8_problems
from test_sm100_gemm_bias_sass import RELU, TRANSCENDENTAL, _activation
from test_sm100_sass import (
    _base, check_usage, compile_unit, cta_group_problems, extension_kernels, has, unit_kernels)

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "ffi" / "src" / "sm100" / "fp8_bias_launch.cu"
KERNEL = "sm100_fp8_bias_gemm_kernel"
TARGET = "jax_sm100_fp8_gemm_bias"


def fp8_bias_problems(kernels):
  """What keeps `kernels` ({name: mnemonics}) from being the five FP8 bias/activation
  kernels: the FP8 GEMM's problems, a 2-SM form, an activation missing from the set or
  without its instructions (FMNMX for relu, more MUFU than the kernel without one)."""
  problems = fp8_problems(kernels) + cta_group_problems(kernels)
  acts = {_activation(n): body for n, body in kernels.items()}
  if sorted(a for a in acts if a is not None) != [0, 1, 2, 3, 4]:
    problems.append(f"activations {sorted(acts, key=str)}: expected one kernel for each of 0..4")
  mufu = lambda body: sum(has([m], "MUFU") for m in body)  # noqa: E731
  for name, body in sorted(kernels.items()):
    act = _activation(name)
    if any(".2CTA" in m for m in body):
      problems.append(f"{name}: a 2-SM (cta_group::2) form")
    if act in RELU and not has(body, "FMNMX"):
      problems.append(f"{name}: relu without FMNMX")
    if act in TRANSCENDENTAL and 0 in acts and mufu(body) <= mufu(acts[0]):
      problems.append(f"{name}: no MUFU beyond the kernel without an activation")
  return problems


def test_fp8_bias_check_rejects():
  full = [SASS_UMMA_F8F6F4, "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D",
          "UGETNEXTWORKID.SELFCAST"]
  k = lambda act: f"_ZN...sm100_fp8_bias_gemm_kernelINS1_13Fp8GemmConfigELNS0_10ActivationE{act}EEEv"  # noqa: E731
  good = {k(0): full, k(1): full + ["FMNMX"], k(2): full + ["MUFU.TANH"],
          k(3): full + ["MUFU.EX2"], k(4): full + ["MUFU.EX2", "MUFU.RCP"]}
  assert fp8_bias_problems(good) == []
  assert fp8_bias_problems({**good, k(1): full})                      # relu without FMNMX
  assert fp8_bias_problems({**good, k(4): full})                      # silu without MUFU
  assert fp8_bias_problems({n: b for n, b in good.items() if n != k(3)})  # one missing
  assert fp8_bias_problems({**good, k(0): ["LDC", "BPT.TRAP", "BRA", "NOP"]})
  assert fp8_bias_problems({**good, k(2): full + ["MUFU.TANH", "UTCQMMA.2CTA"]})


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == 5, sorted(kernels)
  problems = fp8_bias_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} ({where})")


@pytest.fixture(scope="module")
def unit_cubin(tmp_path_factory):
  return compile_unit(UNIT, tmp_path_factory.mktemp("fp8_bias_sass"))


def test_sm100_fp8_bias_unit_sass(unit_cubin, capsys):
  kernels, usage = unit_kernels([unit_cubin], KERNEL)
  _check(kernels, usage, capsys, "the launch unit compiled here")


def test_sm100_fp8_bias_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
