"""backend(): capability detection, the force-reference switch, registration,
and import without the compiled module."""
import os
import re
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry


def _device(platform="gpu", cc="9.0", version="cuda 12080"):
  return types.SimpleNamespace(platform=platform, compute_capability=cc,
                               client=types.SimpleNamespace(platform_version=version))


@pytest.fixture
def built_with(monkeypatch):
  """Pretend the extension was built with CUDA for the given archs."""
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)

  def set_(archs=("sm_90a", "sm_100a"), sm100=frozenset(), device=None, driver=13000,
           runtime=13000):
    monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: True)
    monkeypatch.setattr(_ffi_registry, "cuda_archs", lambda: tuple(archs))
    monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset(sm100))
    monkeypatch.setattr(_backend, "_default_device", lambda: device)
    # The driver and the kernels' CUDA version, independent of this machine's driver.
    monkeypatch.setattr(_backend, "cuda_driver_version", lambda: driver)
    monkeypatch.setattr(_backend, "cuda_runtime_version", lambda: runtime)
    monkeypatch.setattr(_backend, "_warned_old_driver", False)
  return set_


@pytest.mark.parametrize("device,archs,sm100,want", [
    (_device(cc="9.0"), ("sm_90a", "sm_100a"), (), "sm90"),
    (_device(cc="9.0"), ("sm_90a",), (), "sm90"),
    (_device(cc="9.0"), ("sm_100a",), (), "reference"),        # no sm_90a code
    (_device(cc="8.0"), ("sm_90a", "sm_100a"), (), "reference"),  # Ampere
    (_device(cc="8.9"), ("sm_90a",), (), "reference"),
    (_device(cc="12.0"), ("sm_90a", "sm_100a"), (), "reference"),  # consumer Blackwell
    (_device(cc="10.0"), ("sm_90a", "sm_100a"), (), "reference"),  # no sm100 kernel yet
    (_device(cc="10.0"), ("sm_90a", "sm_100a"), ("jax_sm100_gemm",), "sm100"),
    (_device(cc="10.0"), ("sm_90a",), ("jax_sm100_gemm",), "reference"),
    (_device(cc="gfx90a", version="rocm 6.0"), ("sm_90a",), (), "reference"),
    (_device(platform="cpu", cc=None, version="cpu"), ("sm_90a",), (), "reference"),
])
def test_backend_from_capabilities(built_with, device, archs, sm100, want):
  built_with(archs=archs, sm100=sm100, device=device)
  assert jax_sm100.backend() == want


def test_force_reference_env(built_with, monkeypatch):
  built_with(device=_device(cc="9.0"))
  assert jax_sm100.backend() == "sm90"
  monkeypatch.setenv("JAX_SM100_FORCE_REFERENCE", "1")
  assert jax_sm100.backend() == "reference"
  monkeypatch.setenv("JAX_SM100_FORCE_REFERENCE", "0")
  assert jax_sm100.backend() == "sm90"


def test_no_kernels_means_reference(monkeypatch):
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: False)
  monkeypatch.setattr(_ffi_registry, "_warned_no_kernels", False)
  monkeypatch.setattr(_backend, "_default_device", lambda: _device(cc="9.0"))
  # a supported GPU with a build that has no kernels: a loud warning, once
  with pytest.warns(RuntimeWarning, match="WITHOUT CUDA KERNELS.*pip install"):
    assert jax_sm100.backend() == "reference"
  assert jax_sm100.backend() == "reference"


@pytest.mark.parametrize("value,want", [("", False), ("0", False), ("1", True),
                                        ("true", True), ("off", False)])
def test_force_reference_values(monkeypatch, value, want):
  monkeypatch.setenv(_backend.FORCE_REFERENCE_ENV, value)
  assert _backend.force_reference() is want


def test_force_reference_rejects_other_values(monkeypatch):
  monkeypatch.setenv(_backend.FORCE_REFERENCE_ENV, "please")
  with pytest.raises(ValueError, match=r"JAX_SM100_FORCE_REFERENCE='please': expected 1"):
    jax_sm100.backend()


# ---------------------------------------------------------------------------
# The CUDA driver must support the CUDA major version the kernels were built with
# ---------------------------------------------------------------------------

def _too_old(driver, runtime, floor):
  """The sentence why_reference() gives (the wording users see, spelled out here)."""
  d, r = f"{driver // 1000}.{driver % 1000 // 10}", f"{runtime // 1000}.{runtime % 1000 // 10}"
  major = runtime // 1000
  return (f"the CUDA driver supports CUDA {d} but the kernels need CUDA {major}.0 or newer "
          f"(built with CUDA {r}; driver >= {floor} for CUDA {major}); taking the reference "
          "path")


@pytest.mark.parametrize("cc,sm100,driver,runtime,want", [
    ("9.0", (), 12080, 13000, "reference"),    # jax[cuda12] on a CUDA 12.8 driver
    ("9.0", (), 12090, 13020, "reference"),
    ("9.0", (), 11080, 12080, "reference"),    # a CUDA 12 build on a CUDA 11 driver
    ("10.0", ("jax_sm100_gemm",), 12080, 13000, "reference"),
    ("9.0", (), 13000, 13000, "sm90"),
    ("9.0", (), 13000, 13020, "sm90"),         # minor version compatibility: 13.2 on 13.0
    ("9.0", (), 13020, 13000, "sm90"),
    ("9.0", (), 12000, 12080, "sm90"),         # a CUDA 12 build on a CUDA 12.0 driver
    ("10.0", ("jax_sm100_gemm",), 13000, 13000, "sm100"),
    ("9.0", (), None, 13000, "sm90"),          # an older build cannot say: not checked
    ("9.0", (), 12080, None, "sm90"),
    ("9.0", (), 0, 13000, "sm90"),             # no driver answered: not checked
])
def test_driver_too_old_takes_the_reference_path(built_with, cc, sm100, driver, runtime, want):
  built_with(sm100=sm100, device=_device(cc=cc), driver=driver, runtime=runtime)
  if want == "reference":
    msg = _too_old(driver, runtime, {12: 525, 13: 580}[runtime // 1000])
    with pytest.warns(RuntimeWarning, match=re.escape(msg) + r"\. Update the NVIDIA driver"):
      assert jax_sm100.backend() == "reference"
    assert _backend.why_reference() == msg
    assert _backend.context() == _backend.Context("reference", frozenset(), _backend.context().tuning)
  else:
    assert jax_sm100.backend() == want
    assert _backend.driver_too_old() is None


def test_old_driver_warns_once_and_other_reasons_come_first(built_with, recwarn):
  built_with(device=_device(cc="9.0"), driver=12080, runtime=13000)
  assert jax_sm100.backend() == "reference"
  assert jax_sm100.backend() == "reference"
  assert len([w for w in recwarn if "driver supports CUDA 12.8" in str(w.message)]) == 1
  # No kernels for the GPU at all: that is the reason, whatever the driver.
  built_with(device=_device(cc="8.0"), driver=12080, runtime=13000)
  assert _backend.why_reference().startswith("no kernels for compute capability 8.0")
  # The switches still win.
  built_with(device=_device(cc="9.0"), driver=12080, runtime=13000)
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv(_backend.FORCE_REFERENCE_ENV, "1")
    assert _backend.why_reference() == "JAX_SM100_FORCE_REFERENCE is set"


def test_old_driver_ops_never_launch(built_with, monkeypatch, rng):
  # Every target registered, a Hopper GPU, a CUDA 12.8 driver and CUDA 13 kernels: the ops
  # compute on the reference path and no FFI call is ever traced.
  built_with(device=_device(cc="9.0"), driver=12080, runtime=13000)
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  monkeypatch.delenv(_ffi_registry.DISABLE_TARGETS_ENV, raising=False)

  def no_launch(*a, **k):
    raise AssertionError("an FFI call was traced with a driver too old for the kernels")
  monkeypatch.setattr(jax.ffi, "ffi_call", no_launch)
  jax.clear_caches()
  a = rng.standard_normal((40, 72)).astype(np.float32)
  b = rng.standard_normal((72, 24)).astype(np.float32)
  with pytest.warns(RuntimeWarning, match="driver supports CUDA 12.8"):
    got = jax_sm100.matmul(jnp.asarray(a, jnp.bfloat16), jnp.asarray(b, jnp.bfloat16),
                           out_dtype=jnp.float32)
  a64 = np.asarray(jnp.asarray(a, jnp.bfloat16).astype(jnp.float32), np.float64)
  b64 = np.asarray(jnp.asarray(b, jnp.bfloat16).astype(jnp.float32), np.float64)
  want = a64 @ b64
  tol = 2 * 72 * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) + 2.0**-24 * np.abs(want)
  assert np.all(np.abs(np.asarray(got, np.float64) - want) <= tol)
  y = jax_sm100.fp8_dot(jnp.asarray(a, jnp.bfloat16), jnp.asarray(b, jnp.bfloat16))
  assert y.shape == (40, 24)
  msg = _too_old(12080, 13000, 580)
  decisions = jax_sm100.tuning.explain(jax_sm100.fp8_dot, jax.ShapeDtypeStruct((40, 72), jnp.bfloat16),
                                       jax.ShapeDtypeStruct((72, 24), jnp.bfloat16))
  assert decisions and all(d.path == "reference" and d.why == f"backend() is 'reference': {msg}"
                           for d in decisions), decisions
  jax.clear_caches()


def test_driver_and_runtime_versions_come_from_the_extension(monkeypatch):
  fake = types.SimpleNamespace(driver_version=lambda: 12080, runtime_version=lambda: 13000)
  monkeypatch.setattr(_ffi_registry, "_ffi", fake)
  assert (_backend.cuda_driver_version(), _backend.cuda_runtime_version()) == (12080, 13000)
  assert _backend.driver_too_old() == _too_old(12080, 13000, 580)
  fake.driver_version = lambda: 13010
  assert _backend.driver_too_old() is None
  # An older build without these functions, a failing query, no extension: not checked.
  monkeypatch.setattr(_ffi_registry, "_ffi", types.SimpleNamespace())
  assert _backend.cuda_driver_version() is None and _backend.driver_too_old() is None

  def broken():
    raise OSError("no libcuda")
  monkeypatch.setattr(_ffi_registry, "_ffi", types.SimpleNamespace(driver_version=broken,
                                                                   runtime_version=lambda: 13000))
  assert _backend.cuda_driver_version() is None and _backend.driver_too_old() is None
  monkeypatch.setattr(_ffi_registry, "_ffi", None)
  assert _backend.cuda_runtime_version() is None and _backend.driver_too_old() is None


def test_this_build_reports_consistent_cuda_versions():
  driver, runtime = _backend.cuda_driver_version(), _backend.cuda_runtime_version()
  if runtime is None:
    pytest.skip("this build of the extension does not report its CUDA runtime version")
  assert isinstance(runtime, int) and isinstance(driver, int) and driver >= 0
  if _ffi_registry.has_cuda():
    assert runtime >= 12000, runtime
  else:
    assert runtime == 0, runtime


# ---------------------------------------------------------------------------
# JAX_SM100_DISABLE_TARGETS: names checked against the extension's own list
# ---------------------------------------------------------------------------

def test_target_names_come_from_the_extension():
  assert _ffi_registry.target_names() == tuple(jax_sm100._ffi.target_names())
  assert "jax_sm100_gemm" in _ffi_registry.target_names()
  assert not hasattr(_ffi_registry, "KNOWN_TARGETS")


def test_disable_targets_is_validated_on_the_reference_path_too(monkeypatch):
  # No fake GPU here: backend() is 'reference' on CPU, and a typo still fails.
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", "jax_sm100_gemm, jax_sm100_gem")
  with pytest.raises(ValueError, match=r"unknown target\(s\) \['jax_sm100_gem'\]; known: "
                                       r"jax_sm100_gemm, jax_sm100_gemm_residual"):
    _backend.context()
  with pytest.raises(ValueError, match="unknown target"):
    jax_sm100.matmul(jnp.ones((2, 2)), jnp.ones((2, 2)))
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", "jax_sm100_gemm,jax_sm100_fp8_gemm")
  assert _ffi_registry.disabled_targets() == {"jax_sm100_gemm", "jax_sm100_fp8_gemm"}
  assert _backend.context().backend == "reference"


def test_disable_targets_without_the_extension_warns_it_is_ignored(monkeypatch):
  monkeypatch.setattr(_ffi_registry, "_ffi", None)
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", "anything")
  with pytest.warns(RuntimeWarning, match="JAX_SM100_DISABLE_TARGETS='anything' is ignored"):
    assert _ffi_registry.disabled_targets() == frozenset()


def test_this_machine():
  # On a machine without a CUDA GPU of cc 9.0 the ops take the reference path.
  dev = jax.devices()[0]
  if dev.platform != "gpu":
    assert jax_sm100.backend() == "reference"
  assert jax_sm100.backend() in ("sm90", "sm100", "reference")


def test_registration_registers_every_capsule_for_cuda(monkeypatch):
  seen = []
  fake = types.SimpleNamespace(has_cuda=lambda: True,
                               registrations=lambda: {"jax_sm100_gemm": "capsule-1",
                                                      "jax_sm100_other": "capsule-2"})
  monkeypatch.setattr(_ffi_registry, "_ffi", fake)
  monkeypatch.setattr(jax.ffi, "register_ffi_target",
                      lambda name, cap, platform: seen.append((name, cap, platform)))
  assert _ffi_registry._register_all() == {"jax_sm100_gemm", "jax_sm100_other"}
  assert sorted(seen) == [("jax_sm100_gemm", "capsule-1", "CUDA"),
                          ("jax_sm100_other", "capsule-2", "CUDA")]


def test_import_without_compiled_module_warns_and_uses_reference(tmp_path):
  # Block `jax_sm100._ffi` and import the package in a fresh interpreter.
  code = """
import importlib.abc, sys, warnings
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "jax_sm100._ffi":
            raise ImportError("blocked by test")
sys.meta_path.insert(0, Block())
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import jax_sm100, jax.numpy as jnp
    msgs = [str(x.message) for x in w]
assert any("could not be loaded" in m and "blocked by test" in m for m in msgs), msgs
assert jax_sm100.backend() == "reference"
assert jax_sm100.matmul(jnp.ones((2, 3)), jnp.ones((3, 4))).shape == (2, 4)
print("ok")
"""
  env = dict(os.environ)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_checkout_shadowing_the_install_is_named(tmp_path):
  # Python started in a source checkout (its jax_sm100/ has no compiled module) while
  # the package is installed: the warning names both and says what to do.
  import shutil
  checkout = tmp_path / "repo"
  shutil.copytree(os.path.dirname(jax_sm100.__file__), checkout / "jax_sm100",
                  ignore=shutil.ignore_patterns("_ffi.*", "__pycache__"))
  (checkout / "pyproject.toml").write_text("[project]\nname = 'jax_sm100'\n")
  code = """
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import jax_sm100
print("\\n".join(str(x.message) for x in w))
print("backend", jax_sm100.backend())
"""
  env = dict(os.environ)
  site = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert str(checkout / "jax_sm100") in out.stdout and "shadows the installed package" in out.stdout
  assert "Run from another directory" in out.stdout and "backend reference" in out.stdout


def test_no_kernels_message_says_how_to_rebuild():
  msg = _ffi_registry.no_kernels_message("NVIDIA H200")
  assert "WITHOUT CUDA KERNELS" in msg and "NVIDIA H200" in msg
  assert "pip install --no-build-isolation --force-reinstall" in msg


def test_retired_environment_variables_warn(tmp_path):
  env = dict(os.environ, JAX_SM100_FP8_FUSED_SCALES="0")
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, "-W", "always", "-c", "import jax_sm100"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "JAX_SM100_FP8_FUSED_SCALES no longer select" in out.stderr
  assert "tuning.override" in out.stderr


def test_flax_submodule_is_lazy_attribute():
  import importlib
  assert jax_sm100.flax is importlib.import_module("jax_sm100.flax")
  assert {"Dense", "Fp8Dense", "Linear", "Fp8Linear"} <= set(dir(jax_sm100.flax))
