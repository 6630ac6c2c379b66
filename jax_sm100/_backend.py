"""Which path the ops take: a compiled kernel ('sm90', 'sm100'), the kernels' CPU
handlers ('cpu_ffi') or 'reference'."""
from __future__ import annotations

import os
import warnings
from typing import Any, NamedTuple

import jax

from jax_sm100 import _ffi_registry

# JAX_SM100_FORCE_REFERENCE=1 forces the reference path (0 or unset: off). Read at
# trace time.
FORCE_REFERENCE_ENV = "JAX_SM100_FORCE_REFERENCE"
# JAX_SM100_BACKEND=auto (default) | reference | cpu_ffi. Read at trace time.
#   auto:      the compiled kernels on a GPU that has them, else the reference path.
#   reference: the pure-JAX reference path everywhere.
#   cpu_ffi:   on a CPU default device, the FFI targets' CPU handlers (plain C++ with the
#              kernels' contract): the ops launch them through the same launch layer as
#              the GPU kernels (custom calls in the HLO, padding, batching rules,
#              partitioning), which the reference path bypasses. On any other device: auto.
BACKEND_ENV = "JAX_SM100_BACKEND"
BACKEND_CHOICES = ("auto", "reference", "cpu_ffi")
# Backends whose kernels this project has never run on hardware (the one list). On
# these, the first use of each kernel family in a process runs a known-answer self-test
# on the device before the op is traced into the kernel, and a family that fails takes
# the reference path for the rest of the process (jax_sm100.selftest).
UNPROVEN_BACKENDS = frozenset({"sm100"})
# Targets whose CUDA handler has no sm_90a kernel (it refuses compute capability 9.0):
# the block-scaled MXFP8 GEMM (Hopper has no block-scaled MMA).
NO_SM90_KERNEL = frozenset({"jax_sm100_mxfp8_gemm"})
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def force_reference() -> bool:
  """JAX_SM100_FORCE_REFERENCE as a bool (ValueError for a value that is neither)."""
  raw = os.environ.get(FORCE_REFERENCE_ENV, "")
  v = raw.strip().lower()
  if v in _OFF:
    return False
  if v in _ON:
    return True
  raise ValueError(f"{FORCE_REFERENCE_ENV}={raw!r}: expected 1 (force the reference path) "
                   "or 0 / unset (off).")


def backend_choice() -> str:
  """JAX_SM100_BACKEND: 'auto' (also when unset or empty), 'reference' or 'cpu_ffi';
  ValueError naming the allowed values for anything else."""
  raw = os.environ.get(BACKEND_ENV, "")
  v = raw.strip().lower()
  if not v:
    return "auto"
  if v in BACKEND_CHOICES:
    return v
  raise ValueError(f"{BACKEND_ENV}={raw!r}: expected one of {', '.join(BACKEND_CHOICES)} "
                   "(unset: auto).")


def _default_device():
  dev = getattr(jax.config, "jax_default_device", None)
  if isinstance(dev, str):  # a platform name such as "cpu"
    return jax.devices(dev)[0]
  return dev if dev is not None else jax.devices()[0]


def _compute_capability(dev) -> tuple[int, int] | None:
  """(major, minor) for a CUDA GPU, None for anything else (CPU, TPU, ROCm)."""
  if dev.platform != "gpu":
    return None
  version = str(getattr(dev.client, "platform_version", "")).lower()
  if "rocm" in version or "hip" in version:
    return None
  try:
    major, minor = str(dev.compute_capability).split(".")[:2]
    return int(major), int(minor)
  except (AttributeError, ValueError):
    return None


# The oldest NVIDIA driver branch for each CUDA major version (CUDA's minor version
# compatibility: code built with any CUDA X.y runs on a driver that supports CUDA X.0).
DRIVER_FLOOR = {11: 450, 12: 525, 13: 580}


def _extension_int(name: str) -> int | None:
  """An int the extension reports through `name()`; None where this build has no such
  function (an older build) or the call fails."""
  fn = getattr(_ffi_registry._ffi, name, None) if _ffi_registry._ffi is not None else None
  if fn is None:
    return None
  try:
    return int(fn())
  except Exception:  # a broken query must not break dispatch; the check is skipped
    return None


def cuda_driver_version() -> int | None:
  """The newest CUDA version the installed driver supports, as cudaDriverGetVersion
  reports it to the extension (e.g. 12080 for CUDA 12.8; 0: no driver); None when this
  build cannot say."""
  return _extension_int("driver_version")


def cuda_runtime_version() -> int | None:
  """The CUDA runtime the kernels were built with (e.g. 13000); 0 for a build without
  CUDA; None when this build cannot say."""
  return _extension_int("runtime_version")


def cuda_version_str(v: int) -> str:
  """12080 -> '12.8' (CUDA's encoding: 1000 * major + 10 * minor)."""
  return f"{v // 1000}.{(v % 1000) // 10}"


def driver_too_old() -> str | None:
  """None when the driver can run the kernels (or the build cannot tell), else a
  sentence saying why it cannot (why_reference's answer).

  The kernels need a driver that supports the major CUDA version they were built with
  (CUDA 13 needs driver branch 580 or newer); within one major version an older minor
  is enough (minor version compatibility: the kernels are machine code, nothing is
  JIT-compiled). A CUDA 12 driver (older than 580: enough for jax[cuda12]) cannot run
  CUDA 13 kernels: the ops take the reference path rather than fail to launch.

  Not checked when the build cannot say (an older extension), has no CUDA, or no driver
  answers (driver version 0: a machine without an NVIDIA driver has no CUDA device for
  the ops to take a kernel path on; tests fake such devices)."""
  runtime, driver = cuda_runtime_version(), cuda_driver_version()
  if not runtime or not driver:
    return None
  major = runtime // 1000
  if driver >= major * 1000:
    return None
  floor = DRIVER_FLOOR.get(major)
  need = (f"driver >= {floor} for CUDA {major}" if floor else
          f"a driver for CUDA {major}")
  return (f"the CUDA driver supports CUDA {cuda_version_str(driver)} but the kernels "
          f"need CUDA {major}.0 or newer (built with CUDA {cuda_version_str(runtime)}; "
          f"{need}); taking the reference path")


_warned_old_driver = False


def _warn_old_driver(msg: str) -> None:
  """Warns once per process that the driver is too old for the kernels."""
  global _warned_old_driver
  if not _warned_old_driver:
    _warned_old_driver = True
    warnings.warn(f"jax_sm100: {msg}. Update the NVIDIA driver to run the kernels.",
                  RuntimeWarning, stacklevel=4)


def _arch_backend(cc, archs) -> str | None:
  """'sm90' / 'sm100' when the build has kernels for compute capability `cc`, else None."""
  if cc == (9, 0) and "sm_90a" in archs:
    return "sm90"
  if cc == (10, 0) and "sm_100a" in archs and _ffi_registry.sm100_targets():
    return "sm100"
  return None


def _device_backend() -> str:
  """Backend from the default device, the compiled archs and the driver (no env check)."""
  if not _ffi_registry.has_cuda():
    if _ffi_registry._ffi is not None:
      dev = _default_device()
      if _compute_capability(dev) == (9, 0):
        _ffi_registry.warn_no_kernels(getattr(dev, "device_kind", "sm_90 GPU"))
    return "reference"
  name = _arch_backend(_compute_capability(_default_device()), _ffi_registry.cuda_archs())
  if name is None:
    return "reference"
  old = driver_too_old()
  if old is not None:
    _warn_old_driver(old)
    return "reference"
  return name


def _cpu_ffi_selected() -> bool:
  """JAX_SM100_BACKEND=cpu_ffi with a CPU default device."""
  return backend_choice() == "cpu_ffi" and _default_device().platform == "cpu"


def backend() -> str:
  """The path the ops take on the default device: 'sm90', 'sm100', 'cpu_ffi' or
  'reference'.

  'cpu_ffi' when JAX_SM100_BACKEND=cpu_ffi, the default device is a CPU and the
  extension's CPU handlers are registered. Otherwise 'reference' when
  JAX_SM100_FORCE_REFERENCE=1 or JAX_SM100_BACKEND=reference, when the package
  was built without CUDA kernels, or when the default device is not a GPU whose
  architecture has kernels in this build ('sm90': compute capability 9.0 with
  sm_90a code; 'sm100': 10.0 with sm_100a code and at least one sm100 kernel), or
  when the NVIDIA driver is too old for the CUDA version the kernels were built with
  (a warning says so once; see driver_too_old).
  JAX_SM100_FORCE_REFERENCE=1 wins over JAX_SM100_BACKEND. Each op additionally
  needs its FFI target registered and a supported dtype/shape, else it uses the
  reference for that call. On 'sm100' (UNPROVEN_BACKENDS: never run on hardware by
  this project) only the bf16/fp16 GEMMs have kernels, and each kernel family runs a
  known-answer self-test on its first use (jax_sm100.selftest); FP8 GEMMs and
  quantization take the reference path there.

  The ops read this when they are traced: a function already traced by jax.jit
  keeps the path it was traced with (jax.clear_caches() after changing them).
  """
  choice = backend_choice()  # validated even where JAX_SM100_FORCE_REFERENCE decides
  if force_reference() or choice == "reference":
    return "reference"
  if _cpu_ffi_selected():
    return "cpu_ffi" if _ffi_registry.registered_cpu_targets() else "reference"
  return _device_backend()


def why_reference() -> str:
  """A sentence saying why backend() is 'reference' (for explain())."""
  if force_reference():
    return f"{FORCE_REFERENCE_ENV} is set"
  if backend_choice() == "reference":
    return f"{BACKEND_ENV}=reference is set"
  if _cpu_ffi_selected():
    if _ffi_registry._ffi is None:
      return (f"{BACKEND_ENV}=cpu_ffi, but the compiled extension did not load "
              f"({_ffi_registry.load_error})")
    return f"{BACKEND_ENV}=cpu_ffi, but no CPU handler of the extension is registered"
  if _ffi_registry._ffi is None:
    return f"the compiled extension did not load ({_ffi_registry.load_error})"
  if not _ffi_registry.has_cuda():
    return "the extension was built without CUDA kernels"
  dev = _default_device()
  cc = _compute_capability(dev)
  if cc is None:
    return f"the default device ({dev.platform}, {dev.device_kind}) is not a CUDA GPU"
  archs = _ffi_registry.cuda_archs()
  if _arch_backend(cc, archs) is not None:
    old = driver_too_old()
    if old is not None:
      return old
  if cc == (10, 0) and "sm_100a" in archs and not _ffi_registry.sm100_targets():
    return ("this build has sm_100a code but no sm_100a kernel (compute capability 10.0); "
            "every op takes the reference path")
  why = (f"no kernels for compute capability {cc[0]}.{cc[1]} in this build "
         f"(compiled: {', '.join(archs) or 'none'})")
  if cc[0] >= 10 and cc != (10, 0):
    why += "; sm_100a code runs on compute capability 10.0 only"
  return why


class Context(NamedTuple):
  """Dispatch decision inputs, fixed at trace time and passed as static data.

  backend: backend() at the op call; targets: FFI targets usable on it;
  tuning: the jax_sm100.tuning settings in force (overrides; see tuning.current()).
  """
  backend: str
  targets: frozenset
  tuning: Any = None

  def can_call(self, target: str) -> bool:
    """True when `target` may be launched on this backend."""
    return self.backend != "reference" and target in self.targets

  def why_not(self, target: str) -> str | None:
    """None when `target` may be launched, else a sentence saying why not."""
    if self.can_call(target):
      return None
    if self.backend == "reference":
      return f"backend() is 'reference': {why_reference()}"
    if target in _ffi_registry.disabled_targets():
      return f"{target} is disabled by {_ffi_registry.DISABLE_TARGETS_ENV}"
    if self.backend == "sm90" and target in NO_SM90_KERNEL:
      return (f"{target} has no sm_90a kernel (Hopper has no block-scaled MMA): on this "
              f"GPU it takes the reference path")
    if self.backend == "sm100" and target not in _ffi_registry.sm100_targets():
      have = ", ".join(sorted(_ffi_registry.sm100_targets())) or "none"
      return (f"{target} has no sm_100a kernel: on this Blackwell GPU it takes the "
              f"reference path (targets with an sm_100a kernel: {have})")
    return f"{target} is not registered"


def context() -> Context:
  """Snapshot of backend(), the usable FFI targets and the tuning settings, taken
  at trace time. The debug switches are validated here on every platform."""
  from jax_sm100 import tuning  # tuning imports this module
  disabled = _ffi_registry.disabled_targets()
  settings = tuning.current()
  name = backend()
  if name == "reference":
    return Context("reference", frozenset(), settings)
  if name == "cpu_ffi":
    return Context(name, frozenset(_ffi_registry.registered_cpu_targets() - disabled), settings)
  targets = _ffi_registry.registered_targets() - disabled
  if name == "sm100":
    targets = targets & _ffi_registry.sm100_targets()
  if name == "sm90":
    targets = targets - NO_SM90_KERNEL
  return Context(name, frozenset(targets), settings)
