"""matmul_bias's partitioning rules on 8 CPU host devices (cpu_ffi: the FFI target's CPU
handler runs the real custom call), in a subprocess: XLA_FLAGS must precede jax's start.
The other ops' partitioning: test_sharding.py."""
from __future__ import annotations

import os
import subprocess
import sys


_SHARDED = r'''
import re, jax, jax.numpy as jnp, numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
import jax_sm100
assert jax_sm100.backend() == "cpu_ffi"
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
rng = np.random.default_rng()
x = jnp.asarray(rng.standard_normal((64, 96)), jnp.bfloat16)
w = jnp.asarray(rng.standard_normal((96, 128)), jnp.bfloat16)
bias = jnp.asarray(rng.standard_normal((128,)), jnp.float32)
f = jax.jit(lambda x, w, c: jax_sm100.matmul_bias(x, w, c, activation="gelu"))
ref = np.asarray(f(x, w, bias).astype(jnp.float32))
for sx, sw, sb, want in [(P("data", None), P(None, "model"), P("model"), set()),
                         (P("data", "model"), P("model", None), P(None), {"all-gather"})]:
  args = [jax.device_put(v, NamedSharding(mesh, s)) for v, s in ((x, sx), (w, sw), (bias, sb))]
  text = f.lower(*args).compile().as_text()
  got = set(re.findall(r"(all-gather|all-reduce|reduce-scatter|all-to-all)(?:-start)?\(", text))
  assert got == want and "jax_sm100_gemm_bias" in text, (sx, sw, got)
  np.testing.assert_array_equal(np.asarray(f(*args).astype(jnp.float32)), ref)
# The gradient under column parallelism: the forward launch writes z beside d (gelu's
# backward input), both sharded as the output; the backward needs all-reduces only (the
# sums over the sharded M and N), never a gathered operand.
g = jax.jit(jax.grad(lambda x, w, c: jnp.sum(
    jax_sm100.matmul_bias(x, w, c, activation="gelu").astype(jnp.float32) ** 2), (0, 1, 2)))
gref = [np.asarray(v.astype(jnp.float32), np.float64) for v in g(x, w, bias)]
args = [jax.device_put(v, NamedSharding(mesh, s))
        for v, s in ((x, P("data", None)), (w, P(None, "model")), (bias, P("model")))]
text = g.lower(*args).compile().as_text()
got = set(re.findall(r"(all-gather|all-reduce|reduce-scatter|all-to-all)(?:-start)?\(", text))
assert got == {"all-reduce"} and "jax_sm100_gemm_bias" in text, got
pre = [l for l in text.splitlines() if 'custom_call_target="jax_sm100_gemm_bias"' in l]
assert len(pre) == 1 and pre[0].count("bf16[32,32]") >= 2, pre  # d and z, one shard each
for gs, gr in zip(g(*args), gref):
  gs = np.asarray(gs.astype(jnp.float32), np.float64)
  assert np.max(np.abs(gs - gr)) <= 2.0**-6 * np.max(np.abs(gr)), np.max(np.abs(gs - gr))
print("SHARDED-OK")
'''


def test_partitioning_column_parallel_is_local_and_k_is_gathered(cpu_ffi, tmp_path):
  # Column parallel (N sharded, the bias with it): local launches, no collective. K sharded:
  # act() of a partial sum is not the partial act(), so the operands are gathered (no
  # all-reduce) and the result equals the unsharded one bit for bit. The gradient under
  # column parallelism: all-reduces only.
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu", JAX_SM100_BACKEND="cpu_ffi")
  r = subprocess.run([sys.executable, "-c", _SHARDED], env=env, capture_output=True, text=True,
                     timeout=600, cwd=tmp_path)
  assert r.returncode == 0 and "SHARDED-OK" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
