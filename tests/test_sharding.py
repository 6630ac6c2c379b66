"""The ops' partitioning rules under jax.jit on 8 CPU host devices.

The launch layer runs end to end (custom_partitioning callbacks included) with the real
custom calls executed by the FFI targets' CPU handlers (`cpu_ffi`): the partitioned program
is the one our rules build. Each case checks
the result against the unsharded call and counts the compiled program's collectives
(kind and bytes) against the expected ones and against XLA's own jnp.dot under the
same shardings (ours may not move more bytes).

8 host devices need XLA_FLAGS set before jax initialises, so on a process with
fewer devices the single test `test_sharded_suite` re-runs this file in a subprocess
with the flag; there every other test runs (test_sharding_gspmd.py does the same).
The pattern tests run the real custom calls on the CPU handlers; the pure-JAX
`emulated_kernels` contract check runs in the test_api_* files, not here again.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jax_sm100

MULTI = jax.device_count() >= 8
CHILD_ENV = "JAX_SM100_SHARDING_CHILD"
needs8 = pytest.mark.skipif(not MULTI, reason="runs in the 8-device subprocess")


in_parent = pytest.mark.skipif(MULTI or os.environ.get(CHILD_ENV) == "1",
                               reason="this process already has 8 devices")


def run_in_8_device_child(test_file: str, tmp_path):
  """Runs `test_file` in a pytest subprocess with 8 CPU host devices; asserts it passed."""
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu", **{CHILD_ENV: "1"})
  # From a directory outside the checkout: `python -m pytest` puts the working directory
  # on sys.path, where the checkout's jax_sm100/ (no compiled module) would shadow the
  # installed package.
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                      os.path.abspath(test_file)],
                     env=env, capture_output=True, text=True, timeout=1800, cwd=tmp_path)
  assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]


@in_parent
def test_sharded_suite(tmp_path):
  run_in_8_device_child(__file__, tmp_path)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

@pytest.fixture
def kernels(cpu_ffi):
  """The kernel path under test: the real custom calls, run by the FFI targets' CPU
  handlers (cpu_ffi); yields the launches traced, [(target, operand shapes, attributes)]."""
  return cpu_ffi


MESHES = {"8": ((8,), ("x",)), "2x4": ((2, 4), ("data", "model")),
          "4x2": ((4, 2), ("data", "model"))}
_COLL = re.compile(r"= (\([^=]*?\)|\S+) (all-reduce|all-gather|reduce-scatter|all-to-all|"
                   r"collective-permute)(?:-start)?\(")
_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f8e4m3fn": 1, "s32": 4, "u32": 4, "pred": 1}


def mesh_of(name):
  shape, axes = MESHES[name]
  return jax.make_mesh(shape, axes, axis_types=(AxisType.Auto,) * len(axes))


def axes_of(name):
  """(data axis, model axis): the one axis of a 1-D mesh plays both roles."""
  axes = MESHES[name][1]
  return axes[0], axes[-1]


def collectives(fn, *args):
  """[(kind, bytes)] of the compiled program's collectives."""
  text = jax.jit(fn).lower(*args).compile().as_text()
  out = []
  for shape, kind in _COLL.findall(text):
    nbytes = sum(_BYTES.get(dt, 4) * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
                 for dt, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape))
    out.append((kind, nbytes))
  return sorted(out)


def kinds(colls):
  return sorted(k for k, _ in colls)


def total(colls):
  return sum(b for _, b in colls)


def put(mesh, x, spec):
  return jax.device_put(x, NamedSharding(mesh, spec))


def close(got, want, rel=2.0**-6):
  got = np.asarray(jnp.asarray(got).astype(jnp.float32))
  want = np.asarray(jnp.asarray(want).astype(jnp.float32))
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=rel, atol=rel * (np.abs(want).max() + 1e-6))


def bf16(rng, shape, scale=1.0):
  return jnp.asarray(rng.standard_normal(shape) * scale, jnp.bfloat16)


# The patterns: (a's spec, b's spec, the collectives a careful hand-written program has).
def patterns(mesh_name):
  d, m = axes_of(mesh_name)
  return {
      "data": (P(d, None), P(), []),
      "column": (P(), P(None, m), []),
      "row": (P(None, m), P(m, None), ["all-reduce"]),
      "data_row": (P(d, m), P(m, None), ["all-reduce"]) if d != m else None,
      "fsdp": (P(d, None), P(d, None), ["all-gather"]),
  }


CASES = [(mesh, pat) for mesh in MESHES for pat in ("data", "column", "row", "data_row", "fsdp")
         if patterns(mesh)[pat] is not None]


# ---------------------------------------------------------------------------
# bf16 GEMMs: matmul, matmul_residual, dot_general, and their gradients
# ---------------------------------------------------------------------------

@needs8
@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_patterns(kernels, rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  # FSDP as it occurs: more activation rows than weight rows (XLA then gathers the
  # weight too; with a small activation its cost model may move the activation).
  m = 4096 if pattern == "fsdp" else 256
  a, b = bf16(rng, (m, 512)), bf16(rng, (512, 1024))
  A, B = put(mesh, a, sa), put(mesh, b, sb)
  ours = collectives(jax_sm100.matmul, A, B)
  xla = collectives(lambda a, b: jnp.dot(a, b), A, B)
  assert kinds(ours) == want, (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  assert any(t == "jax_sm100_gemm" for t, _, _ in kernels)
  close(jax.jit(jax_sm100.matmul)(A, B), jax_sm100.matmul(a, b))

  dg = lambda a, b: jax_sm100.dot_general(a, b, (((1,), (0,)), ((), ())))
  assert kinds(collectives(dg, A, B)) == want
  close(jax.jit(dg)(A, B), jnp.dot(a, b))


@needs8
@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_residual_patterns(kernels, rng, mesh_name, pattern):
  """beta*C is added once, not once per K shard."""
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  m = 4096 if pattern == "fsdp" else 256
  a, b, c = bf16(rng, (m, 512)), bf16(rng, (512, 1024)), bf16(rng, (m, 1024), 8.0)
  args = (put(mesh, a, sa), put(mesh, b, sb), put(mesh, c, P()))
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0)
  ours = collectives(f, *args)
  xla = collectives(lambda a, b, c: (0.5 * jnp.dot(a, b) + 2.0 * c).astype(c.dtype), *args)
  assert kinds(ours) == want, (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  close(jax.jit(f)(*args), f(a, b, c))


@needs8
@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_grad_patterns(kernels, rng, mesh_name, pattern):
  """The backward's products (dA = g b^T, dB = a^T g) partition by the same rules."""
  mesh = mesh_of(mesh_name)
  sa, sb, _ = patterns(mesh_name)[pattern]
  a, b, c = bf16(rng, (256, 512)), bf16(rng, (512, 1024)), bf16(rng, (256, 1024))
  A, B, C = put(mesh, a, sa), put(mesh, b, sb), put(mesh, c, P())

  def loss(mm):
    return jax.grad(lambda a, b, c: jnp.sum(mm(a, b, c).astype(jnp.float32) ** 2),
                    argnums=(0, 1, 2))
  ours = loss(lambda a, b, c: jax_sm100.matmul_residual(a, b, c))
  xla = loss(lambda a, b, c: jnp.dot(a, b) + c)
  co, cx = collectives(ours, A, B, C), collectives(xla, A, B, C)
  assert total(co) <= total(cx), (co, cx)
  assert "all-gather" not in kinds(co) or pattern == "fsdp", co
  for got, want in zip(jax.jit(ours)(A, B, C), ours(a, b, c)):
    close(got, want, rel=2.0**-5)
  gm = jax.grad(lambda a, b: jnp.sum(jax_sm100.matmul(a, b).astype(jnp.float32)), (0, 1))
  assert total(collectives(gm, A, B)) <= total(collectives(
      jax.grad(lambda a, b: jnp.sum(jnp.dot(a, b).astype(jnp.float32)), (0, 1)), A, B))


@needs8
@pytest.mark.parametrize("mesh_name", list(MESHES))
@pytest.mark.parametrize("residual", [False, True])
def test_row_parallel_sharded_output_reduce_scatters(kernels, rng, mesh_name, residual):
  """K sharded and the output sharded along M over the same axis (a row-parallel layer
  feeding sequence-parallel code): one reduce-scatter of the partials, no all-reduce,
  no more bytes than XLA's dot; beta*C still added once."""
  mesh = mesh_of(mesh_name)
  _, ax = axes_of(mesh_name)
  a, b, c = bf16(rng, (256, 512)), bf16(rng, (512, 1024)), bf16(rng, (256, 1024), 4.0)
  A, B, C = put(mesh, a, P(None, ax)), put(mesh, b, P(ax, None)), put(mesh, c, P())
  out = NamedSharding(mesh, P(ax, None))
  if residual:
    f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0)
    fx = lambda a, b, c: (0.5 * jnp.dot(a, b) + 2.0 * c).astype(c.dtype)
    args, plain = (A, B, C), (a, b, c)
  else:
    f, fx = (lambda a, b: jax_sm100.matmul(a, b)), (lambda a, b: jnp.dot(a, b))
    args, plain = (A, B), (a, b)

  def colls(fn):
    text = jax.jit(fn, out_shardings=out).lower(*args).compile().as_text()
    found = []
    for shape, kind in _COLL.findall(text):
      nbytes = sum(_BYTES.get(dt, 4) * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
                   for dt, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape))
      found.append((kind, nbytes))
    return sorted(found)
  ours, xla = colls(f), colls(fx)
  assert kinds(ours) == ["reduce-scatter"], (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  got = jax.jit(f, out_shardings=out)(*args)
  assert got.sharding.is_equivalent_to(out, got.ndim)
  close(got, f(*plain))


@needs8
def test_batched_matmul_batch_sharded(kernels, rng):
  mesh = mesh_of("2x4")
  a, b = bf16(rng, (8, 64, 128)), bf16(rng, (8, 128, 256))
  A, B = put(mesh, a, P("model", "data")), put(mesh, b, P("model"))
  assert collectives(jax_sm100.matmul, A, B) == []
  close(jax.jit(jax_sm100.matmul)(A, B), jax_sm100.matmul(a, b))
  dg = lambda a, b: jax_sm100.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
  assert collectives(dg, A, B) == []


@needs8
def test_shard_map_local(kernels, rng):
  """Inside shard_map the op runs on the local shards (one launch per device)."""
  mesh = mesh_of("2x4")
  a, b = bf16(rng, (256, 512)), bf16(rng, (512, 1024))
  f = jax.shard_map(lambda a, b: jax_sm100.matmul(a, b), mesh=mesh,
                    in_specs=(P("data", None), P(None, "model")),
                    out_specs=P("data", "model"))
  assert collectives(f, a, b) == []
  close(jax.jit(f)(a, b), jax_sm100.matmul(a, b))
  shapes = {s for t, s, _ in kernels if t == "jax_sm100_gemm"}
  assert ((128, 512), (512, 256)) in shapes, shapes


# ---------------------------------------------------------------------------
# FP8: fp8_dot (and its gradient), fp8_blockwise_matmul, quantize
# ---------------------------------------------------------------------------

FP8_CASES = [(m, p) for m, p in CASES if p in ("data", "column", "row", "data_row")]


@needs8
@pytest.mark.parametrize("mesh_name,pattern", FP8_CASES)
def test_fp8_dot_patterns(kernels, rng, mesh_name, pattern):
  """Scales shard with their data: no collective beyond the row-parallel all-reduce."""
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  # M = 2048: the weight gradient contracts M, whose shards must hold whole 128-row
  # blocks (x^T's 1x128 scales run along M).
  x, w = bf16(rng, (2048, 1024)), bf16(rng, (1024, 1024), 0.05)
  X, W = put(mesh, x, sa), put(mesh, w, sb)
  f = lambda x, w: jax_sm100.fp8_dot(x, w)
  assert kinds(collectives(f, X, W)) == want
  close(jax.jit(f)(X, W), f(x, w), rel=2.0**-5)
  g = jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2), (0, 1))
  gx = jax.grad(lambda x, w: jnp.sum(jnp.dot(x, w).astype(jnp.float32) ** 2), (0, 1))
  co, cx = collectives(g, X, W), collectives(gx, X, W)
  assert "all-gather" not in kinds(co), co
  assert total(co) <= total(cx), (co, cx)
  for got, ref in zip(jax.jit(g)(X, W), g(x, w)):
    close(got, ref, rel=2.0**-4)


@needs8
@pytest.mark.parametrize("mesh_name,pattern", [(m, p) for m, p in FP8_CASES if p != "data_row"])
def test_fp8_dot_bias_activation_patterns(kernels, rng, mesh_name, pattern):
  """The fused FP8 bias/activation launch (jax_sm100_fp8_gemm_bias): data and column
  parallel run locally (the bias shards with N), no collective; a sharded K is gathered
  (the activation needs the whole sum): all-gathers only, the same numbers."""
  mesh = mesh_of(mesh_name)
  sa, sb, _ = patterns(mesh_name)[pattern]
  x, w, b = bf16(rng, (1024, 512)), bf16(rng, (512, 1024), 0.05), bf16(rng, (1024,))
  X, W = put(mesh, x, sa), put(mesh, w, sb)
  B = put(mesh, b, P(sb[1] if len(sb) > 1 else None))  # the bias sharded as w's N
  f = lambda x, w, b: jax_sm100.fp8_dot(x, w, bias=b, activation="gelu")
  colls = collectives(f, X, W, B)
  if pattern == "row":
    assert colls and set(kinds(colls)) == {"all-gather"}, colls
  else:
    assert colls == [], colls
  assert "jax_sm100_fp8_gemm_bias" in {t for t, _, _ in kernels}
  close(jax.jit(f)(X, W, B), f(x, w, b), rel=2.0**-6)


@needs8
def test_fp8_k_split_inside_a_block_is_an_error(kernels, rng):
  mesh = mesh_of("2x4")
  a = jnp.asarray(rng.standard_normal((128, 384)), jnp.float8_e4m3fn)
  b = jnp.asarray(rng.standard_normal((256, 384)), jnp.float8_e4m3fn)
  sa, sb = jnp.ones((128, 3), jnp.float32), jnp.ones((2, 3), jnp.float32)
  args = (put(mesh, a, P(None, "model")), put(mesh, sa, P()), put(mesh, b, P(None, "model")),
          put(mesh, sb, P()))
  with pytest.raises(Exception, match="mesh axis 'model'.*128"):
    jax.jit(jax_sm100.fp8_blockwise_matmul).lower(*args).compile()


@needs8
@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_quantize_rows_sharded(kernels, rng, block):
  mesh = mesh_of("8")
  x = bf16(rng, (1024, 512))
  X = put(mesh, x, P("x", None))
  f = lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block)
  assert collectives(f, X) == []
  (q, s), (q0, s0) = jax.jit(f)(X), f(x)
  np.testing.assert_array_equal(np.asarray(q.astype(jnp.float32)), np.asarray(q0.astype(jnp.float32)))
  np.testing.assert_array_equal(np.asarray(s), np.asarray(s0))


# ---------------------------------------------------------------------------
# The sharded training example, on the launch layer
# ---------------------------------------------------------------------------

@needs8
def test_train_sharded_example(kernels):
  """A few steps of examples/train_sharded.py on a (4, 2) data x model mesh with the
  kernel path: the loss decreases and no tensor-parallel weight is all-gathered."""
  import importlib.util
  path = os.path.join(os.path.dirname(__file__), "..", "examples", "train_sharded.py")
  spec = importlib.util.spec_from_file_location("train_sharded", path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["train_sharded"] = mod  # flax's dataclasses look the module up
  spec.loader.exec_module(mod)
  out = mod.main(["--steps", "4", "--width", "256", "--hidden", "512", "--batch", "1024"])
  for variant in ("bf16", "fp8"):
    assert out[variant]["weight_gathers"] == 0, out
    assert out[variant]["losses"][-1] < out[variant]["losses"][0], out
  targets = {t for t, _, _ in kernels}
  assert {"jax_sm100_gemm", "jax_sm100_fp8_gemm"} <= targets, targets


# ---------------------------------------------------------------------------
# Grouped (MoE) GEMMs: ragged_dot (and its gradient), ragged_dot_general's K-grouped
# form, fp8_grouped_matmul, fp8_ragged_dot. cpu_ffi only: conftest's emulation does
# not know the grouped targets.
# ---------------------------------------------------------------------------

GROUPED = ("jax_sm100_grouped_gemm", "jax_sm100_kgrouped_gemm", "jax_sm100_fp8_grouped_gemm")


def random_sizes(rng, g, m):
  """g group sizes covering fewer than m rows (the last rows are in no group), some
  groups likely empty."""
  return jnp.asarray(rng.multinomial(m - 7, rng.dirichlet(np.full(g, 0.5))), jnp.int32)


def launches(calls, target):
  return [shapes for t, shapes, _ in calls if t == target]


def ragged(x, w, gs):
  return jax_sm100.ragged_dot(x, w, gs)


def lax_ragged(x, w, gs):
  return jax.lax.ragged_dot(x, w, gs)


@needs8
@pytest.mark.parametrize("mesh_name", list(MESHES))
def test_ragged_dot_n_sharded_is_local(cpu_ffi, rng, mesh_name):
  """rhs sharded on N (expert tensor parallelism, column-wise): each shard runs the
  grouped product on its columns of every expert, no collective."""
  mesh = mesh_of(mesh_name)
  _, ax = axes_of(mesh_name)
  m, k, n, g = 256, 512, 1024, 4
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n)), random_sizes(rng, g, m)
  X, W = put(mesh, x, P()), put(mesh, w, P(None, None, ax))
  assert collectives(ragged, X, W, gs) == []
  got = jax.jit(ragged)(X, W, gs)
  close(got, ragged(x, w, gs))
  close(got, lax_ragged(x.astype(jnp.float32), w.astype(jnp.float32), gs))
  local = n // mesh.shape[ax]
  assert ((m, k), (g, k, local), (g,)) in launches(cpu_ffi, GROUPED[0]), cpu_ffi


@needs8
@pytest.mark.parametrize("mesh_name", list(MESHES))
def test_ragged_dot_k_sharded_one_all_reduce(cpu_ffi, rng, mesh_name):
  """lhs and rhs sharded on K (row-parallel experts): local partials, one all-reduce, no
  more bytes than XLA's own ragged_dot under the same shardings."""
  mesh = mesh_of(mesh_name)
  _, ax = axes_of(mesh_name)
  m, k, n, g = 256, 512, 256, 4
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n)), random_sizes(rng, g, m)
  X, W = put(mesh, x, P(None, ax)), put(mesh, w, P(None, ax, None))
  ours, xla = collectives(ragged, X, W, gs), collectives(lax_ragged, X, W, gs)
  assert kinds(ours) == ["all-reduce"], (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  close(jax.jit(ragged)(X, W, gs), ragged(x, w, gs))
  assert ((m, k // mesh.shape[ax]), (g, k // mesh.shape[ax], n), (g,)) in launches(
      cpu_ffi, GROUPED[0])


@needs8
@pytest.mark.parametrize("mesh_name", ["8", "2x4"])
def test_ragged_dot_tokens_sharded_runs_locally(cpu_ffi, rng, mesh_name):
  """Tokens (M) sharded (data parallelism): each shard's group sizes are re-based to its
  rows, so the forward needs no collective (as XLA's ragged_dot) and the weight
  gradient sums exact per-shard partials with one all-reduce; values as unsharded."""
  mesh = mesh_of(mesh_name)
  d, _ = axes_of(mesh_name)
  m, k, n, g = 512, 256, 384, 6
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n)), random_sizes(rng, g, m)
  X, W = put(mesh, x, P(d, None)), put(mesh, w, P())
  ours = collectives(ragged, X, W, gs)
  xla = collectives(lambda x, w, s: jax.lax.ragged_dot(x, w, s), X, W, gs)
  assert ours == [], (ours, xla)
  close(jax.jit(ragged)(X, W, gs), ragged(x, w, gs))
  rows = m // mesh.shape[d]
  assert ((rows, k), (g, k, n), (g,)) in launches(cpu_ffi, GROUPED[0])
  loss = lambda x, w, s: jnp.sum(jax_sm100.ragged_dot(x, w, s).astype(jnp.float32) ** 2)
  grad = jax.grad(loss, (0, 1))
  co = collectives(grad, X, W, gs)
  cx = collectives(jax.grad(lambda x, w, s: jnp.sum(
      jax.lax.ragged_dot(x, w, s).astype(jnp.float32) ** 2), (0, 1)), X, W, gs)
  assert "all-gather" not in kinds(co), co
  assert total(co) <= total(cx), (co, cx)
  for got, want in zip(jax.jit(grad)(X, W, gs), grad(x, w, gs)):
    close(got, want, rel=2.0**-5)


@needs8
def test_ragged_dot_experts_sharded_is_gathered(cpu_ffi, rng):
  """Experts (G) sharded: no expert-parallel all-to-all is built, the weight is
  gathered (the documented fallback) and the result is still right."""
  mesh = mesh_of("2x4")
  m, k, n, g = 256, 256, 512, 4
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n)), random_sizes(rng, g, m)
  X, W = put(mesh, x, P()), put(mesh, w, P("data"))
  assert "all-gather" in kinds(collectives(ragged, X, W, gs))
  close(jax.jit(ragged)(X, W, gs), ragged(x, w, gs))
  assert ((m, k), (g, k, n), (g,)) in launches(cpu_ffi, GROUPED[0])


@needs8
@pytest.mark.parametrize("mesh_name", ["8", "2x4"])
@pytest.mark.parametrize("sharded", ["n", "k"])
def test_ragged_dot_grad_keeps_the_weight_sharded(cpu_ffi, rng, mesh_name, sharded):
  """The backward's products (dlhs: grouped with trans_rhs; drhs: K-grouped) follow the
  weight's sharding: no all-gather of it, no more bytes than XLA's ragged_dot gradient."""
  mesh = mesh_of(mesh_name)
  _, ax = axes_of(mesh_name)
  m, k, n, g = 256, 512, 512, 4
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n)), random_sizes(rng, g, m)
  if sharded == "n":
    X, W = put(mesh, x, P()), put(mesh, w, P(None, None, ax))
  else:
    X, W = put(mesh, x, P(None, ax)), put(mesh, w, P(None, ax, None))

  def grad(f):
    return jax.grad(lambda x, w: jnp.sum(f(x, w, gs).astype(jnp.float32) ** 2), (0, 1))
  ours, xla = collectives(grad(ragged), X, W), collectives(grad(lax_ragged), X, W)
  assert "all-gather" not in kinds(ours), ours
  assert total(ours) <= total(xla), (ours, xla)
  for got, want in zip(jax.jit(grad(ragged))(X, W), grad(ragged)(x, w)):
    close(got, want, rel=2.0**-5)
  assert {GROUPED[0], GROUPED[1]} <= {t for t, _, _ in cpu_ffi}


@needs8
def test_kgrouped_form_shards_k_and_n(cpu_ffi, rng):
  """ragged_dot_general's K-grouped form (G, K, N) with lhs sharded on K and dy on N:
  the output shards on both, no collective."""
  mesh = mesh_of("2x4")
  m, k, n, g = 256, 256, 512, 4
  x, dy, gs = bf16(rng, (m, k)), bf16(rng, (m, n)), random_sizes(rng, g, m)
  X, DY = put(mesh, x, P(None, "data")), put(mesh, dy, P(None, "model"))
  f = lambda x, dy: jax_sm100.ragged_dot_general(x, dy, gs, jax_sm100._grouped.KGROUPED_DIMS)
  assert collectives(f, X, DY) == []
  close(jax.jit(f)(X, DY), f(x, dy))
  assert ((m, k // 2), (m, n // 4), (g,)) in launches(cpu_ffi, GROUPED[1])


def fp8_experts(rng, g, n, k):
  """(b (G, N, K) e4m3, b_scale (G, N/128, K/128)) from random bf16 experts."""
  qs = [jax_sm100.quantize_fp8_blockwise(bf16(rng, (n, k), 0.1), block=(128, 128))
        for _ in range(g)]
  return jnp.stack([q for q, _ in qs]), jnp.stack([s for _, s in qs])


@needs8
@pytest.mark.parametrize("mesh_name", ["8", "2x4"])
@pytest.mark.parametrize("scale_t", [False, True])
def test_fp8_grouped_matmul_n_sharded_is_local(cpu_ffi, rng, mesh_name, scale_t):
  """b and its 128x128 scales sharded on N (whole blocks per shard): no collective."""
  mesh = mesh_of(mesh_name)
  _, ax = axes_of(mesh_name)
  m, k, n, g = 256, 384, 1024, 4
  aq, a_s = jax_sm100.quantize_fp8_blockwise(bf16(rng, (m, k)), scale_transposed=scale_t)
  bq, b_s = fp8_experts(rng, g, n, k)
  gs = random_sizes(rng, g, m)
  f = lambda *o: jax_sm100.fp8_grouped_matmul(*o, gs, a_scale_transposed=scale_t)
  args = (put(mesh, aq, P()), put(mesh, a_s, P()), put(mesh, bq, P(None, ax, None)),
          put(mesh, b_s, P(None, ax, None)))
  assert collectives(f, *args) == []
  close(jax.jit(f)(*args), f(aq, a_s, bq, b_s))
  local = [s for s in launches(cpu_ffi, GROUPED[2]) if s[2][1] == n // mesh.shape[ax]]
  assert local, cpu_ffi


@needs8
def test_fp8_grouped_matmul_k_sharded_all_reduces_or_refuses(cpu_ffi, rng):
  """K sharded on 128-element block boundaries: one all-reduce; inside a block: an error
  naming the mesh axis."""
  mesh = mesh_of("2x4")
  m, n, g = 128, 256, 2
  for k, ok in ((1024, True), (384, False)):
    aq, a_s = jax_sm100.quantize_fp8_blockwise(bf16(rng, (m, k)))
    bq, b_s = fp8_experts(rng, g, n, k)
    gs = random_sizes(rng, g, m)
    f = lambda *o: jax_sm100.fp8_grouped_matmul(*o, gs)
    args = (put(mesh, aq, P(None, "model")), put(mesh, a_s, P()),
            put(mesh, bq, P(None, None, "model")), put(mesh, b_s, P()))
    if ok:
      assert kinds(collectives(f, *args)) == ["all-reduce"]
      close(jax.jit(f)(*args), f(aq, a_s, bq, b_s))
    else:
      with pytest.raises(Exception, match="mesh axis 'model'.*128"):
        jax.jit(f).lower(*args).compile()


@needs8
def test_fp8_ragged_dot_n_sharded_is_local(cpu_ffi, rng):
  """fp8_ragged_dot with w sharded on N (whole 128-column blocks per shard): the
  quantization and the grouped FP8 product run on the local columns, no collective."""
  mesh = mesh_of("2x4")
  m, k, n, g = 256, 256, 1024, 4
  x, w, gs = bf16(rng, (m, k)), bf16(rng, (g, k, n), 0.1), random_sizes(rng, g, m)
  X, W = put(mesh, x, P()), put(mesh, w, P(None, None, "model"))
  f = lambda x, w: jax_sm100.fp8_ragged_dot(x, w, gs)
  assert collectives(f, X, W) == []
  close(jax.jit(f)(X, W), f(x, w), rel=2.0**-5)
  assert GROUPED[2] in {t for t, _, _ in cpu_ffi}
