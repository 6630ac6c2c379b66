#!/usr/bin/env bash
# compute-sanitizer memcheck + racecheck on the sm90 bf16 GEMM kernels, small
# representative shapes (partial tiles, all four layouts, residual and plain, batch
# broadcast), with the default configurations and then every compiled tiling
# (jax_sm100.tuning.override). Run on the GPU machine after the package is installed.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
cat > /tmp/sanitize_gemm.py <<'PY'
import sys
import jax, jax.numpy as jnp, numpy as np
from jax_sm100 import _backend, tuning
from jax_sm100._launch import gemm as launch  # the kernels' own layouts (transpose flags)
rng = np.random.default_rng(0)
def r(shape, dt=jnp.bfloat16): return jnp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(dt)
def run(cfg):
  m, n, k = 136, 200, 200
  with tuning.override(gemm=cfg):
    ctx = _backend.context()  # holds the override
    for ta in (False, True):
      for tb in (False, True):
        a = r((k, m) if ta else (m, k)); b = r((n, k) if tb else (k, n)); c = r((2, m, n))
        d = jax.jit(lambda a, b: launch.gemm(ctx, a, b, ta, tb, jnp.bfloat16))(a, b)
        e = jax.jit(lambda a, b, c: launch.gemm_residual(ctx, a, b, c, ta, tb, 0.5, 2.0, jnp.bfloat16))(a, b, c)
        ref = (np.float64(a).T if ta else np.float64(a)) @ (np.float64(b).T if tb else np.float64(b))
        err = np.linalg.norm(np.float64(d) - ref) / np.linalg.norm(ref)
        want = 0.5 * ref + 2.0 * np.float64(c)
        err2 = np.linalg.norm(np.float64(e) - want) / np.linalg.norm(want)
        print(f"{cfg or 'default'} trans_a={ta} trans_b={tb} rel err {err:.2e} residual {err2:.2e}", flush=True)
    d = launch.gemm(ctx, r((16, 1024)), r((1024, 4096)), False, False, jnp.float32)  # small M, f32 out
    print("small-M ok", float(jnp.abs(d).max()) > 0, flush=True)
configs = [None] if sys.argv[1:] == ["default"] else [tuning.GemmConfig(*t) for t in tuning.GEMM_TILINGS]
for cfg in configs:
  run(cfg)
PY
cd /tmp || exit 1
for tool in memcheck racecheck; do
  for which in default all; do  # the heuristic's choices; then every compiled tiling
    echo "== $tool ($which)"
    timeout 240 compute-sanitizer --tool $tool --kernel-name kns=sm90_gemm_kernel --print-limit 20 \
        python3 /tmp/sanitize_gemm.py $which 2>&1 | tail -12 | tee -a "$OUT/sanitize_$tool.log"
  done
done
