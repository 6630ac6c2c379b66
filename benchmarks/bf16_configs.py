"""Device experiments for the sm90 GEMM: direct FFI timing of chosen shapes/configs.
Usage: python3 scripts/device_exp.py "M,N,K[,cfg[,residual[,trans_a[,trans_b]]]]" ...  (cfg: JAX_SM100_SM90_CONFIG value)"""
import os, sys, time
import jax, jax.numpy as jnp, numpy as np
import jax_sm100  # noqa: F401  registers targets

def timeit(fn, sets, reps=7):
  run = jax.jit(lambda s: [fn(*x) for x in s])
  jax.block_until_ready(run(sets)); jax.block_until_ready(run(sets))
  ts = []
  for _ in range(reps):
    t = time.perf_counter(); jax.block_until_ready(run(sets)); ts.append(time.perf_counter() - t)
  return float(np.median(ts)) / len(sets)

def main():
  for spec in sys.argv[1:]:
    parts = [int(x) for x in spec.split(",")]
    m, n, k = parts[:3]
    res = len(parts) > 4 and parts[4] == 1
    ta = len(parts) > 5 and parts[5] == 1
    tb = len(parts) > 6 and parts[6] == 1
    if len(parts) > 3 and parts[3] >= 0: os.environ["JAX_SM100_SM90_CONFIG"] = str(parts[3])
    else: os.environ.pop("JAX_SM100_SM90_CONFIG", None)
    n_sets = max(4, min(32, int(2e12 // (2 * m * n * k)), int((3 << 30) // ((m * k + k * n + 2 * m * n) * 2))))
    key = jax.random.key(m + n + k)
    ks = jax.random.split(key, 3 * n_sets)
    sets = [(jax.random.normal(ks[3*i], (k, m) if ta else (m, k), jnp.bfloat16),
             jax.random.normal(ks[3*i+1], (n, k) if tb else (k, n), jnp.bfloat16),
             jax.random.normal(ks[3*i+2], (m, n), jnp.bfloat16)) for i in range(n_sets)]
    out = jax.ShapeDtypeStruct((m, n), jnp.bfloat16)
    if res:
      ours = lambda a, b, c: jax.ffi.ffi_call("jax_sm100_gemm_residual", out)(a, b, c, trans_a=ta, trans_b=tb, alpha=np.float32(1), beta=np.float32(1))
      xla = lambda a, b, c: jnp.dot(a.T if ta else a, b.T if tb else b) + c
    else:
      ours = lambda a, b, c: jax.ffi.ffi_call("jax_sm100_gemm", out)(a, b, trans_a=ta, trans_b=tb)
      xla = lambda a, b, c: jnp.dot(a.T if ta else a, b.T if tb else b)
    t1 = timeit(ours, sets); t2 = timeit(xla, sets); t3 = timeit(ours, sets)
    f = 2 * m * n * k
    print(f"{spec:28s} ours {f/t1/1e12:7.1f} / {f/t3/1e12:7.1f}  xla {f/t2/1e12:7.1f} TF/s  ratio {t2/t1:.3f}", flush=True)

main()
