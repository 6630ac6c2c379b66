#!/usr/bin/env bash
# Where the default FP8 GEMM's warps stall, per SASS instruction: one ncu launch with
# warp-state sampling at full rate, exported and printed as the source page (SASS, CSV).
# Needs the package installed. Usage: scripts/device_ncu_source.sh OUTDIR [M N K]
out=$1; M=${2:-4096}; N=${3:-7168}; K=${4:-16384}
cat > /tmp/ncu_fp8_src.py <<PY
import jax, jax.numpy as jnp, numpy as np, jax_sm100
from jax_sm100._fp8 import _quantize
from jax_sm100._gemm import fp8_kernel_a_scale
m, n, k = $M, $N, $K
a, sa = _quantize(jax.random.normal(jax.random.key(0), (m, k), jnp.bfloat16), (1, 128), np.dtype(jnp.float8_e4m3fn))
b, sb = _quantize(jax.random.normal(jax.random.key(1), (n, k), jnp.bfloat16), (128, 128), np.dtype(jnp.float8_e4m3fn))
sa_t = fp8_kernel_a_scale(sa)  # the kernel's (ceil(K/128), round_up(M, 4)) layout
f = jax.jit(lambda *x: jax.ffi.ffi_call("jax_sm100_fp8_gemm", jax.ShapeDtypeStruct((m, n), jnp.bfloat16))(*x))
for _ in range(3): f(a, sa_t, b, sb).block_until_ready()
PY
cd /tmp
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 ncu --clock-control none --kernel-name regex:sm90_fp8_gemm \
  --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section SpeedOfLight --warp-sampling-interval 0 \
  -f -o /tmp/fp8_src python3 /tmp/ncu_fp8_src.py > "$out/ncu_source_run.log" 2>&1
echo "ncu rc=$?"
ncu -i /tmp/fp8_src.ncu-rep --page source --csv --print-source sass > "$out/ncu_source_sass.csv" 2> "$out/ncu_source_print.err"
echo "source page rc=$? lines=$(wc -l < "$out/ncu_source_sass.csv")"
ncu -i /tmp/fp8_src.ncu-rep --print-details all > "$out/ncu_source_details.txt" 2>&1
head -3 "$out/ncu_source_sass.csv" | cut -c1-400
