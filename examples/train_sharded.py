#!/usr/bin/env python3
"""Train a Flax MLP block sharded over a data x tensor-parallel mesh, through jax_sm100.

The model is a stack of transformer-style MLP blocks (x + W2 gelu(W1 x)) in the
Megatron layout: W1 column-parallel (its N over the 'model' axis), W2 row-parallel
(its K over 'model'), the batch over 'data'. Every Dense runs jax_sm100.dot_general
(bf16) or jax_sm100.fp8_dot_general (FP8 blockwise); the ops' partitioning rules
make each block one local GEMM, one local GEMM and one all-reduce, with no gather
of a tensor-parallel weight: the script checks that in the compiled step's HLO.

  python examples/train_sharded.py                 # 8 CPU host devices (set below)
  python examples/train_sharded.py --tp 2 --hidden 4096 --batch 16384 --steps 200   # GPUs
"""
from __future__ import annotations

import os

# 8 host devices when there is no GPU; the flag must precede jax's initialisation and
# leaves GPU platforms alone.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8").strip()

import argparse  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

import jax_sm100  # noqa: E402
from jax_sm100.flax import Dense, Fp8Dense  # noqa: E402


class Block(nn.Module):
  dense: type
  width: int
  hidden: int

  @nn.compact
  def __call__(self, x):
    h = self.dense(self.hidden, use_bias=False, dtype=jnp.bfloat16, name="up")(x)
    h = nn.gelu(h)
    return x + self.dense(self.width, use_bias=False, dtype=jnp.bfloat16, name="down")(h)


class Model(nn.Module):
  dense: type
  width: int
  hidden: int
  depth: int

  @nn.compact
  def __call__(self, x):
    for i in range(self.depth):
      x = Block(self.dense, self.width, self.hidden, name=f"block{i}")(x)
    return x


def param_specs(params):
  """Megatron layout: 'up' kernels (width, hidden) split hidden, 'down' kernels
  (hidden, width) split hidden, over 'model'."""
  def spec(path, _):
    name = "/".join(str(getattr(k, "key", k)) for k in path)
    return P(None, "model") if "/up/" in f"/{name}/" else P("model", None)
  return jax.tree_util.tree_map_with_path(spec, params)


def make_step(model, tx, mesh, pspecs):
  shard = lambda s: NamedSharding(mesh, s)
  p_sh = jax.tree.map(shard, pspecs)
  batch_sh = shard(P("data", None))

  def loss_fn(params, x, y):
    out = model.apply({"params": params}, x)
    return jnp.mean((out.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)

  def step(params, opt, x, y):
    loss, g = jax.value_and_grad(loss_fn)(params, x, y)
    upd, opt = tx.update(g, opt, params)
    return optax.apply_updates(params, upd), opt, loss

  return jax.jit(step, in_shardings=(p_sh, None, batch_sh, batch_sh),
                 out_shardings=(p_sh, None, None), donate_argnums=(0, 1)), p_sh, batch_sh


def weight_gathers(compiled_text: str, shapes) -> int:
  """All-gathers whose result is a tensor-parallel weight's full shape."""
  n = 0
  for shape in re.findall(r"= \w+\[([\d,]+)\][^=]*? all-gather(?:-start)?\(", compiled_text):
    n += tuple(int(d) for d in shape.split(",")) in shapes
  return n


def run(variant: str, args) -> dict:
  n = len(jax.devices())
  tp = args.tp if n % args.tp == 0 else 1  # e.g. one GPU: a 1 x 1 mesh
  if tp != args.tp:
    print(f"--tp {args.tp} does not divide {n} device(s): tensor-parallel axis of 1")
  mesh = jax.make_mesh((n // tp, tp), ("data", "model"),
                       axis_types=(AxisType.Auto,) * 2)
  # "xla": the same model on flax's own Dense (XLA's dot), for the step-time comparison.
  dense = {"bf16": Dense, "fp8": Fp8Dense, "xla": nn.Dense}[variant]
  model = Model(dense, args.width, args.hidden, args.depth)
  rng = np.random.default_rng(0)
  teacher = jnp.asarray(rng.standard_normal((args.width, args.width)) / np.sqrt(args.width))
  x0 = jnp.zeros((args.batch, args.width), jnp.bfloat16)
  params = model.init(jax.random.key(0), x0)["params"]
  tx = optax.adam(args.lr)
  step, p_sh, b_sh = make_step(model, tx, mesh, param_specs(params))
  params = jax.device_put(params, p_sh)
  opt = tx.init(params)

  def batch(i):
    x = jax.random.normal(jax.random.key(i), (args.batch, args.width), jnp.float32)
    return (jax.device_put(x.astype(jnp.bfloat16), b_sh),
            jax.device_put(jnp.tanh(x @ teacher).astype(jnp.bfloat16), b_sh))

  x, y = batch(1)
  text = step.lower(params, opt, x, y).compile().as_text()
  tp_shapes = {(args.width, args.hidden), (args.hidden, args.width)}
  gathers = weight_gathers(text, tp_shapes)
  losses, t0 = [], None
  for i in range(args.steps):
    x, y = batch(i + 1)
    params, opt, loss = step(params, opt, x, y)
    losses.append(float(loss))
    if i == 0:
      t0 = time.perf_counter()
  dt = (time.perf_counter() - t0) / max(args.steps - 1, 1)
  print(f"{variant}: mesh {dict(mesh.shape)}, backend {jax_sm100.backend()}, "
        f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, {dt * 1e3:.1f} ms/step, "
        f"tensor-parallel weight all-gathers in the step: {gathers}")
  return dict(losses=losses, weight_gathers=gathers, step_s=dt)


def parse(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--steps", type=int, default=20)
  p.add_argument("--tp", type=int, default=2, help="tensor-parallel ('model') axis size")
  p.add_argument("--width", type=int, default=256)
  p.add_argument("--hidden", type=int, default=1024)
  p.add_argument("--depth", type=int, default=2)
  p.add_argument("--batch", type=int, default=1024)
  p.add_argument("--lr", type=float, default=3e-3)
  p.add_argument("--variants", default="bf16,fp8",
                 help="comma-separated: bf16, fp8 (our dot_generals), xla (flax's Dense)")
  return p.parse_args(argv)


def main(argv=None) -> dict:
  args = parse(argv)
  out = {v: run(v, args) for v in args.variants.split(",")}
  for v, r in out.items():
    if r["weight_gathers"] or not r["losses"][-1] < r["losses"][0]:
      print(f"{v}: FAILED (loss did not decrease, or a tensor-parallel weight was gathered)")
      sys.exit(1)
  return out


if __name__ == "__main__":
  main()
