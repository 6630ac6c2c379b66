"""CPU test of FastDivisor (ffi/include/jax_sm100/common/fast_divisor.h), the FP8 GEMM's
tile-order division: tests/cpp/fast_divisor_test.cc checks it against / and % over every
divisor up to 4096, powers of two and their neighbours up to 2^30, and random divisors,
on dense, boundary and random x < 2^31. Skipped only when no C++ compiler is found."""
from __future__ import annotations

import pathlib
import secrets
import subprocess

import pytest

from test_pipeline_host import CXX, INCLUDE

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "cpp" / "fast_divisor_test.cc"

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler found")


def test_fast_divisor_matches_division(tmp_path):
  exe = tmp_path / "fast_divisor_test"
  cmd = [CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", "-I", str(INCLUDE), str(SRC), "-o", str(exe)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  seed = str(secrets.randbits(32))
  res = subprocess.run([str(exe), "--seed", seed], capture_output=True, text=True, timeout=300)
  print(res.stdout + res.stderr)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
