#!/usr/bin/env bash
# compute-sanitizer memcheck + racecheck on the sm90 GEMM kernels, small representative
# shapes (partial tiles, all four layouts, residual and plain, batch broadcast).
# Run on the GPU machine after the package is installed (scripts/device_gemm.sh).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
cat > /tmp/sanitize_gemm.py <<'PY'
import jax, jax.numpy as jnp, numpy as np
import jax_sm100  # registers the FFI targets
rng = np.random.default_rng(0)
def r(shape, dt=jnp.bfloat16): return jnp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(dt)
m, n, k = 136, 200, 200
for ta in (False, True):
  for tb in (False, True):
    a = r((k, m) if ta else (m, k)); b = r((n, k) if tb else (k, n)); c = r((2, m, n))
    d = jax.ffi.ffi_call("jax_sm100_gemm", jax.ShapeDtypeStruct((m, n), jnp.bfloat16))(a, b, trans_a=ta, trans_b=tb)
    e = jax.ffi.ffi_call("jax_sm100_gemm_residual", jax.ShapeDtypeStruct((2, m, n), jnp.bfloat16))(
        a, b, c, trans_a=ta, trans_b=tb, alpha=np.float32(0.5), beta=np.float32(2.0))
    ref = (np.swapaxes(np.float64(a), 0, 1) if ta else np.float64(a)) @ (np.swapaxes(np.float64(b), 0, 1) if tb else np.float64(b))
    err = np.linalg.norm(np.float64(d) - ref) / np.linalg.norm(ref)
    err2 = np.linalg.norm(np.float64(e) - (0.5 * ref + 2.0 * np.float64(c))) / np.linalg.norm(0.5 * ref + 2.0 * np.float64(c))
    print(f"trans_a={ta} trans_b={tb} rel err {err:.2e} residual {err2:.2e}", flush=True)
# small-M config and f32 output
a = r((16, 1024)); b = r((1024, 4096))
d = jax.ffi.ffi_call("jax_sm100_gemm", jax.ShapeDtypeStruct((16, 4096), jnp.float32))(a, b, trans_a=False, trans_b=False)
print("small-M ok", float(jnp.abs(d).max()) > 0, flush=True)
PY
cd /tmp
for tool in memcheck racecheck; do
  for forced in "" "0 2"; do  # heuristic choice; then 128x256 with a 2-CTA cluster
    set -- $forced
    echo "== $tool ${forced:+(config $1, cluster $2)}"
    JAX_SM100_SM90_CONFIG=${1:-} JAX_SM100_SM90_CLUSTER=${2:-} \
    timeout 240 compute-sanitizer --tool $tool --kernel-name kns=sm90_gemm_kernel --print-limit 20 \
        python3 /tmp/sanitize_gemm.py 2>&1 | tail -12 | tee -a "$OUT/sanitize_$tool.log"
  done
done
