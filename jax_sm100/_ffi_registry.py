"""Loads the compiled extension and registers its FFI handlers with XLA.

The extension (libjax_sm100_ffi.so, a C-ABI library loaded by jax_sm100/_ffi.py with
ctypes) is the one list of FFI targets (ffi/src/targets.h, exported as
`_ffi.target_names()`, `_ffi.registrations()`, `_ffi.cpu_registrations()`,
`_ffi.sm100_targets()`); this module keeps no copy of it. The CUDA handlers are
registered for platform CUDA (builds with CUDA), the CPU handlers, which every
build has, for platform cpu (used when JAX_SM100_BACKEND=cpu_ffi). Importing never fails: when the compiled module
cannot be loaded, a warning names the cause and the fix, and every op takes the
reference path.
"""
from __future__ import annotations

import glob
import importlib
import os
import sys
import warnings

import jax

# JAX_SM100_DISABLE_TARGETS=name[,name...]: the ops do not launch these targets
# and take the path they would take without them (the reference path for a GEMM,
# the two single quantizations for the dual one): an escape hatch for users, and
# how the tests compare a kernel against the path without it. Read at trace time.
DISABLE_TARGETS_ENV = "JAX_SM100_DISABLE_TARGETS"

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# Hopper boards (compute capability 9.0) by the model names the NVIDIA driver reports.
_SM90_MODELS = ("H100", "H200", "H800", "H20", "GH200")


# The compiled library that jax_sm100/_ffi.py loads (its LIBRARY_NAME; named here too
# because this module must work when _ffi does not import).
_LIBRARY_NAMES = ("libjax_sm100_ffi.so", "jax_sm100_ffi.dll")


def _has_compiled_module(pkg_dir: str) -> bool:
  """True when pkg_dir holds a build: the compiled library and its loader _ffi.py (a
  source checkout has the loader only)."""
  return (os.path.isfile(os.path.join(pkg_dir, "_ffi.py"))
          and any(os.path.isfile(os.path.join(pkg_dir, n)) for n in _LIBRARY_NAMES))


def _installed_elsewhere() -> list[str]:
  """Other jax_sm100 package directories on sys.path that hold a compiled module."""
  found = []
  for entry in sys.path:
    d = os.path.join(os.path.abspath(entry or os.getcwd()), "jax_sm100")
    if (os.path.isdir(d) and os.path.realpath(d) != os.path.realpath(_PKG_DIR)
        and _has_compiled_module(d) and d not in found):
      found.append(d)
  return found


def _load_failure_message(exc: BaseException) -> str:
  """Why jax_sm100._ffi did not load, and what to do about it."""
  head = "jax_sm100: the compiled extension jax_sm100._ffi could not be loaded"
  tail = " Every op uses the pure-JAX reference path."
  if _has_compiled_module(_PKG_DIR):
    return (f"{head} ({type(exc).__name__}: {exc}). Reinstall the package, or rebuild "
            "it with `pip install --no-build-isolation --force-reinstall --no-deps .` "
            "from the source checkout." + tail)
  checkout = os.path.dirname(_PKG_DIR)
  others = _installed_elsewhere()
  if others:
    return (f"{head}: the source checkout's {_PKG_DIR} (no compiled module) shadows "
            f"the installed package in {others[0]}; Python finds the checkout first "
            "when it runs from the repository root. Run from another directory, or "
            f"`pip install {checkout}` to build the checkout itself "
            f"({type(exc).__name__}: {exc})." + tail)
  if os.path.exists(os.path.join(checkout, "pyproject.toml")):
    return (f"{head}: {_PKG_DIR} is a source checkout without a build. Install it "
            f"with `pip install {checkout}` and run from another directory "
            f"({type(exc).__name__}: {exc})." + tail)
  return (f"{head}: the compiled module is missing from {_PKG_DIR}; reinstall the "
          f"package ({type(exc).__name__}: {exc})." + tail)


try:
  _ffi = importlib.import_module("jax_sm100._ffi")
  load_error: str | None = None
except ImportError as e:
  # No build (a source checkout), a library that does not load, or a C ABI mismatch.
  _ffi = None
  load_error = f"{type(e).__name__}: {e}"
  warnings.warn(_load_failure_message(e), RuntimeWarning, stacklevel=2)


def has_cuda() -> bool:
  """True when the extension loaded and was built with CUDA kernels."""
  return _ffi is not None and bool(_ffi.has_cuda())


def cuda_archs() -> tuple[str, ...]:
  """GPU architectures with machine code in the build, e.g. ('sm_90a',)."""
  return tuple(_ffi.cuda_archs()) if has_cuda() else ()


def target_names() -> tuple[str, ...]:
  """Every FFI target the extension defines (also in a build without CUDA); () when
  the extension did not load."""
  return tuple(_ffi.target_names()) if _ffi is not None else ()


def sm100_targets() -> frozenset[str]:
  """Targets whose handlers have an sm_100a kernel in this build."""
  return frozenset(_ffi.sm100_targets()) if has_cuda() else frozenset()


def disabled_targets() -> frozenset[str]:
  """The targets named in JAX_SM100_DISABLE_TARGETS.

  ValueError for a name the extension does not define (checked on every
  platform). When the extension did not load, the names cannot be checked: a
  warning says the variable is ignored (every op takes the reference path then).
  """
  raw = os.environ.get(DISABLE_TARGETS_ENV, "")
  names = {t.strip() for t in raw.split(",") if t.strip()}
  if not names:
    return frozenset()
  if _ffi is None:
    warnings.warn(f"jax_sm100: {DISABLE_TARGETS_ENV}={raw!r} is ignored: the compiled "
                  "extension did not load, so its target names cannot be checked "
                  "(every op takes the reference path).", RuntimeWarning, stacklevel=3)
    return frozenset()
  known = target_names()
  unknown = names - set(known)
  if unknown:
    raise ValueError(f"{DISABLE_TARGETS_ENV}: unknown target(s) {sorted(unknown)}; "
                     f"known: {', '.join(known)}")
  return frozenset(names)


def _gpu_models() -> list[str]:
  """NVIDIA GPU model names from the driver's /proc entries (Linux), read without
  initialising CUDA or JAX's backends; [] when there are none."""
  models = []
  for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
    try:
      with open(info) as f:
        for line in f:
          if line.startswith("Model:"):
            models.append(line.split(":", 1)[1].strip())
    except OSError:
      pass
  return models


def no_kernels_message(gpu: str) -> str:
  """The warning for a build without CUDA kernels on a machine with a supported GPU."""
  return ("jax_sm100 WAS BUILT WITHOUT CUDA KERNELS (nvcc was not found at build time, "
          f"or JAX_SM100_ENABLE_CUDA=OFF), but this machine has a supported GPU ({gpu}, "
          "compute capability 9.0): every op takes the slow pure-JAX reference path. "
          "Rebuild with the CUDA toolkit's nvcc on PATH, from the source checkout: "
          "`JAX_SM100_CUDA_ARCHS=90a pip install --no-build-isolation --force-reinstall "
          "--no-deps .`")


_warned_no_kernels = False


def warn_no_kernels(gpu: str) -> None:
  """Warns once per process that this build has no kernels for the GPU present."""
  global _warned_no_kernels
  if not _warned_no_kernels:
    _warned_no_kernels = True
    warnings.warn(no_kernels_message(gpu), RuntimeWarning, stacklevel=3)


if _ffi is not None and not has_cuda():
  _hopper = [m for m in _gpu_models() if any(s in m for s in _SM90_MODELS)]
  if _hopper:
    warn_no_kernels(_hopper[0])


def _register_all() -> frozenset[str]:
  if not has_cuda():
    return frozenset()
  done = set()
  for name, capsule in dict(_ffi.registrations()).items():
    try:
      jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
      done.add(name)
    except Exception as e:  # keep the package importable; say what failed
      warnings.warn(f"jax_sm100: could not register FFI target {name!r}: {e}",
                    RuntimeWarning, stacklevel=2)
  return frozenset(done)


def _register_cpu() -> frozenset[str]:
  """Registers the CPU handlers (every build has them) for platform cpu."""
  regs = getattr(_ffi, "cpu_registrations", None) if _ffi is not None else None
  if regs is None:
    return frozenset()
  done = set()
  for name, capsule in dict(regs()).items():
    try:
      jax.ffi.register_ffi_target(name, capsule, platform="cpu")
      done.add(name)
    except Exception as e:  # keep the package importable; say what failed
      warnings.warn(f"jax_sm100: could not register the CPU handler of FFI target {name!r}: "
                    f"{e}", RuntimeWarning, stacklevel=2)
  return frozenset(done)


# Names registered with XLA for platform CUDA. Tests replace this set to
# exercise the kernel dispatch without a GPU.
_registered: frozenset[str] = _register_all()
# Names whose CPU handlers are registered with XLA for platform cpu.
_registered_cpu: frozenset[str] = _register_cpu()


def registered_targets() -> frozenset[str]:
  """FFI target names registered for platform CUDA by this import."""
  return _registered


def registered_cpu_targets() -> frozenset[str]:
  """FFI target names whose CPU handlers are registered for platform cpu (the
  targets of backend() 'cpu_ffi')."""
  return _registered_cpu
