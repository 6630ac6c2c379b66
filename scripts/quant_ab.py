"""GPU-time bandwidth of the quantize kernels on one large bf16 input, for A/B runs of
two builds (scripts/device_ab.sh style): python scripts/quant_ab.py [R C]. Prints one
line per kernel: GB/s (bytes read + written) by CUPTI kernel durations, median of 3."""
import statistics
import sys

import jax
import jax.numpy as jnp

from jax_sm100._fp8 import _quantize_dual_launch, _quantize_launch
from jax_sm100.bench_fp8 import gpu_time_jax, _torch

r, c = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (16384, 7168)
torch, why = _torch()
assert torch is not None, why
xs = [(jax.random.normal(k, (r, c), jnp.bfloat16),) for k in jax.random.split(jax.random.PRNGKey(0), 8)]
cases = {
    "1x128": (lambda x: _quantize_launch(x, 1), 3 * r * c + 4 * r * (c // 128)),
    "128x128": (lambda x: _quantize_launch(x, 128), 3 * r * c),
    "dual_1": (lambda x: _quantize_dual_launch(x, 1), 4 * r * c + 4 * (r * c // 128) * 2),
    "dual_1_gemm_scales": (lambda x: _quantize_dual_launch(x, 1, True, True), 4 * r * c + 8 * (r * c // 128)),
    "dual_128": (lambda x: _quantize_dual_launch(x, 128), 4 * r * c + 4 * r * c // 128),
    "dual_w": (lambda x: _quantize_dual_launch(x, 128, block_rows=128), 4 * r * c),
}
for name, (fn, nbytes) in cases.items():
  gbs = [nbytes / gpu_time_jax(torch, fn, xs) / 1e9 for _ in range(3)]
  print(f"quant_ab {name:>20}: {statistics.median(gbs):7.0f} GB/s  ({' '.join(f'{g:.0f}' for g in gbs)})",
        flush=True)
