"""CPU test of the grouped GEMMs' tile order (ffi/include/jax_sm100/common/grouped_scheduler.cuh):
tests/cpp/grouped_scheduler_test.cc checks the group table, the tile count and the tile ->
(group, tile row, tile column, rows) mapping against an independent model of
jax.lax.ragged_dot's group rule: G = 1, empty groups, negative sizes, sizes overflowing M
(up to INT32_MAX), rows in no group, one-row groups, M = 1, large G with the chunked table,
and that every output (row, tile column) is covered exactly once. Skipped only when no C++
compiler is found.

On the device (tests/cuda/grouped_scheduler_device.cu): the kernels' warp-cooperative table
build and the cached tile walk of a role, against the host model; compiled wherever nvcc is
found, run (marker gpu) on an sm_90 GPU."""
from __future__ import annotations

import pathlib
import secrets
import subprocess

import pytest

from test_pipeline_device import NVCC, _nvcc, needs_sm90
from test_pipeline_host import CXX, INCLUDE

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "cpp" / "grouped_scheduler_test.cc"
DEVICE_SRC = ROOT / "tests" / "cuda" / "grouped_scheduler_device.cu"


@pytest.mark.skipif(CXX is None, reason="no C++ compiler found")
def test_grouped_tile_order(tmp_path):
  exe = tmp_path / "grouped_scheduler_test"
  cmd = [CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(INCLUDE), str(SRC),
         "-o", str(exe)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  seed = str(secrets.randbits(32))
  res = subprocess.run([str(exe), "--seed", seed], capture_output=True, text=True, timeout=300)
  print(res.stdout + res.stderr)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_grouped_tile_order_device_program_compiles(tmp_path):
  _nvcc(tmp_path / "grouped_scheduler_device", [DEVICE_SRC], "90a", [])


@pytest.mark.gpu
@needs_sm90
def test_grouped_tile_order_on_device(tmp_path):
  exe = tmp_path / "grouped_scheduler_device"
  _nvcc(exe, [DEVICE_SRC], "90a", [])
  seed = str(secrets.randbits(31))
  res = subprocess.run([str(exe), "--seed", seed], capture_output=True, text=True, timeout=300)
  print(res.stdout + res.stderr)
  assert res.returncode == 0 and "ALL PASSED" in res.stdout, res.stdout + res.stderr
