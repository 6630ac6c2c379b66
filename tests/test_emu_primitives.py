"""Primitive tests of the sm_100a CPU emulator (tests/emu/emu_ops.h, emu_runtime.h).

Builds tests/emu/emu_primitives_test.cc with the system C++ compiler (debug pipeline
mode: every mbarrier wait is bounded) and runs it on a fresh seed. The program checks
each modelled PTX primitive against a reference written from the PTX field layouts:
TMA tile loads/stores with 128B/64B/32B swizzle and out-of-bounds boxes; tcgen05.mma
kind::f16 through hand-built shared-memory and instruction descriptors (K-/MN-major,
bf16/f16, N 64/128/256, accumulate on/off, the 2-CTA M=256 form); TMEM allocation and
lane-quarter rules; cluster launch control; and that broken kernels fail loudly (a
missing commit is a bounded-wait PipelineError, a wrong SBO or an early stage reuse
gives a wrong answer, a livelock hits the grid watchdog). It must print ALL PASSED.
Skipped only when no C++ compiler is found.
"""
from __future__ import annotations

import secrets
import subprocess

import pytest

from emu_harness import CXX, ROOT

SRC = ROOT / "tests" / "emu" / "emu_primitives_test.cc"

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler found")


def test_emu_primitives(tmp_path):
  exe = tmp_path / "emu_primitives_test"
  cmd = [CXX, "-std=c++17", "-pthread", "-O2", "-Wall", "-Wextra", "-I", str(ROOT / "ffi" / "include"),
         "-I", str(ROOT / "tests"), "-DJAX_SM100_PIPELINE_DEBUG", str(SRC), "-o", str(exe)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  assert "warning" not in res.stderr, res.stderr

  seed = str(secrets.randbits(32))
  run = subprocess.run([str(exe), "--seed", seed], capture_output=True, text=True, timeout=120)
  out = run.stdout + run.stderr
  print(out)
  assert run.returncode == 0, f"exit code {run.returncode} (seed {seed})\n{out}"
  for name in ("addresses", "tma", "umma", "tmem_rules", "clc", "hangs_and_aborts"):
    assert f"PASS {name}" in out, name
  assert "ALL PASSED" in out, out
