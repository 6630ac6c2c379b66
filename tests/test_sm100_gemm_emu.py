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

import os
import pathlib
import secrets
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "emu" / "sm100_gemm_emu_test.cc"


def _cxx() -> str | None:
  for cand in (os.environ.get("CXX"), "c++", "g++", "clang++"):
    if cand and shutil.which(cand):
      return shutil.which(cand)
  return None


def _cuda_include() -> pathlib.Path | None:
  """The CUDA toolkit's include directory (cuda_bf16.h, cuda_fp16.h: host-usable types)."""
  cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
  nvcc = shutil.which("nvcc")
  if nvcc:
    cands.append(str(pathlib.Path(os.path.realpath(nvcc)).parents[1]))
  cands += ["/usr/local/cuda"]
  for c in cands:
    if c and (pathlib.Path(c) / "include" / "cuda_bf16.h").exists():
      return pathlib.Path(c) / "include"
  return None


CXX = _cxx()
CUDA_INCLUDE = _cuda_include()
pytestmark = pytest.mark.skipif(CXX is None or CUDA_INCLUDE is None,
                                reason="needs a C++ compiler and the CUDA toolkit headers")


def _build(include: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  cmd = [CXX, "-std=c++17", "-O1", "-pthread", "-DJAX_SM100_PIPELINE_DEBUG", "-I", str(include),
         "-I", str(ROOT / "tests"), "-I", str(CUDA_INCLUDE), str(SRC), "-o", str(out)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  return out


def _run(binary: pathlib.Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
  res = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout,
                       cwd=binary.parent)
  print(res.stdout[-6000:], res.stderr[-3000:])
  return res


def test_emulated_gemm(tmp_path):
  binary = _build(ROOT / "ffi" / "include", tmp_path / "gemm_emu")
  res = _run(binary, "--seed", str(secrets.randbits(31)))
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
  include = tmp_path / "include"
  shutil.copytree(ROOT / "ffi" / "include", include)
  header = include / rel
  text = header.read_text()
  assert text.count(old) == 1, f"the mutation site moved: update FAULTS[{fault!r}]"
  header.write_text(text.replace(old, new))
  binary = _build(include, tmp_path / "gemm_emu_mutant")
  res = _run(binary, "--quick", "--wait-ms", "3000", timeout=300)
  failures = [l for l in res.stdout.splitlines() if l.startswith("FAIL")]
  assert res.returncode != 0 and failures, f"planted fault {fault} went unnoticed"
  print(f"planted fault {fault}: {failures[0][:300]}")
