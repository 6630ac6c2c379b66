"""Loads the compiled extension and registers its FFI handlers with XLA.

Importing this module never fails: if the compiled module `jax_sm100._ffi`
cannot be loaded (for example when running from a source checkout without a
build), a warning says why and every op takes the reference path.
"""
from __future__ import annotations

import importlib
import os
import warnings

import jax

# Every FFI target name the Python layer knows how to call.
GEMM = "jax_sm100_gemm"
GEMM_RESIDUAL = "jax_sm100_gemm_residual"
FP8_GEMM = "jax_sm100_fp8_gemm"
FP8_GEMM_RESIDUAL = "jax_sm100_fp8_gemm_residual"
QUANTIZE_FP8 = "jax_sm100_quantize_fp8"
QUANTIZE_FP8_DUAL = "jax_sm100_quantize_fp8_dual"
KNOWN_TARGETS = (GEMM, GEMM_RESIDUAL, FP8_GEMM, FP8_GEMM_RESIDUAL, QUANTIZE_FP8,
                 QUANTIZE_FP8_DUAL)

# JAX_SM100_DISABLE_TARGETS=name[,name...]: the ops do not launch these targets
# and take the path they would take without them (the reference path for a GEMM, the
# two single quantizations for the dual one): an escape hatch for users, and how the
# tests compare a kernel against the path without it.
DISABLE_TARGETS_ENV = "JAX_SM100_DISABLE_TARGETS"


def disabled_targets() -> frozenset:
  """The targets named in JAX_SM100_DISABLE_TARGETS (ValueError for unknown names)."""
  names = {t.strip() for t in os.environ.get(DISABLE_TARGETS_ENV, "").split(",") if t.strip()}
  unknown = names - set(KNOWN_TARGETS)
  if unknown:
    raise ValueError(f"{DISABLE_TARGETS_ENV}: unknown target(s) {sorted(unknown)}; "
                     f"known: {', '.join(KNOWN_TARGETS)}")
  return frozenset(names)

try:
  _ffi = importlib.import_module("jax_sm100._ffi")
  load_error: str | None = None
except ImportError as e:  # source checkout without a build, or ABI mismatch
  _ffi = None
  load_error = f"{type(e).__name__}: {e}"
  warnings.warn(
      "jax_sm100: the compiled extension jax_sm100._ffi could not be loaded "
      f"({load_error}); every op uses the pure-JAX reference path.",
      RuntimeWarning, stacklevel=2)


def has_cuda() -> bool:
  """True when the extension loaded and was built with CUDA kernels."""
  return _ffi is not None and bool(_ffi.has_cuda())


def cuda_archs() -> tuple[str, ...]:
  """GPU architectures with machine code in the build, e.g. ('sm_90a',)."""
  return tuple(_ffi.cuda_archs()) if has_cuda() else ()


def sm100_targets() -> frozenset[str]:
  """Targets whose handlers have an sm_100a kernel.

  Convention with the C++ side: the extension may export `sm100_targets()`
  listing them; until it does, no target runs on sm100.
  """
  fn = getattr(_ffi, "sm100_targets", None)
  return frozenset(fn()) if (has_cuda() and fn is not None) else frozenset()


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


# Names registered with XLA for platform CUDA. Tests replace this set to
# exercise the kernel dispatch without a GPU.
_registered: frozenset[str] = _register_all()


def registered_targets() -> frozenset[str]:
  """FFI target names registered for platform CUDA by this import."""
  return _registered
