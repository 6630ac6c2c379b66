"""The partitioning rules with the kernel path on two GPUs (sm_90a).

The same sharding patterns as tests/test_sharding.py (which runs them on 8 CPU host
devices through the FFI targets' CPU handlers), here on meshes of two GPUs where every
product runs the compiled kernels: each case checks the compiled program's collectives
against the hand-written expectation and against XLA's own jnp.dot under the same
shardings (ours may not move more bytes), that the kernel's custom call is in the
program, and the result against the unsharded kernel call. The sharded training example
runs too: no tensor-parallel weight is all-gathered, the loss falls, and its step time is
printed beside the same model on XLA's dot.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, PartitionSpec as P

import jax_sm100

sys.path.insert(0, os.path.dirname(__file__))
from test_sharding import bf16, close, collectives, kinds, put, total  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(jax.device_count() < 2 or jax_sm100.backend() != "sm90",
                       reason="needs two sm_90 GPUs (H100/H200) with the kernels"),
]

MESHES = {"2": ((2,), ("x",)), "1x2": ((1, 2), ("data", "model")),
          "2x1": ((2, 1), ("data", "model"))}


def mesh_of(name):
  shape, axes = MESHES[name]
  return jax.make_mesh(shape, axes, axis_types=(AxisType.Auto,) * len(axes),
                       devices=jax.devices()[:2])


def patterns(name):
  axes = MESHES[name][1]
  d, m = axes[0], axes[-1]
  sizes = dict(zip(axes, MESHES[name][0]))
  reduce = ["all-reduce"] if sizes[m] > 1 else []
  return {
      "data": (P(d, None), P(), []),
      "column": (P(), P(None, m), []),
      "row": (P(None, m), P(m, None), reduce),
      "fsdp": (P(d, None), P(d, None), ["all-gather"] if sizes[d] > 1 else []),
  }


CASES = [(mesh, pat) for mesh in MESHES for pat in ("data", "column", "row", "fsdp")]


def launches(fn, *args):
  """The jax_sm100 custom-call targets in the compiled program."""
  text = jax.jit(fn).lower(*args).compile().as_text()
  return {t for t in ("jax_sm100_gemm", "jax_sm100_gemm_residual", "jax_sm100_fp8_gemm",
                      "jax_sm100_quantize_fp8", "jax_sm100_quantize_fp8_dual")
          if f'custom_call_target="{t}"' in text}


@pytest.fixture
def rng():
  return np.random.default_rng(1234)


@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_patterns_on_gpus(rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  m = 4096 if pattern == "fsdp" else 512
  a, b = bf16(rng, (m, 1024)), bf16(rng, (1024, 2048))
  A, B = put(mesh, a, sa), put(mesh, b, sb)
  ours = collectives(jax_sm100.matmul, A, B)
  xla = collectives(lambda a, b: jnp.dot(a, b), A, B)
  assert kinds(ours) == want, (ours, xla)
  assert total(ours) <= total(xla), (ours, xla)
  assert "jax_sm100_gemm" in launches(jax_sm100.matmul, A, B)
  close(jax.jit(jax_sm100.matmul)(A, B), jax_sm100.matmul(a, b))


@pytest.mark.parametrize("mesh_name,pattern", CASES)
def test_matmul_residual_and_grad_on_gpus(rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  a, b, c = bf16(rng, (512, 1024)), bf16(rng, (1024, 2048)), bf16(rng, (512, 2048), 8.0)
  A, B, C = put(mesh, a, sa), put(mesh, b, sb), put(mesh, c, P())
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=2.0)
  if pattern != "fsdp":
    assert kinds(collectives(f, A, B, C)) == want
  assert "jax_sm100_gemm_residual" in launches(f, A, B, C)
  close(jax.jit(f)(A, B, C), f(a, b, c))
  g = jax.grad(lambda a, b, c: jnp.sum(jax_sm100.matmul_residual(a, b, c).astype(jnp.float32) ** 2),
               argnums=(0, 1, 2))
  gx = jax.grad(lambda a, b, c: jnp.sum((jnp.dot(a, b) + c).astype(jnp.float32) ** 2),
                argnums=(0, 1, 2))
  co, cx = collectives(g, A, B, C), collectives(gx, A, B, C)
  assert total(co) <= total(cx), (co, cx)
  assert "all-gather" not in kinds(co) or pattern == "fsdp", co
  for got, ref in zip(jax.jit(g)(A, B, C), g(a, b, c)):
    close(got, ref, rel=2.0**-5)


@pytest.mark.parametrize("mesh_name,pattern", [c for c in CASES if c[1] != "fsdp"])
def test_fp8_dot_on_gpus(rng, mesh_name, pattern):
  mesh = mesh_of(mesh_name)
  sa, sb, want = patterns(mesh_name)[pattern]
  x, w = bf16(rng, (2048, 1024)), bf16(rng, (1024, 1024), 0.05)
  X, W = put(mesh, x, sa), put(mesh, w, sb)
  f = lambda x, w: jax_sm100.fp8_dot(x, w)
  assert kinds(collectives(f, X, W)) == want
  assert "jax_sm100_fp8_gemm" in launches(f, X, W)
  close(jax.jit(f)(X, W), f(x, w), rel=2.0**-5)
  g = jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2), (0, 1))
  gx = jax.grad(lambda x, w: jnp.sum(jnp.dot(x, w).astype(jnp.float32) ** 2), (0, 1))
  co, cx = collectives(g, X, W), collectives(gx, X, W)
  assert "all-gather" not in kinds(co), co
  assert total(co) <= total(cx), (co, cx)
  for got, ref in zip(jax.jit(g)(X, W), g(x, w)):
    close(got, ref, rel=2.0**-4)


def test_row_parallel_sharded_output_on_gpus(rng):
  """K and the output's M sharded over one axis: one reduce-scatter of the partials."""
  from jax.sharding import NamedSharding
  mesh = mesh_of("2")
  a, b = bf16(rng, (512, 1024)), bf16(rng, (1024, 2048))
  A, B = put(mesh, a, P(None, "x")), put(mesh, b, P("x", None))
  f = jax.jit(jax_sm100.matmul, out_shardings=NamedSharding(mesh, P("x", None)))
  text = f.lower(A, B).compile().as_text()
  assert "reduce-scatter" in text and "all-reduce" not in text and "all-gather" not in text
  assert 'custom_call_target="jax_sm100_gemm"' in text
  close(f(A, B), jax_sm100.matmul(a, b))


def test_train_sharded_example_on_gpus():
  """examples/train_sharded.py on a 1 x 2 data x model mesh of two GPUs: the kernels run,
  no tensor-parallel weight is all-gathered, the loss falls; step times beside XLA's dot."""
  path = os.path.join(os.path.dirname(__file__), "..", "examples", "train_sharded.py")
  spec = importlib.util.spec_from_file_location("train_sharded", path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["train_sharded"] = mod
  spec.loader.exec_module(mod)
  out = mod.main(["--tp", "2", "--steps", "30", "--width", "1024", "--hidden", "4096",
                  "--batch", "8192", "--lr", "3e-4", "--variants", "bf16,fp8,xla"])
  for variant in ("bf16", "fp8"):
    assert out[variant]["weight_gathers"] == 0, out
    assert out[variant]["losses"][-1] < out[variant]["losses"][0], out
  print({v: round(r["step_s"] * 1e3, 2) for v, r in out.items()}, "ms/step")
