"""jax_sm100: warp-specialized Hopper/Blackwell matmul kernels for JAX.

Public ops (all jittable, vmappable, reverse-mode differentiable where noted):
  matmul, matmul_residual, quantize_fp8_blockwise, fp8_blockwise_matmul,
  fp8_dot, dot_general, fp8_dot_general, backend(); MXFP8: quantize_mxfp8 (pure
  JAX everywhere), mxfp8_matmul, mxfp8_dot, mxfp8_dot_general (their GEMMs have an
  sm_100a kernel only: Hopper has no block-scaled MMA); grouped (mixture of
  experts): ragged_dot, ragged_dot_general, fp8_ragged_dot, fp8_grouped_matmul;
  autotune() (measure shapes on this GPU and cache the fastest path).
  Fused bias/activation epilogue: matmul_bias (act(a @ b + bias)); mlp (a stack of
  such layers whose backward fuses each activation's derivative and bias gradient into
  the GEMM above it); fp8_mlp (that stack in FP8, each activation and its backward
  inside the FP8 quantizers).
Flax glue lives in `jax_sm100.flax` (imported on first access; needs flax).

Every op runs the compiled kernel when backend() is 'sm90'/'sm100', the op has a
kernel there, its FFI target is registered and the call is supported
(dtype/shape), and a pure-JAX reference otherwise. The sm_100a kernels (bf16/fp16,
FP8 blockwise and MXFP8 block-scaled GEMMs, the FP8 quantizers) were never run on
hardware here: each family runs a known-answer self-test on its first use
(`jax_sm100.selftest`). `python -m jax_sm100.info` says which path each op takes.
Kernel configurations (tile shapes, clusters) are chosen
per call by `jax_sm100.tuning`, which can override them and explain each choice.
Debug switches, read when an op is traced: JAX_SM100_FORCE_REFERENCE=1 forces
the reference; JAX_SM100_DISABLE_TARGETS=name,... keeps the named FFI targets
from being launched. If the compiled module jax_sm100._ffi fails to load,
importing still works: a RuntimeWarning says why and backend() is 'reference'.
"""
from jax_sm100 import _ffi_registry, tuning
from jax_sm100._backend import FORCE_REFERENCE_ENV, backend
from jax_sm100._bias import matmul_bias
from jax_sm100._dot_general import dot_general, fp8_dot_general
from jax_sm100._fp8 import fp8_blockwise_matmul, fp8_dot, quantize_fp8_blockwise
from jax_sm100._grouped import (fp8_grouped_matmul, fp8_ragged_dot, ragged_dot,
                               ragged_dot_general)
from jax_sm100._matmul import matmul, matmul_residual
from jax_sm100._mlp import fp8_mlp, mlp
from jax_sm100._mxfp8 import mxfp8_dot, mxfp8_dot_general, mxfp8_matmul, quantize_mxfp8
from jax_sm100.autotune import autotune  # the function (the module: sys.modules)

if _ffi_registry._ffi is not None:
  from jax_sm100 import _ffi  # noqa: F401  (the compiled module)

__version__ = "0.1.0"

__all__ = [
    "FORCE_REFERENCE_ENV", "backend", "dot_general", "fp8_blockwise_matmul",
    "fp8_dot", "fp8_dot_general", "matmul", "matmul_residual", "mxfp8_dot",
    "mxfp8_dot_general", "mxfp8_matmul", "quantize_fp8_blockwise", "quantize_mxfp8",
    "tuning",
    "matmul_bias", "mlp", "fp8_mlp",
    "fp8_grouped_matmul", "fp8_ragged_dot", "ragged_dot", "ragged_dot_general",
    "autotune",
]


def __getattr__(name):
  # `jax_sm100.flax` without an explicit import; flax is an optional dependency.
  if name == "flax":
    import importlib
    return importlib.import_module("jax_sm100.flax")
  raise AttributeError(f"module 'jax_sm100' has no attribute {name!r}")
