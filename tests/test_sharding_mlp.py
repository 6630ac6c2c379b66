"""jax_sm100.mlp's partitioning on 8 CPU host devices (cpu_ffi: the FFI targets' CPU
handlers run the real custom calls), in a subprocess: XLA_FLAGS must precede jax's start.
The activation-backward launch (jax_sm100_gemm_dact) shards its rows with the data and
sums its bias gradient over them (partition.Spec.row_sums)."""
from __future__ import annotations

import os
import subprocess
import sys


_SHARDED = r'''
import re, jax, jax.numpy as jnp, numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
import jax_sm100
assert jax_sm100.backend() == "cpu_ffi"
mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
rng = np.random.default_rng()
dims = [32, 64, 48, 16]
x = jnp.asarray(rng.standard_normal((128, dims[0])), jnp.bfloat16)
ws = [jnp.asarray(rng.standard_normal((dims[i], dims[i + 1])) * dims[i] ** -0.5, jnp.bfloat16)
      for i in range(3)]
bs = [jnp.asarray(rng.standard_normal((dims[i + 1],)), jnp.float32) for i in range(3)]
t = jnp.asarray(rng.standard_normal((128, dims[-1])), jnp.float32)

def loss(x, ws, bs, t):
  y = jax_sm100.mlp(x, ws, bs, activation="gelu").astype(jnp.float32)
  return jnp.sum((y - t) ** 2)

g = jax.jit(jax.grad(loss, (0, 1, 2)))
ref = [np.asarray(v.astype(jnp.float32), np.float64) for v in jax.tree_util.tree_leaves(g(x, ws, bs, t))]
rep = NamedSharding(mesh, P())
for name, xs, ws_spec, want in [
    ("data parallel", P(("data", "model"), None), [P()] * 3, {"all-reduce"}),
    ("data x model", P("data", None), [P(None, "model"), P("model", None), P()], None)]:
  args = (jax.device_put(x, NamedSharding(mesh, xs)),
          [jax.device_put(w, NamedSharding(mesh, s)) for w, s in zip(ws, ws_spec)],
          [jax.device_put(b, rep) for b in bs], jax.device_put(t, NamedSharding(mesh, xs)))
  text = g.lower(*args).compile().as_text()
  got = set(re.findall(r"(all-gather|all-reduce|reduce-scatter|all-to-all)(?:-start)?\(", text))
  assert text.count('custom_call_target="jax_sm100_gemm_dact"') == 2, name
  if want is not None:
    assert got == want, (name, got)
  if name == "data parallel":  # the dact launches run on 16 of the 128 rows each
    dact = [l for l in text.splitlines() if 'custom_call_target="jax_sm100_gemm_dact"' in l]
    assert all("bf16[16," in l for l in dact), dact
  for gs, gr in zip(jax.tree_util.tree_leaves(g(*args)), ref):
    gs = np.asarray(gs.astype(jnp.float32), np.float64)
    assert np.max(np.abs(gs - gr)) <= 2.0**-6 * np.max(np.abs(gr)), (name, np.max(np.abs(gs - gr)))
print("SHARDED-OK")
'''


def test_mlp_gradient_shards_rows_and_sums_the_bias_gradient(cpu_ffi, tmp_path):
  # Data parallel: every launch on its rows, the weight and bias gradients all-reduced (the
  # dact launch's column sums among them); a mixed data x model layout gives the same
  # gradients.
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu", JAX_SM100_BACKEND="cpu_ffi")
  r = subprocess.run([sys.executable, "-c", _SHARDED], env=env, capture_output=True, text=True,
                     timeout=600, cwd=tmp_path)
  assert r.returncode == 0 and "SHARDED-OK" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]


_FP8_SHARDED = r'''
import re, jax, jax.numpy as jnp, numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
import jax_sm100
assert jax_sm100.backend() == "cpu_ffi"
mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
rng = np.random.default_rng()
dims = [128, 256, 128, 16]
x = jnp.asarray(rng.standard_normal((1024, dims[0])), jnp.bfloat16)
ws = [jnp.asarray(rng.standard_normal((dims[i], dims[i + 1])) * dims[i] ** -0.5, jnp.bfloat16)
      for i in range(3)]
bs = [jnp.asarray(rng.standard_normal((dims[i + 1],)), jnp.float32) for i in range(3)]
t = jnp.asarray(rng.standard_normal((1024, dims[-1])), jnp.float32)

def loss(x, ws, bs, t):
  y = jax_sm100.fp8_mlp(x, ws, bs, activation="silu").astype(jnp.float32)
  return jnp.sum((y - t) ** 2)

g = jax.jit(jax.grad(loss, (0, 1, 2)))
ref = [np.asarray(v.astype(jnp.float32), np.float64) for v in jax.tree_util.tree_leaves(g(x, ws, bs, t))]
rows, rep = NamedSharding(mesh, P("data", None)), NamedSharding(mesh, P())
args = (jax.device_put(x, rows), [jax.device_put(w, rep) for w in ws],
        [jax.device_put(b, rep) for b in bs], jax.device_put(t, rows))
text = g.lower(*args).compile().as_text()
for target in ("jax_sm100_quantize_fp8_act_dual", "jax_sm100_quantize_fp8_dact_dual"):
  lines = [l for l in text.splitlines() if f'custom_call_target="{target}"' in l]
  assert len(lines) == 2 and all("[128," in l for l in lines), lines  # 128 of 1024 rows each
got = set(re.findall(r"(all-gather|all-reduce|reduce-scatter|all-to-all)(?:-start)?\(", text))
assert got == {"all-reduce"}, got
for gs, gr in zip(jax.tree_util.tree_leaves(g(*args)), ref):
  gs = np.asarray(gs.astype(jnp.float32), np.float64)
  assert np.max(np.abs(gs - gr)) <= 2.0**-6 * np.max(np.abs(gr)), np.max(np.abs(gs - gr))
print("SHARDED-OK")
'''


def test_fp8_mlp_gradient_shards_the_quantizers_rows(cpu_ffi, tmp_path):
  # Data parallel: both prologue quantizers run on each device's 128 rows (whole blocks of
  # dz^T's 128x128 quantization), the bias gradient's per-block sums and the weight
  # gradients all-reduced; the gradients match the single-device ones.
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu", JAX_SM100_BACKEND="cpu_ffi")
  r = subprocess.run([sys.executable, "-c", _FP8_SHARDED], env=env, capture_output=True,
                     text=True, timeout=600, cwd=tmp_path)
  assert r.returncode == 0 and "SHARDED-OK" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
