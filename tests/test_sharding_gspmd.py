"""The partitioning rules under GSPMD (jax_use_shardy_partitioner=False), on 8 CPU host
devices with the FFI targets' CPU handlers (cpu_ffi).

JAX partitions with Shardy by default (tests/test_sharding.py) and deprecates GSPMD; the
rules carry GSPMD's callback too (infer_sharding_from_operands), and this file holds them
to: the bf16 GEMM patterns give exactly the hand-written program's collectives and never
more bytes than XLA's dot; fp8_dot gives the unsharded call's values (GSPMD's propagation
around the quantizers can add gathers that Shardy avoids: counted, not required to
match); an FP8 K shard that splits a 128-block, an error under Shardy, is gathered with a
warning (GSPMD aborts the process on an exception raised in the partitioner's callback).

On a process with fewer devices, test_gspmd_suite re-runs this file in an 8-device child.
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import jax_sm100

sys.path.insert(0, os.path.dirname(__file__))
from test_sharding import (CASES, FP8_CASES, MESHES, bf16, close, collectives,  # noqa: E402
                           in_parent, kinds, mesh_of, needs8, patterns, put,
                           run_in_8_device_child, total)


@in_parent
def test_gspmd_suite(tmp_path):
  run_in_8_device_child(__file__, tmp_path)


@pytest.fixture
def gspmd(cpu_ffi):
  """GSPMD instead of Shardy for the test's traces; the cpu_ffi launches traced."""
  prev = jax.config.jax_use_shardy_partitioner
  jax.config.update("jax_use_shardy_partitioner", False)
  jax.clear_caches()
  yield cpu_ffi
  jax.config.update("jax_use_shardy_partitioner", prev)
  jax.clear_caches()


@needs8
@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_patterns_under_gspmd(gspmd, rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  m = 4096 if pattern == "fsdp" else 256
  a, b = bf16(rng, (m, 512)), bf16(rng, (512, 1024))
  A, B = put(mesh, a, sa), put(mesh, b, sb)
  ours = collectives(jax_sm100.matmul, A, B)
  xla = collectives(lambda a, b: jnp.dot(a, b), A, B)
  assert kinds(ours) == want, (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  assert any(t == "jax_sm100_gemm" for t, _, _ in gspmd)
  close(jax.jit(jax_sm100.matmul)(A, B), jax_sm100.matmul(a, b))


@needs8
@pytest.mark.parametrize("mesh_name", list(MESHES))
@pytest.mark.parametrize("pattern", ["column", "row"])
def test_matmul_residual_and_grad_under_gspmd(gspmd, rng, mesh_name, pattern):
  """beta*C once per K shard set; the gradient's products move no more than XLA's."""
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  a, b, c = bf16(rng, (256, 512)), bf16(rng, (512, 1024)), bf16(rng, (256, 1024), 8.0)
  A, B, C = put(mesh, a, sa), put(mesh, b, sb), put(mesh, c, P())
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0)
  assert kinds(collectives(f, A, B, C)) == want
  close(jax.jit(f)(A, B, C), f(a, b, c))
  g = jax.grad(lambda a, b, c: jnp.sum(f(a, b, c).astype(jnp.float32) ** 2), (0, 1, 2))
  gx = jax.grad(lambda a, b, c: jnp.sum((0.5 * jnp.dot(a, b) + 2.0 * c).astype(jnp.float32)
                                        ** 2), (0, 1, 2))
  co, cx = collectives(g, A, B, C), collectives(gx, A, B, C)
  assert total(co) <= total(cx), (co, cx)
  for got, ref in zip(jax.jit(g)(A, B, C), g(a, b, c)):
    close(got, ref, rel=2.0**-5)


@needs8
@pytest.mark.parametrize("mesh_name,pattern", [c for c in FP8_CASES if c[0] == "2x4"])
def test_fp8_dot_values_under_gspmd(gspmd, rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, _ = patterns(mesh_name)[pattern]
  x, w = bf16(rng, (2048, 1024)), bf16(rng, (1024, 1024), 0.05)
  X, W = put(mesh, x, sa), put(mesh, w, sb)
  f = lambda x, w: jax_sm100.fp8_dot(x, w)
  close(jax.jit(f)(X, W), f(x, w), rel=2.0**-5)
  assert "jax_sm100_fp8_gemm" in {t for t, _, _ in gspmd}
  g = jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2), (0, 1))
  for got, ref in zip(jax.jit(g)(X, W), g(x, w)):
    close(got, ref, rel=2.0**-4)


@needs8
def test_fp8_k_split_inside_a_block_is_gathered_under_gspmd(gspmd, rng):
  mesh = mesh_of("2x4")
  a = jnp.asarray(rng.standard_normal((128, 384)), jnp.float8_e4m3fn)
  b = jnp.asarray(rng.standard_normal((256, 384)), jnp.float8_e4m3fn)
  sa = jnp.asarray(rng.uniform(0.5, 2.0, (128, 3)), jnp.float32)
  sb = jnp.asarray(rng.uniform(0.5, 2.0, (2, 3)), jnp.float32)
  args = (put(mesh, a, P(None, "model")), put(mesh, sa, P()), put(mesh, b, P(None, "model")),
          put(mesh, sb, P()))
  with pytest.warns(UserWarning, match="mesh axis 'model'.*128.*gathered"):
    got = jax.jit(jax_sm100.fp8_blockwise_matmul)(*args)
  close(got, jax_sm100.fp8_blockwise_matmul(a, sa, b, sb))
