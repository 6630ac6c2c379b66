"""jax_sm100: warp-specialized GPU matmul kernels for JAX (skeleton)."""
from jax_sm100 import _ffi  # noqa: F401
