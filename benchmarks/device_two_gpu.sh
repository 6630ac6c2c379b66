#!/usr/bin/env bash
# One device call on a two-GPU machine (nvidia-h100-x2 / nvidia-h200-x2): the partitioning
# rules on the kernel path (tests/test_sharding_gpu.py) and the sharded example's step time
# beside XLA's dot. Logs under $OUT.
#   [WHEEL=dist90/jax_sm100-*.whl] bash benchmarks/device_two_gpu.sh
# WHEEL: a wheel built elsewhere for sm_90a (JAX_SM100_CUDA_ARCHS=90a pip wheel ...), so the
# call spends no device time compiling; without it the checkout is built for sm_90a here.
# Each part runs under its own time limit: a collective that never completes (one device's
# launch failed while its peer waits in the all-reduce) ends that part, not the call.
set -uo pipefail
# NVLink multicast stays off on these shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 JAX_SM100_CUDA_ARCHS=90a
OUT="${OUT:-/tmp/jax_sm100_out}"; mkdir -p "$OUT"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
{ date -u; nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
if [ -n "${WHEEL:-}" ]; then
  python3 -m pip install -q --no-deps --no-index --force-reinstall $WHEEL > "$OUT/build.log" 2>&1
else
  (cd "$repo" && python3 -m pip install --no-build-isolation --no-deps -q .) > "$OUT/build.log" 2>&1
fi || { tail -20 "$OUT/build.log"; echo "INSTALL FAILED"; exit 1; }
echo "installed ($((SECONDS - start)) s)"
cd /tmp || exit 1  # the installed package, not the checkout's jax_sm100/
python3 -c "import jax, jax_sm100 as j; print('jax', jax.__version__, jax.devices(), 'backend', j.backend())" \
  2>&1 | tee -a "$OUT/env.txt"
t="$repo/tests/test_sharding_gpu.py"
part() {  # part NAME SECONDS pytest-args...
  local name=$1 limit=$2; shift 2
  timeout -k 5 "$limit" pytest -q -s -rfE -p no:cacheprovider "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? ($((SECONDS - start)) s)"
  grep -E "ms/step|loss .* ->|passed|failed|FAILED|ERROR|Error" "$OUT/$name.log" | tail -15
}
part example "${T_EXAMPLE:-50}" "$t::test_train_sharded_example_on_gpus"
part row "${T_ROW:-35}" "$t" -k "row"
part rest "${T_REST:-70}" "$t" -k "not row and not example"
