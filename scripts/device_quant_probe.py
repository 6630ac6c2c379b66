"""Quantization bandwidth probe (device): every kernel timed the same way, side by side.

For x (R, C) bf16: a device copy (torch copy_, CUDA events; XLA x + 1, differential jit
timing), our 1x128 and 128x128 kernels and the dual kernel, in GB/s of bytes each must
move (same timing as bench_fp8). Run it with and without XLA command buffers (XLA_FLAGS)
to see how much of the per-call time is host-side overhead between the ops. Then, with --ncu-once, runs
each once on 8192^2 and skips the timing (run it under `ncu --metrics
gpu__time_duration.sum,dram__throughput...` to time the kernels themselves, free of any
host-side timing method).
Usage: python scripts/device_quant_probe.py OUT.json | --ncu-once
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jax_sm100  # noqa: F401  (registers the FFI targets)
from jax_sm100 import _ffi_registry as reg
from jax_sm100._fp8 import _quantize_dual_launch
from jax_sm100.bench_fp8 import _cdiv, _torch, time_jax, time_torch

E4M3 = jnp.float8_e4m3fn
REPS = 7


def quant_call(r, c, br):
  sshape = (r, _cdiv(c, 128)) if br == 1 else (_cdiv(r, 128), _cdiv(c, 128))
  call = jax.ffi.ffi_call(reg.QUANTIZE_FP8, (jax.ShapeDtypeStruct((r, c), E4M3),
                                             jax.ShapeDtypeStruct(sshape, jnp.float32)))
  nbytes = r * c * 2 + r * c + 4 * int(np.prod(sshape))
  return (lambda x: call(x, block_rows=np.int32(br), scale_transposed=np.int32(0))), nbytes


def cupti_kernel_us(torch, run, reps=10):
  """Median GPU duration (us) of each kernel name that `run` launches, from CUPTI through
  torch.profiler: it records every kernel of the process, XLA's and ours included, so
  this times the kernels themselves whatever launched them."""
  import tempfile
  from torch.profiler import ProfilerActivity, profile
  run()
  torch.cuda.synchronize()
  with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(reps):
      run()
    torch.cuda.synchronize()
  with tempfile.NamedTemporaryFile(suffix=".json") as fh:
    prof.export_chrome_trace(fh.name)
    events = json.load(open(fh.name))["traceEvents"]
  durs = {}
  for e in events:
    if e.get("cat") in ("kernel", "gpu_memcpy") and "dur" in e:
      durs.setdefault(e["name"][:60], []).append(float(e["dur"]))
  return {name: sorted(v)[len(v) // 2] for name, v in durs.items()}


def cupti_rows(torch, log):
  """GB/s from CUPTI kernel times on 8192^2 and 16384x7168 bf16."""
  rows = []
  for (r, c) in [(8192, 8192), (16384, 7168)]:
    x = jax.random.normal(jax.random.key(2), (r, c), jnp.bfloat16)
    row = {"shape": [r, c], "method": "cupti kernel time"}
    copy_bytes = 2 * r * c * 2
    tx = torch.randn(r, c, device="cuda", dtype=torch.bfloat16)
    ty = torch.empty_like(tx)
    for name, us in cupti_kernel_us(torch, lambda: ty.copy_(tx)).items():
      row["copy_torch_GBps"] = copy_bytes / us / 1e3
      row["copy_torch_kernel"] = name
    del tx, ty
    add = jax.jit(lambda x: x + jnp.bfloat16(1))
    for name, us in cupti_kernel_us(torch, lambda: jax.block_until_ready(add(x))).items():
      row["copy_xla_GBps"] = copy_bytes / us / 1e3
    for br in (1, 128):
      f, nbytes = quant_call(r, c, br)
      f = jax.jit(f)
      for name, us in cupti_kernel_us(torch, lambda: jax.block_until_ready(f(x))).items():
        if "quantize" in name:
          row[f"q{br}_GBps"] = nbytes / us / 1e3
    for tb in (1, 128):
      scale_elems = r * _cdiv(c, 128) + (c if tb == 1 else _cdiv(c, 128)) * _cdiv(r, 128)
      nbytes = r * c * 2 + 2 * r * c + 4 * scale_elems
      f = jax.jit(lambda x: _quantize_dual_launch(x, tb))
      for name, us in cupti_kernel_us(torch, lambda: jax.block_until_ready(f(x))).items():
        if "quantize" in name:
          row[f"dual{tb}_GBps"] = nbytes / us / 1e3
    log(" ".join(f"{k}={v:.0f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    rows.append(row)
  return rows


def main():
  ncu_once = "--ncu-once" in sys.argv
  torch, _ = _torch()
  rows = []
  for (r, c) in [] if ncu_once else [(8192, 8192), (16384, 7168)]:
    xs = [jax.random.normal(k, (r, c), jnp.bfloat16) for k in jax.random.split(jax.random.key(0), 12)]
    sets = [(x,) for x in xs]
    row = {"shape": [r, c]}
    copy_bytes = 2 * r * c * 2
    if torch is not None:
      tx = [torch.randn(r, c, device="cuda", dtype=torch.bfloat16) for _ in range(12)]
      ty = [torch.empty_like(v) for v in tx]
      row["copy_torch_GBps"] = copy_bytes / time_torch(torch, lambda a, b: b.copy_(a),
                                                       list(zip(tx, ty)), REPS) / 1e9
      del tx, ty
    row["copy_xla_GBps"] = copy_bytes / time_jax(lambda x: x + jnp.bfloat16(1), sets, REPS) / 1e9
    f, nbytes = quant_call(r, c, 1)
    row["q1x128_GBps"] = nbytes / time_jax(f, sets, REPS) / 1e9
    f, nbytes = quant_call(r, c, 128)
    row["q128x128_GBps"] = nbytes / time_jax(f, sets, REPS) / 1e9
    for tb in (1, 128):
      scale_elems = r * _cdiv(c, 128) + (c if tb == 1 else _cdiv(c, 128)) * _cdiv(r, 128)
      nbytes = r * c * 2 + 2 * r * c + 4 * scale_elems
      row[f"dual{tb}_GBps"] = nbytes / time_jax(lambda x: _quantize_dual_launch(x, tb), sets, REPS) / 1e9
    print(" ".join(f"{k}={v:.0f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
          flush=True)
    rows.append(row)
    del xs, sets
  if not ncu_once:
    cupti = []
    if torch is not None:
      try:
        cupti = cupti_rows(torch, lambda s: print(s, flush=True))
      except Exception as e:  # noqa: BLE001
        print(f"cupti timing failed: {type(e).__name__}: {e}", flush=True)
    with open(sys.argv[1], "w") as fh:
      json.dump({"device": jax.devices()[0].device_kind, "rows": rows, "cupti": cupti}, fh, indent=1)
    return
  # One launch of each kernel on the 8192^2 input (for ncu).
  x = jax.random.normal(jax.random.key(1), (8192, 8192), jnp.bfloat16)
  if torch is not None:
    t = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.empty_like(t).copy_(t)
    torch.cuda.synchronize()
  jax.block_until_ready(jax.jit(lambda x: x + jnp.bfloat16(1))(x))
  jax.block_until_ready(jax.jit(quant_call(8192, 8192, 1)[0])(x))
  jax.block_until_ready(jax.jit(quant_call(8192, 8192, 128)[0])(x))
  jax.block_until_ready(jax.jit(lambda x: _quantize_dual_launch(x, 128))(x))


if __name__ == "__main__":
  main()
