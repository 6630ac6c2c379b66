#!/usr/bin/env bash
# Nsight Compute look at one sm90 bf16 GEMM launch (8192^3 by default), with 2-CTA
# clusters on and off (jax_sm100.tuning.override(gemm={"cluster_m": ...}) on the default
# tile shape). Usage: benchmarks/device_ncu_gemm.sh [M N K]; needs the package installed.
M=${1:-8192}; N=${2:-8192}; K=${3:-8192}
cat > /tmp/ncu_one.py <<PY
import sys
import jax, jax.numpy as jnp, jax_sm100
a = jax.random.normal(jax.random.key(0), ($M, $K), jnp.bfloat16)
b = jax.random.normal(jax.random.key(1), ($K, $N), jnp.bfloat16)
with jax_sm100.tuning.override(gemm={"cluster_m": int(sys.argv[1])}):
  f = jax.jit(jax_sm100.matmul)
  for _ in range(3): f(a, b).block_until_ready()
PY
cd /tmp || exit 1
for cl in 1 2; do
  echo "== cluster $cl"
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 120 ncu --clock-control none \
    --kernel-name regex:sm90_gemm --launch-skip 1 --launch-count 1 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,sm__cycles_active.avg,sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 /tmp/ncu_one.py $cl 2>&1 | grep -v "^==PROF==" | tail -14
done
