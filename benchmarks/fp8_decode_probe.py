"""Decode-shape probe for the FP8 GEMM kernel: GPU time (CUPTI) of the FFI target at
small M, against the same call with A (and its scales) zero-padded to 128 rows, so the
kernel's A loads have no out-of-bounds rows and both math warpgroups hold rows.
Usage (device, package installed): python3 scripts/fp8_decode_probe.py [N K [M ...]] > log"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _ffi_registry as reg
from jax_sm100.bench_fp8 import _torch, gpu_time_jax, quantized_sets
from jax_sm100._gemm import fp8_kernel_a_scale

n, k = (int(v) for v in sys.argv[1:3]) if len(sys.argv) > 2 else (4096, 7168)
ms = [int(v) for v in sys.argv[3:]] or [16, 64, 128]
torch, why = _torch()
assert torch is not None, why
print(f"device {jax.devices()[0].device_kind}  N={n} K={k}", flush=True)
for m in ms:
  sets = quantized_sets(m, n, k, 32)
  plain = [(a, fp8_kernel_a_scale(sa), b, sb) for (a, sa, b, sb) in sets]
  padded = [(jnp.pad(a, ((0, 128 - m), (0, 0))), fp8_kernel_a_scale(jnp.pad(sa, ((0, 128 - m), (0, 0)),
                                                                          constant_values=1.0)), b, sb)
            for (a, sa, b, sb) in sets]
  k_m = jax.ffi.ffi_call(reg.FP8_GEMM, jax.ShapeDtypeStruct((m, n), jnp.bfloat16))
  k_128 = jax.ffi.ffi_call(reg.FP8_GEMM, jax.ShapeDtypeStruct((128, n), jnp.bfloat16))
  d0 = np.asarray(k_m(*plain[0]), np.float32)
  d1 = np.asarray(k_128(*padded[0]), np.float32)[:m]
  assert np.array_equal(d0, d1), "padded result differs"
  for rnd in range(3):
    t_m = gpu_time_jax(torch, lambda *s: k_m(*s), plain)
    t_p = gpu_time_jax(torch, lambda *s: k_128(*s), padded)
    print(f"M={m:4d}: as is {t_m * 1e6:7.2f} us, A padded to 128 rows {t_p * 1e6:7.2f} us "
          f"(round {rnd})", flush=True)
