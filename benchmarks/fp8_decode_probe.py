"""Decode-shape probe for the FP8 GEMM kernel: GPU time (CUPTI) at small M, against the
same product with A (and its scales) zero-padded to 128 rows, so the kernel's A loads
have no out-of-bounds rows and both math warpgroups hold rows. Both through
fp8_blockwise_matmul with transposed A scales (the kernel reads them as they are).
Usage (device, package installed): python3 benchmarks/fp8_decode_probe.py [N K [M ...]] > log"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _torch, fp8_transposed, gpu_time_jax, quantized_sets  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

n, k = (int(v) for v in sys.argv[1:3]) if len(sys.argv) > 2 else (4096, 7168)
ms = [int(v) for v in sys.argv[3:]] or [16, 64, 128]
torch, why = _torch()
assert torch is not None, why
print(f"device {jax.devices()[0].device_kind}  N={n} K={k}", flush=True)
for m in ms:
  op, plain = fp8_transposed(quantized_sets(m, n, k, 32))
  # A padded to 128 rows: zero rows, scale 1 (transposed scales: pad columns)
  padded = [(jnp.pad(a, ((0, 128 - m), (0, 0))), jnp.pad(st, ((0, 0), (0, 128 - m)),
                                                        constant_values=1.0), b, sb)
            for (a, st, b, sb) in plain]
  d0 = np.asarray(jax.jit(op)(*plain[0]), np.float32)
  d1 = np.asarray(jax.jit(op)(*padded[0]), np.float32)[:m]
  assert np.array_equal(d0, d1), "padded result differs"
  for rnd in range(3):
    t_m = gpu_time_jax(torch, op, plain)
    t_p = gpu_time_jax(torch, op, padded)
    print(f"M={m:4d}: as is {t_m * 1e6:7.2f} us, A padded to 128 rows {t_p * 1e6:7.2f} us "
          f"(round {rnd})", flush=True)
