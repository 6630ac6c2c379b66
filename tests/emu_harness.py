"""The CPU emulator's test harness (tests/emu): the host compiler and CUDA headers it
needs, building one emulator test program against an include tree, running it, and the
planted-fault runs (one mutation applied to a copy of the kernel headers; the emulated
run must fail). Shared by the tests/test_sm100_*_emu.py drivers."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "ffi" / "include"


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
needs_toolchain = pytest.mark.skipif(CXX is None or CUDA_INCLUDE is None,
                                     reason="needs a C++ compiler and the CUDA toolkit headers")


# --wait-ms of the full emulated grids: every pipeline wait bounded at 120 s (collectives
# 180 s) instead of the driver's 20 s. The emulator runs one OS thread per CUDA thread; on
# a 2-core machine with two such grids at once (pytest-xdist) a lane waited over 30 s for
# its warp or cluster while the grid still progressed (the dact and bias grids in CI: the
# same seeds pass with a longer bound, in the same time). A protocol that never completes
# still fails, bounded by run()'s timeout.
GRID_WAIT = ("--wait-ms", "120000")


def build(src: pathlib.Path, include: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  """Compiles the emulator test program `src` against the kernel headers under `include`."""
  cmd = [CXX, "-std=c++17", "-O1", "-pthread", "-DJAX_SM100_PIPELINE_DEBUG", "-I", str(include),
         "-I", str(ROOT / "tests"), "-I", str(CUDA_INCLUDE), str(src), "-o", str(out)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  return out


def run(binary: pathlib.Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
  res = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout,
                       cwd=binary.parent)
  print(res.stdout[-6000:], res.stderr[-3000:])
  return res


def planted_fault_failures(src: pathlib.Path, fault: str, rel: str, old: str, new: str,
                           tmp_path: pathlib.Path) -> list[str]:
  """Replaces the one occurrence of `old` by `new` in a copy of header `rel`, builds `src`
  against it and runs it (--quick, 3 s bound on every wait); asserts the run failed and
  returns its FAIL lines."""
  include = tmp_path / "include"
  shutil.copytree(INCLUDE, include)
  header = include / rel
  text = header.read_text()
  assert text.count(old) == 1, f"the mutation site moved: update FAULTS[{fault!r}]"
  header.write_text(text.replace(old, new))
  binary = build(src, include, tmp_path / "emu_mutant")
  res = run(binary, "--quick", "--wait-ms", "3000", timeout=300)
  failures = [l for l in res.stdout.splitlines() if l.startswith("FAIL")]
  assert res.returncode != 0 and failures, f"planted fault {fault} went unnoticed"
  print(f"planted fault {fault}: {failures[0][:300]}")
  return failures
