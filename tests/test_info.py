"""python -m jax_sm100.info / jax_sm100.info.report(): the install report, in process and
as a command, on this machine, under a faked sm90 GPU, and with a driver too old for
the kernels."""
import os
import re
import subprocess
import sys
import types

import jax
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _selftest_guard, info, tuning
from test_selftest import _table_sm100_targets

_FFI_CALL = jax.ffi.ffi_call  # traced (not run) where a test lets kernels launch


def _op_block(text: str, op: str) -> list:
  """The report's lines for `op`: its summary line and the decision lines under it."""
  lines = text.splitlines()
  start = lines.index(next(l for l in lines if l.startswith(f"  {op}: ")))
  block = [lines[start]]
  for l in lines[start + 1:]:
    if not l.startswith("    "):
      break
    block.append(l)
  return block


def _field(text: str, label: str) -> str:
  m = re.search(rf"^{re.escape(label)}:\s+(.*)$", text, re.M)
  assert m, (label, text)
  return m.group(1)


def test_report_on_this_machine():
  text = info.report((200, 264, 136))
  assert text.startswith("jax_sm100 install report")
  assert jax_sm100.__version__ in _field(text, "jax_sm100")
  assert _field(text, "jax").startswith(jax.__version__)
  assert _field(text, "python").startswith(sys.version.split()[0])
  name = jax_sm100.backend()
  backend_line = _field(text, "backend")
  assert backend_line.startswith(f"{name}: ")
  if name == "reference":
    assert _backend.why_reference() in backend_line
  if _ffi_registry._ffi is not None:
    assert _field(text, "FFI targets") == ", ".join(_ffi_registry.target_names())
  assert "200 x 264 x 136" in text
  # Each op's summary is what tuning.explain says for the same call.
  for op in info.OPS:
    fn, args = info.op_examples(200, 264, 136)[op]
    paths = {d.path for d in tuning.explain(fn, *args)}
    block = _op_block(text, op)
    want = " and ".join(p for p in ("kernel", "xla", "reference") if p in paths)
    assert want and set(want.split(" and ")) == paths, paths  # no path unknown to the report
    assert block[0].startswith(f"  {op}: {want}"), block
    assert len(block) > 1, block  # at least one decision with its reason
    if name == "reference":
      assert all("backend() is 'reference'" in l for l in block[1:]), block


def test_report_names_each_op_once_and_exits_zero_as_a_command(tmp_path):
  env = dict(os.environ)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, "-m", "jax_sm100.info", "--shape", "256x512x384"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  text = out.stdout
  assert text.startswith("jax_sm100 install report")
  assert re.search(r"^backend:\s+(sm90|sm100|cpu_ffi|reference): \S", text, re.M), text
  assert "256 x 512 x 384" in text
  for op in info.OPS:
    assert len(re.findall(rf"^  {op}: (kernel|xla|reference)", text, re.M)) == 1, (op, text)
  # The subprocess reports the same backend as this process (same environment).
  assert re.search(rf"^backend:\s+{jax_sm100.backend()}: ", text, re.M), text


def test_bad_shape_is_refused():
  with pytest.raises(SystemExit) as e:
    info.main(["--shape", "12x0x4"])
  assert e.value.code == 2


def test_report_under_a_faked_sm90_gpu_shows_kernels_and_configs(fake_sm90):
  text = info.report((4096, 4096, 4096))
  assert _field(text, "backend").startswith("sm90: ")
  for op in info.OPS:
    block = _op_block(text, op)
    if op == "mxfp8_matmul":  # Hopper has no block-scaled MMA: the reference, and why
      assert block[0] == f"  {op}: reference" and len(block) == 2, block
      assert block[1].startswith("    reference jax_sm100_mxfp8_gemm ") and (
          "no block-scaled MMA" in block[1]), block
      continue
    assert block[0] == f"  {op}: kernel", block
    assert all(l.startswith("    kernel ") for l in block[1:]), block
  # The configuration is the tuning rule's for the launch, with its reason.
  want = tuning.gemm_config(4096, 4096, 4096)
  (line,) = _op_block(text, "matmul")[1:]
  assert str(want) in line and "jax_sm100_gemm (4096x4096, 4096x4096)" in line
  assert "waves*area/efficiency" in line
  fp8 = [l for l in _op_block(text, "fp8_dot")[1:] if "jax_sm100_fp8_gemm " in l]
  assert len(fp8) == 1 and str(tuning.fp8_config(4096, 4096, 4096)) in fp8[0]


def test_an_invalid_switch_is_reported_not_raised(monkeypatch):
  monkeypatch.setenv(_backend.BACKEND_ENV, "fastest")
  text = info.report((128, 128, 128))
  assert "JAX_SM100_BACKEND='fastest'" in _field(text, "backend")
  assert "JAX_SM100_BACKEND=fastest" in _field(text, "switches")
  for op in info.OPS:
    assert _op_block(text, op)[0].startswith(f"  {op}: error: ValueError"), op
  assert info.main(["--shape", "128x128x128"]) == 0


@pytest.fixture
def old_driver_sm90(monkeypatch):
  """A stand-in H100 with a build that has sm_90a kernels (built with CUDA 13.0), every
  target 'registered', and a CUDA 12.8 driver (jax[cuda12]); ffi_call must not be
  reached."""
  for var in (_backend.FORCE_REFERENCE_ENV, _backend.BACKEND_ENV,
              _ffi_registry.DISABLE_TARGETS_ENV):
    monkeypatch.delenv(var, raising=False)
  dev = types.SimpleNamespace(platform="gpu", compute_capability="9.0", device_kind="NVIDIA H100",
                              client=types.SimpleNamespace(platform_version="cuda 12080"))
  monkeypatch.setattr(_backend, "_default_device", lambda: dev)
  monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: True)
  monkeypatch.setattr(_ffi_registry, "cuda_archs", lambda: ("sm_90a", "sm_100a"))
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  monkeypatch.setattr(_backend, "cuda_driver_version", lambda: 12080)
  monkeypatch.setattr(_backend, "cuda_runtime_version", lambda: 13000)
  monkeypatch.setattr(_backend, "_warned_old_driver", False)

  def no_launch(*a, **k):
    raise AssertionError("a kernel launch was traced with a driver too old for it")
  monkeypatch.setattr(jax.ffi, "ffi_call", no_launch)
  jax.clear_caches()
  yield dev
  jax.clear_caches()


DRIVER_MSG = ("the CUDA driver supports CUDA 12.8 but the kernels need CUDA 13.0 or newer "
              "(built with CUDA 13.0; driver >= 580 for CUDA 13); taking the reference path")


def test_report_with_a_driver_too_old(old_driver_sm90):
  with pytest.warns(RuntimeWarning, match=re.escape(DRIVER_MSG)):
    text = info.report((512, 512, 512))
  assert _field(text, "CUDA driver") == "supports CUDA 12.8 (12080)"
  assert _field(text, "kernels") == ("built with CUDA 13.0: need a driver for CUDA 13.0 or "
                                     "newer (>= 580)")
  assert _field(text, "driver check") == f"TOO OLD: {DRIVER_MSG}"
  assert _field(text, "device").startswith("NVIDIA H100 (gpu, compute capability 9.0)")
  assert _field(text, "backend") == f"reference: {DRIVER_MSG}"
  for op in info.OPS:
    block = _op_block(text, op)
    assert block[0] == f"  {op}: reference", block
    assert all(l.endswith(f"backend() is 'reference': {DRIVER_MSG}") for l in block[1:]), block


def test_report_with_a_driver_new_enough(old_driver_sm90, monkeypatch):
  monkeypatch.setattr(_backend, "cuda_driver_version", lambda: 13000)
  monkeypatch.setattr(_backend, "cuda_runtime_version", lambda: 13010)
  monkeypatch.setattr(jax.ffi, "ffi_call", _FFI_CALL)
  text = info.report((512, 512, 512))
  assert _field(text, "driver check") == "ok"
  assert _field(text, "backend").startswith("sm90: ")
  # No product falls back for the driver: the kernels run (matmul may go to XLA's dot
  # where the measured dispatch prefers it; MXFP8 has no Hopper kernel).
  for op in info.OPS:
    block = _op_block(text, op)
    assert block[0] in (f"  {op}: kernel", f"  {op}: xla") or op == "mxfp8_matmul", block
    assert DRIVER_MSG not in "\n".join(block), block
  assert _op_block(text, "fp8_blockwise_matmul")[0] == "  fp8_blockwise_matmul: kernel"


def test_report_under_a_faked_b200_shows_the_sm100_kernels(monkeypatch):
  # A stand-in B200 whose build has the sm_100a kernels of ffi/src/targets.h, with the
  # first-use self-test off (it would run on this fake device): every op, the FP8 and
  # MXFP8 GEMMs included, is traced into its kernel, with the sm100 configurations.
  for var in (_backend.FORCE_REFERENCE_ENV, _backend.BACKEND_ENV,
              _ffi_registry.DISABLE_TARGETS_ENV):
    monkeypatch.delenv(var, raising=False)
  dev = types.SimpleNamespace(platform="gpu", compute_capability="10.0",
                              device_kind="NVIDIA B200", core_count=148,
                              client=types.SimpleNamespace(platform_version="cuda 13000"))
  sm100 = frozenset(_table_sm100_targets())
  monkeypatch.setattr(_backend, "_default_device", lambda: dev)
  monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: True)
  monkeypatch.setattr(_ffi_registry, "cuda_archs", lambda: ("sm_90a", "sm_100a"))
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: sm100)
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  monkeypatch.setattr(_backend, "cuda_driver_version", lambda: 13000)
  monkeypatch.setattr(_backend, "cuda_runtime_version", lambda: 13000)
  monkeypatch.setattr(_selftest_guard, "_enabled", False)
  jax.clear_caches()
  try:
    text = info.report((4096, 4096, 4096))
  finally:
    jax.clear_caches()
  assert _field(text, "backend").startswith("sm100: ")
  assert "never run on hardware here" in _field(text, "backend")
  shown = set(_field(text, "sm_100a kernels").split(", "))
  assert shown == sm100 and {"jax_sm100_fp8_gemm", "jax_sm100_mxfp8_gemm"} <= shown
  for op in info.OPS:
    block = _op_block(text, op)
    assert block[0] == f"  {op}: kernel", block
  (fp8,) = _op_block(text, "fp8_blockwise_matmul")[1:]
  assert "Fp8Config(block_m=128, block_n=128, cluster=1, pair_along_n=False" in fp8
  (mx,) = _op_block(text, "mxfp8_matmul")[1:]
  assert mx.startswith("    kernel    jax_sm100_mxfp8_gemm (4096x4096, ") and "tile 128x" in mx
