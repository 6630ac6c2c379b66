"""Three launches of the FP8 GEMM on one shape, for the ncu scripts (device_ncu_*.sh,
device_sanitize_fp8.sh profile or check them). Usage:

  python3 fp8_gemm_launches.py M N K [CONFIG]

CONFIG picks the kernel configuration (jax_sm100.tuning.override): "BLOCK_M,BLOCK_N,
CLUSTER[,n][,gGROUP_M]" (n: the pair of CTAs lies along N), e.g. "256,128,2,n"; omitted
or "default": the default choice. A's scales are passed transposed
(fp8_blockwise_matmul(..., a_scale_transposed=True)): the kernel reads them as they are.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fp8_transposed, parse_fp8_config, quantized_sets  # noqa: E402

import jax  # noqa: E402

from jax_sm100 import tuning  # noqa: E402

m, n, k = (int(v) for v in sys.argv[1:4])
cfg = parse_fp8_config(sys.argv[4] if len(sys.argv) > 4 else "")
op, (args,) = fp8_transposed(quantized_sets(m, n, k, 1))
with tuning.override(fp8=cfg):
  f = jax.jit(op)
  print(f"{m}x{n}x{k}: {cfg or tuning.fp8_config(m, n, k)}", flush=True)
  for _ in range(3):
    f(*args).block_until_ready()
