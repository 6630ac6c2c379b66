"""What one jitted FP8 GEMM call puts on the GPU: the optimized HLO's instructions (is
there anything besides the custom call, e.g. a copy of d?) and, through CUPTI, every
kernel / memcpy / memset with its summed duration. Usage (device):
  python3 benchmarks/fp8_kernel_probe.py M N K [CONFIG]   (CONFIG as fp8_gemm_launches.py's)
"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (_torch, cupti_gpu_events, fp8_transposed, parse_fp8_config,  # noqa: E402
                    quantized_sets)

import jax  # noqa: E402

from jax_sm100 import tuning  # noqa: E402


def main():
  m, n, k = (int(v) for v in sys.argv[1:4])
  cfg = parse_fp8_config(sys.argv[4] if len(sys.argv) > 4 else "")
  torch, why = _torch()
  op, tsets = fp8_transposed(quantized_sets(m, n, k, 2))
  with tuning.override(fp8=cfg):
    many = jax.jit(lambda ss: [op(*s) for s in ss])
    hlo = many.lower(tsets).compile().as_text()
  ops = collections.Counter(re.findall(r"= \S+ (\w[\w-]*)\(", hlo))
  print("optimized HLO ops:", dict(ops), flush=True)
  for line in hlo.splitlines():
    if "custom-call" in line or " copy(" in line or "copy-start" in line:
      print("  ", line.strip()[:220])
  if torch is None:
    print("no torch:", why)
    return
  total = collections.defaultdict(lambda: [0, 0.0])
  for e in cupti_gpu_events(torch, lambda: jax.block_until_ready(many(tsets)), 3):
    t = total[(e["cat"], e["name"][:90])]
    t[0] += 1
    t[1] += float(e["dur"])
  for (cat, name), (cnt, us) in sorted(total.items(), key=lambda kv: -kv[1][1]):
    print(f"  {cat:10s} x{cnt:3d} {us / cnt:9.1f} us  {name}")


if __name__ == "__main__":
  main()
