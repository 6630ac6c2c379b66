#!/usr/bin/env bash
# compute-sanitizer memcheck + racecheck (+ synccheck) on the sm90 dact kernels
# (jax_sm100_gemm_dact): partial tiles, A's box stopping at M, both layouts of B, single
# CTAs and pairs, the bias gradient on and off (its shared-memory column sums are what
# racecheck looks at). Run on the GPU machine after the package is installed.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
cat > /tmp/sanitize_dact.py <<'PY'
import jax, jax.numpy as jnp, numpy as np
import jax_sm100  # noqa: F401  (registers the targets)
rng = np.random.default_rng(0)
def r(shape): return jnp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(jnp.bfloat16)
# (m, n, k, trans_a, trans_b, cluster, dbias)
cases, tile = [(136, 264, 200, False, True, 1, True), (300, 520, 72, False, False, 2, True),
               (70, 256, 128, False, True, 1, False), (260, 304, 16, False, True, 2, True)], (128, 256)
for m, n, k, ta, tb, cm, want in cases:
  a, b, c = r((k, m) if ta else (m, k)), r((n, k) if tb else (k, n)), r((m, n))
  res = (jax.ShapeDtypeStruct((m, n), jnp.bfloat16), jax.ShapeDtypeStruct((n,) if want else (0,), jnp.float32))
  d, s = jax.ffi.ffi_call("jax_sm100_gemm_dact", res)(
      a, b, c, trans_a=ta, trans_b=tb, block_m=np.int32(tile[0]), block_n=np.int32(tile[1]),
      cluster_m=np.int32(cm), group_m=np.int32(8), split_k=np.int32(1), activation=np.int32(2))
  A = np.float64(a).T if ta else np.float64(a)
  B = np.float64(b).T if tb else np.float64(b)
  C = np.float64(c)
  t = np.tanh(np.sqrt(2 / np.pi) * (C + 0.044715 * C ** 3))
  G = (A @ B) * (0.5 * (1 + t) + 0.5 * C * (1 - t * t) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * C * C))
  err = np.linalg.norm(np.float64(d) - G) / np.linalg.norm(G)
  serr = np.linalg.norm(np.float64(s) - G.sum(0)) / np.linalg.norm(G.sum(0)) if want else 0.0
  print(f"{m}x{n}x{k} trans_a={ta} trans_b={tb} cluster {cm} dbias={want}: rel err {err:.2e}, "
        f"sums {serr:.2e}", flush=True)
PY
cd /tmp || exit 1
for tool in memcheck racecheck synccheck; do
  echo "== $tool"
  timeout 240 compute-sanitizer --tool $tool --kernel-name kns=sm90_gemm_kernel --print-limit 20 \
    python3 /tmp/sanitize_dact.py 2>&1 | grep -v "^WARNING\|Warn" | tail -12 | tee -a "$OUT/sanitize_dact.log"
done
