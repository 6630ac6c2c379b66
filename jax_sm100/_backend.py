"""Which path the ops take: a compiled kernel ('sm90', 'sm100') or 'reference'."""
from __future__ import annotations

import os
from typing import NamedTuple

import jax

from jax_sm100 import _ffi_registry

# Set to 1 (or any value other than "" and "0") to force the reference path.
FORCE_REFERENCE_ENV = "JAX_SM100_FORCE_REFERENCE"


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


def _device_backend() -> str:
  """Backend from the default device and the compiled archs (no env check)."""
  if not _ffi_registry.has_cuda():
    return "reference"
  cc = _compute_capability(_default_device())
  archs = _ffi_registry.cuda_archs()
  if cc == (9, 0) and "sm_90a" in archs:
    return "sm90"
  if cc == (10, 0) and "sm_100a" in archs and _ffi_registry.sm100_targets():
    return "sm100"
  return "reference"


def backend() -> str:
  """The path the ops take on the default device: 'sm90', 'sm100' or 'reference'.

  'reference' when the environment variable JAX_SM100_FORCE_REFERENCE=1, when
  the package was built without CUDA kernels, or when the default device is not
  a GPU whose architecture has kernels in this build ('sm90': compute
  capability 9.0 with sm_90a code; 'sm100': 10.0 with sm_100a code and at least
  one sm100 kernel). Each op additionally needs its FFI target registered and
  a supported dtype/shape, else it uses the reference for that call.

  The ops read this when they are traced: a function already traced by jax.jit
  keeps the path it was traced with.
  """
  if os.environ.get(FORCE_REFERENCE_ENV, "") not in ("", "0"):
    return "reference"
  return _device_backend()


class Context(NamedTuple):
  """Dispatch decision inputs, fixed at trace time and passed as static data.

  backend: backend() at the op call; targets: FFI targets usable on it.
  """
  backend: str
  targets: frozenset

  def can_call(self, target: str) -> bool:
    """True when `target` may be launched on this backend."""
    return self.backend != "reference" and target in self.targets


def context() -> Context:
  """Snapshot of backend() and the usable FFI targets, taken at trace time."""
  name = backend()
  if name == "reference":
    return Context("reference", frozenset())
  targets = _ffi_registry.registered_targets()
  targets = targets - _ffi_registry.disabled_targets()
  if name == "sm100":
    targets = targets & _ffi_registry.sm100_targets()
  return Context(name, frozenset(targets))
