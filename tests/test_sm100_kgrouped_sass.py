"""SASS checks of the sm_100a K-grouped GEMM (ffi/src/sm100/kgrouped_gemm_launch.cu): no
machine here runs it, so the machine code itself is inspected.

1. The launch unit compiled here for sm_100a (nvcc -cubin) and, where the installed
   extension holds sm_100a code, the shipped kernels: every instantiation of
   sm100_kgrouped_gemm_kernel (2 tiles x bf16/f16 in x bf16/f16/f32 out) holds what the
   M-grouped kernel's check requires (kind::f16 UMMA in cta_group::1 forms only, UMMA
   commit, TMEM load, TMA load and store, CLC try_cancel; no kind::f8f6f4) and is not a
   trap stub.
2. ptxas's usage of each instantiation is printed: registers within budget, no stack, no
   local memory.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from test_sm100_grouped_sass import grouped_problems
from test_sm100_sass import (
    _base, check_usage, compile_unit, extension_kernels, unit_kernels)

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "ffi" / "src" / "sm100" / "kgrouped_gemm_launch.cu"
KERNEL = "sm100_kgrouped_gemm_kernel"
INSTANTIATIONS = 12
TARGET = "jax_sm100_kgrouped_gemm"


def _check(kernels, usage, capsys, where):
  assert len({_base(n) for n in kernels}) == INSTANTIATIONS, sorted(kernels)
  problems = grouped_problems(kernels)
  assert not problems, "\n".join(problems)
  check_usage(kernels, usage, capsys, f"the sm_100a {KERNEL} instantiations ({where})")


@pytest.fixture(scope="module")
def unit_cubin(tmp_path_factory):
  return compile_unit(UNIT, tmp_path_factory.mktemp("kgrouped_sass"))


def test_sm100_kgrouped_unit_sass(unit_cubin, capsys):
  kernels, usage = unit_kernels([unit_cubin], KERNEL)
  _check(kernels, usage, capsys, "the launch unit compiled here")



def test_sm100_kgrouped_extension_sass(capsys):
  kernels, usage = extension_kernels(KERNEL, TARGET)
  _check(kernels, usage, capsys, "the installed extension")
