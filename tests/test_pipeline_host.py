"""CPU protocol tests of the pipeline library (tests/cpp/pipeline_host_*.cc).

The C++ test instantiates the same pipeline templates the kernels use with the
std::atomic HostBarrier and drives them from CPU threads (one producer, several
consumers, Stages 1..8, thousands of rounds with random delays). It is built three
ways and each build must print ALL PASSED:
  * -O2 with JAX_SM100_PIPELINE_DEBUG (bounded waits; includes the broken-protocol tests)
  * -O2 release (unbounded waits, as kernels run)
  * -fsanitize=thread -O1 -g with debug (fewer rounds): the payloads are plain memory,
    so any ordering hole in the barrier protocol is a reported data race.
Skipped only when no C++ compiler is found (and the TSan build when the toolchain
cannot link ThreadSanitizer programs).
"""
from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import subprocess

import pytest

from emu_harness import CXX, INCLUDE, ROOT  # noqa: F401 (INCLUDE: re-exported to the C++ tests)
# main + broken-protocol tests, ProducerConsumerPipeline cases, tile pipeline cases (the
# shared harness is pipeline_host_harness.h).
SRCS = [ROOT / "tests" / "cpp" / f"pipeline_host_{part}.cc" for part in ("test", "pc", "tiles")]


pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler found")


def _build(out: pathlib.Path, flags: list[str]) -> pathlib.Path:
  cmd = [CXX, "-std=c++17", "-pthread", "-Wall", "-Wextra", "-I", str(INCLUDE),
         *flags, *map(str, SRCS), "-o", str(out)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, f"build failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  return out


def _run(binary: pathlib.Path, args: list[str], timeout: float, env=None) -> str:
  seed = str(secrets.randbits(32))
  cmd = [str(binary), "--seed", seed, *args]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
  out = res.stdout + res.stderr
  print(f"$ {' '.join(cmd)}\n{out}")
  if "unexpected memory mapping" in out and shutil.which("setarch"):
    # Some kernels' ASLR layout is incompatible with TSan: retry without randomisation.
    res = subprocess.run(["setarch", os.uname().machine, "-R", *cmd], capture_output=True,
                         text=True, timeout=timeout, env=env)
    out = res.stdout + res.stderr
    print(f"(retried without ASLR)\n{out}")
  assert res.returncode == 0, f"exit code {res.returncode} (seed {seed})\n{out}"
  assert "ALL PASSED" in out, out
  assert "WARNING: ThreadSanitizer" not in out, out
  return out


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("pipeline_host")


def test_protocol_debug_build(build_dir):
  """Bounded waits on: every protocol test plus the broken-protocol detections."""
  exe = _build(build_dir / "pipeline_host_debug", ["-O2", "-DJAX_SM100_PIPELINE_DEBUG"])
  out = _run(exe, [], timeout=120)
  for name in ("stress_stages_1_to_8", "input_tile_pipeline", "epi_load_pipeline",
               "output_tile_pipeline", "broken_consumer_never_releases",
               "broken_producer_never_signals", "unreleased_handle_reported"):
    assert f"PASS {name}" in out, name
  # The broken protocol was reported by the bounded wait, naming pipeline and stage.
  assert "pipeline 'broken_input': producer waits for consumer (empty) on stage 0" in out


def test_protocol_release_build(build_dir):
  """Unbounded waits, as in a release kernel build."""
  exe = _build(build_dir / "pipeline_host_release", ["-O2"])
  out = _run(exe, [], timeout=120)
  assert "release build" in out and "PASS stress_stages_1_to_8" in out


def _tsan_available(build_dir: pathlib.Path) -> bool:
  probe = build_dir / "tsan_probe.cc"
  probe.write_text("#include <thread>\nint main(){std::thread t([]{}); t.join();}\n")
  res = subprocess.run([CXX, "-fsanitize=thread", "-pthread", str(probe), "-o",
                        str(build_dir / "tsan_probe")], capture_output=True, text=True)
  return res.returncode == 0


def test_protocol_thread_sanitizer(build_dir):
  """Plain-memory payloads under TSan: a missing happens-before edge is a reported race."""
  if not _tsan_available(build_dir):
    pytest.skip("this C++ toolchain cannot link -fsanitize=thread programs")
  exe = _build(build_dir / "pipeline_host_tsan",
               ["-O1", "-g", "-fsanitize=thread", "-DJAX_SM100_PIPELINE_DEBUG"])
  env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
  _run(exe, ["--scale", "0.25"], timeout=300, env=env)
