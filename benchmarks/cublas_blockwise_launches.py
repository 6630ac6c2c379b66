"""Three calls of cuBLASLt's blockwise FP8 GEMM through torch (scaled_mm with
BlockWise1x128 x BlockWise128x128) on one shape, for the ncu scripts
(benchmarks/device_ncu_cublas.sh and WHO=cublas benchmarks/device_ncu_source.sh profile one of
them). Usage: python3 cublas_blockwise_launches.py M N K (multiples of 128)."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.functional import ScalingType

m, n, k = (int(v) for v in sys.argv[1:4])
a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
sa = torch.rand(k // 128, m, device="cuda").t()  # (M, K/128), strides (1, M)
sb = torch.rand(n // 128, k // 128, device="cuda").t()  # (K/128, N/128), a view of (N/128, K/128)
for _ in range(3):
  F.scaled_mm(a, b.t(), sa, ScalingType.BlockWise1x128, sb, ScalingType.BlockWise128x128,
              output_dtype=torch.bfloat16)
torch.cuda.synchronize()
