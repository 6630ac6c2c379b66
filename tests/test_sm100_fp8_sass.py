"""SASS checks of the sm_100a blockwise FP8 GEMM (rung 2 of the proof ladder in DESIGN.md):
no machine here runs it, so the machine code itself is inspected.

1. The probe (tests/cuda/sass_probe_sm100_fp8.cu): tcgen05.mma.kind::f8f6f4 compiled with
   `nvcc -arch=sm_100a -cubin` and disassembled; what probe_f8f6f4_mma has and the
   baseline lacks is its SASS, UTCQMMA (kind::f16 is UTCHMMA: probe_f16_mma). The test pins
   the name, so a toolchain that renames it fails here instead of weakening check 2.
2. The shipped extension: every sm_100a instantiation of sm100_fp8_gemm_kernel holds the
   f8f6f4 UMMA (and no kind::f16 one), the TMEM load, TMA load and store, the UMMA commit
   and the CLC try_cancel, uses only cta_group::1 forms, is not a trap stub, and fits the
   register and static shared-memory budgets; ptxas's usage is printed into the output.

The parsing and the stub / budget definitions are tests/test_sm100_sass.py's.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_sm100_sass import (
    SASS_CLC_TRY_CANCEL, SASS_TMA_LOAD, SASS_TMA_STORE, SASS_TMEM_LOAD, SASS_UMMA,
    SASS_UMMA_COMMIT, _base, _cuobjdump, _demangle, _extension_sass, _ffi, _need_arch, _tool,
    budget_problems, cta_group_problems, has, is_stub, parse_res_usage, parse_sass)

REPO = Path(__file__).resolve().parents[1]
PROBE_SOURCE = REPO / "tests" / "cuda" / "sass_probe_sm100_fp8.cu"

SASS_UMMA_F8F6F4 = "UTCQMMA"  # tcgen05.mma.cta_group::1.kind::f8f6f4 (probe_f8f6f4_mma)

SM100_FP8_KERNEL = "sm100_fp8_gemm_kernel"
SM100_FP8_MIN_INSTANTIATIONS = 1  # one form (128 x 128, one CTA), plain and residual alike
SM100_FP8_REQUIRED = {
    "tcgen05.mma.kind::f8f6f4": SASS_UMMA_F8F6F4,
    "tcgen05.commit": SASS_UMMA_COMMIT,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
}
FP8_TARGETS = ("jax_sm100_fp8_gemm", "jax_sm100_fp8_gemm_residual")


def fp8_problems(kernels):
  """What keeps each of `kernels` ({name: mnemonics}) from being the sm_100a FP8 GEMM: a
  trap stub, a missing SM100_FP8_REQUIRED instruction, or a kind::f16 UMMA (the kernel's
  operands are e4m3). Empty when all are fine."""
  problems = []
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in SM100_FP8_REQUIRED.items() if not has(body, family)]
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
    if has(body, SASS_UMMA):
      problems.append(f"{name}: holds a kind::f16 UMMA ({SASS_UMMA})")
  return problems


# --- 1. the probe -------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe_sass(tmp_path_factory):
  nvcc = _tool("nvcc")
  if nvcc is None:
    pytest.skip("nvcc not available: cannot compile the sm_100a probe")
  cubin = tmp_path_factory.mktemp("sass_probe_fp8") / "probe.cubin"
  out = subprocess.run([nvcc, "-std=c++17", "-arch=sm_100a", "-cubin", "-o", str(cubin),
                        str(PROBE_SOURCE)], capture_output=True, text=True)
  assert out.returncode == 0, f"nvcc failed on {PROBE_SOURCE.name}:\n{out.stderr}"
  return parse_sass(_cuobjdump("-sass", cubin))


def test_probe_f8f6f4_name(probe_sass, capsys):
  base = probe_sass["probe_f8f6f4_baseline"]
  body = probe_sass["probe_f8f6f4_mma"]
  extra = sorted(set(body) - set(base))
  assert SASS_UMMA_F8F6F4 in body, (
      f"tcgen05.mma.kind::f8f6f4: expected SASS {SASS_UMMA_F8F6F4!r}, the toolchain now emits "
      f"{extra} beyond the baseline: update the table")
  assert not has(base, SASS_UMMA_F8F6F4)
  # the two kinds are told apart by name: the f16 form is the bf16 GEMM's UTCHMMA
  f16 = probe_sass["probe_f16_mma"]
  assert SASS_UMMA in f16 and not has(f16, SASS_UMMA_F8F6F4)
  assert not has(body, SASS_UMMA)
  with capsys.disabled():
    print(f"\n  probe_f8f6f4_mma: {SASS_UMMA_F8F6F4} (beyond the baseline: {', '.join(extra)})")


def test_fp8_check_on_the_probe(probe_sass):
  """The check the shipped kernel gets passes on a body holding every required
  instruction, and fails on the baseline, on a trap stub, without each requirement, and
  with the f16 UMMA in place of the f8f6f4 one."""
  full = list(probe_sass["probe_f8f6f4_mma"]) + [
      "UTCBAR", "LDTM.x16", "UTMALDG.3D", "UTMASTG.3D", "UGETNEXTWORKID.SELFCAST"]
  assert fp8_problems({"k": full}) == []
  base = fp8_problems({"k": probe_sass["probe_f8f6f4_baseline"]})
  assert len(base) == 1 and all(what in base[0] for what in SM100_FP8_REQUIRED), base
  assert "trap stub" in fp8_problems({"k": ["LDC", "BPT.TRAP", "BRA", "NOP"]})[0]
  for what, family in SM100_FP8_REQUIRED.items():
    problems = fp8_problems({"k": [m for m in full if not has([m], family)]})
    assert len(problems) == 1 and what in problems[0], (what, problems)
  swapped = [SASS_UMMA if m == SASS_UMMA_F8F6F4 else m for m in full]
  assert len(fp8_problems({"k": swapped})) == 2


# --- 2. the shipped sm_100a FP8 GEMM --------------------------------------------------


@pytest.fixture(scope="module")
def sm100_fp8():
  _need_arch("sm_100a")
  kernels = {n: b for n, b in _extension_sass("sm_100a").items() if SM100_FP8_KERNEL in n}
  claims = [t for t in _ffi.sm100_targets() if t in FP8_TARGETS]
  if not kernels and not claims:
    pytest.skip(f"no {SM100_FP8_KERNEL} in this build and targets.h marks no FP8 GEMM target "
                "as having an sm_100a kernel")
  assert kernels, (f"targets.h says {claims} have an sm_100a kernel, but the sm_100a code "
                   f"holds no {SM100_FP8_KERNEL}")
  assert sorted(claims) == sorted(FP8_TARGETS), (
      f"the build holds {SM100_FP8_KERNEL} but targets.h marks only {claims} as sm_100a")
  return kernels


def test_sm100_fp8_instructions(sm100_fp8):
  assert len({_base(n) for n in sm100_fp8}) >= SM100_FP8_MIN_INSTANTIATIONS
  problems = fp8_problems(sm100_fp8) + cta_group_problems(sm100_fp8)
  assert not problems, "\n".join(problems)
  assert not any(".2CTA" in m for body in sm100_fp8.values() for m in body), "a 2-SM form"


def test_sm100_fp8_resource_usage(sm100_fp8, capsys):
  usage = parse_res_usage(_cuobjdump("-res-usage", "-arch", "sm_100a", _ffi.library_path()))
  kernels = sorted({_base(n) for n in sm100_fp8})
  missing = [n for n in kernels if n not in usage]
  assert not missing, f"no -res-usage entry for {missing}"
  names = _demangle(kernels)
  with capsys.disabled():
    print(f"\n  ptxas usage of the sm_100a {SM100_FP8_KERNEL} instantiations "
          "(a 128-float accumulator per epilogue thread lives in registers):")
    print(f"  {'REG':>4} {'SHARED':>7} {'STACK':>5} {'LOCAL':>5}  kernel")
    for name in kernels:
      u = usage[name]
      print(f"  {u.get('REG', -1):>4} {u.get('SHARED', -1):>7} {u.get('STACK', -1):>5} "
            f"{u.get('LOCAL', -1):>5}  {names[name]}")
  over = budget_problems({names[n]: usage[n] for n in kernels})
  assert not over, "over budget:\n" + "\n".join(over)
  # The accumulator must not have gone to local memory (a dynamically indexed array).
  spilled = [names[n] for n in kernels if usage[n].get("STACK", 0) or usage[n].get("LOCAL", 0)]
  assert not spilled, f"stack / local memory in {spilled}"
