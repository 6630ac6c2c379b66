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
from test_sm100_sass import (_base, _cuobjdump, _extension_sass, _ffi, _need_arch, check_usage,
                             compile_unit, parse_res_usage, parse_sass)

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
  kernels = {n: b for n, b in parse_sass(_cuobjdump("-sass", unit_cubin)).items() if KERNEL in n}
  usage = parse_res_usage(_cuobjdump("-res-usage", unit_cubin))
  _check(kernels, usage, capsys, "the launch unit compiled here")


def test_sm100_kgrouped_extension_sass(capsys):
  _need_arch("sm_100a")
  kernels = {n: b for n, b in _extension_sass("sm_100a").items() if KERNEL in n}
  claims = TARGET in _ffi.sm100_targets()
  if not kernels and not claims:
    pytest.skip(f"no {KERNEL} in this build and targets.h does not mark {TARGET} as sm_100a")
  assert kernels, f"targets.h says {TARGET} has an sm_100a kernel, but the build holds no {KERNEL}"
  assert claims, f"the build holds {KERNEL} but targets.h does not mark {TARGET} as sm_100a"
  usage = parse_res_usage(_cuobjdump("-res-usage", "-arch", "sm_100a", _ffi.library_path()))
  _check(kernels, usage, capsys, "the installed extension")
