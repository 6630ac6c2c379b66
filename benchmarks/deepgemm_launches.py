"""Three launches of DeepGEMM's Hopper FP8 GEMM (an outside checkout, not part of this
project) on one shape, from the same random inputs as fp8_gemm_launches.py, so an ncu
script can profile it beside ours. Usage: python3 deepgemm_launches.py DIR M N K.
DeepGEMM's config follows its own heuristic (and any DG_* overrides of the checkout)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import quantized_sets, torch_and_blockwise, torch_sets  # noqa: E402

sys.path.insert(0, sys.argv[1])
import deep_gemm  # noqa: E402

m, n, k = (int(v) for v in sys.argv[2:5])
torch, _ = torch_and_blockwise()
(a, sa, bt, sb), = torch_sets(torch, quantized_sets(m, n, k, 1))
out = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
for _ in range(3):
  deep_gemm.gemm_fp8_fp8_bf16_nt((a, sa), (bt.t(), sb), out)
torch.cuda.synchronize()
