"""Loads the compiled extension and registers its FFI handlers with XLA.

Importing this module never fails: if the compiled module `jax_sm100._ffi`
cannot be loaded (for example when running from a source checkout without a
build), a warning says why and every op takes the reference path.
"""
from __future__ import annotations

import importlib
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

# Targets that are built and registered but whose kernels have not yet passed
# their GPU tests on a device: the ops do not launch them (they take the path
# that existed before) unless JAX_SM100_ENABLE_UNVERIFIED=1. Their GPU tests
# call them directly. A target leaves this set in the commit that records its
# device test run.
UNVERIFIED_TARGETS = frozenset({QUANTIZE_FP8_DUAL})
ENABLE_UNVERIFIED_ENV = "JAX_SM100_ENABLE_UNVERIFIED"

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
