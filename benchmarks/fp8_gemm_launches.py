"""Three launches of the FP8 GEMM FFI target on one shape, for the ncu scripts
(scripts/device_ncu_*.sh profile one of them). Usage: python3 fp8_gemm_launches.py M N K.
The kernel variant is whatever the JAX_SM100_FP8_* environment selects."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100._fp8 import _quantize
from jax_sm100._gemm import fp8_kernel_a_scale

m, n, k = (int(v) for v in sys.argv[1:4])
e4m3 = np.dtype(jnp.float8_e4m3fn)
a, sa = _quantize(jax.random.normal(jax.random.key(0), (m, k), jnp.bfloat16), (1, 128), e4m3)
b, sb = _quantize(jax.random.normal(jax.random.key(1), (n, k), jnp.bfloat16), (128, 128), e4m3)
sa_t = fp8_kernel_a_scale(sa)  # the kernel's (ceil(K/128), round_up(M, 4)) layout
f = jax.jit(lambda *x: jax.ffi.ffi_call("jax_sm100_fp8_gemm",
                                        jax.ShapeDtypeStruct((m, n), jnp.bfloat16))(*x))
for _ in range(3):
  f(a, sa_t, b, sb).block_until_ready()
