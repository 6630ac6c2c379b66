#!/usr/bin/env python3
"""Train a small Flax MLP on synthetic data through jax_sm100's ops.

Two variants of the same model:
  bf16: every Dense layer runs jax_sm100.dot_general (bf16 matmul kernel on an
        sm_90a GPU, the reference path elsewhere);
  fp8:  every Dense layer runs jax_sm100.fp8_dot_general (DeepSeek-style FP8
        blockwise matmuls, forward and backward).
With --fused the hidden layers are DenseAct / Fp8DenseAct (activation="gelu"): the
bias add and the gelu run in the GEMM's epilogue (jax_sm100.matmul_bias,
fp8_dot(bias=, activation=)) instead of in XLA after the layer. With --block the whole
model is one jax_sm100.flax.MLPBlock (bf16, jax_sm100.mlp: the forward as --fused, and in
the backward each gelu's derivative and bias gradient in the epilogue of the GEMM that
computes the gradient flowing into it) or Fp8MLPBlock (fp8, jax_sm100.fp8_mlp: each gelu
and its backward inside the FP8 quantizers that read the layer's output and gradient).
The task: classify Gaussian inputs by the argmax of a fixed random "teacher"
MLP (learnable, fresh batches every step). Prints the loss every --log-every
steps and the backend that ran; exits 1 if a variant's loss did not decrease.

  python examples/train_mlp.py                      # CPU: a few seconds
  python examples/train_mlp.py --steps 2000 --hidden 4096 --batch 8192   # GPU
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn

import jax_sm100
from jax_sm100.flax import Dense, DenseAct, Fp8Dense, Fp8DenseAct, Fp8MLPBlock, MLPBlock


class MLP(nn.Module):
  """hidden -> gelu -> ... -> classes, with the given Dense layer class; with act_dense
  (a DenseAct-like class) the hidden layers are act_dense(activation="gelu") instead."""
  dense: type
  hidden: int
  depth: int
  classes: int
  act_dense: type | None = None

  @nn.compact
  def __call__(self, x):
    for _ in range(self.depth):
      if self.act_dense is not None:
        x = self.act_dense(self.hidden, dtype=jnp.bfloat16, activation="gelu")(x)
      else:
        x = nn.gelu(self.dense(self.hidden, dtype=jnp.bfloat16)(x))
    return self.dense(self.classes, dtype=jnp.bfloat16)(x).astype(jnp.float32)


LAYERS = {"bf16": (Dense, DenseAct), "fp8": (Fp8Dense, Fp8DenseAct)}


class Block(nn.Module):
  """The same model as one MLPBlock, or Fp8MLPBlock with fp8 (its output cast to f32 as
  MLP's)."""
  hidden: int
  depth: int
  classes: int
  fp8: bool = False

  @nn.compact
  def __call__(self, x):
    block = Fp8MLPBlock if self.fp8 else MLPBlock
    y = block((self.hidden,) * self.depth + (self.classes,), activation="gelu",
              dtype=jnp.bfloat16)(x)
    return y.astype(jnp.float32)


def make_model(variant, hidden, depth, classes, fused=False, block=False):
  """The example's MLP for a variant ('bf16' or 'fp8'), hidden layers fused or not, or
  (block) the whole model as one MLPBlock / Fp8MLPBlock."""
  if block:
    return Block(hidden, depth, classes, fp8=variant == "fp8")
  dense, act_dense = LAYERS[variant]
  return MLP(dense, hidden, depth, classes, act_dense if fused else None)


def make_teacher(key, d_in, classes):
  k1, k2 = jax.random.split(key)
  w1 = jax.random.normal(k1, (d_in, 64)) / np.sqrt(d_in)
  w2 = jax.random.normal(k2, (64, classes)) / 8.0
  return lambda x: jnp.argmax(jnp.tanh(x @ w1) @ w2, axis=-1)


def train(variant, args):
  model = make_model(variant, args.hidden, args.depth, args.classes, args.fused,
                     getattr(args, "block", False))
  key = jax.random.key(args.seed)
  k_teacher, k_init, k_data = jax.random.split(key, 3)
  teacher = make_teacher(k_teacher, args.d_in, args.classes)
  params = model.init(k_init, jnp.zeros((1, args.d_in)))
  opt = optax.adam(args.lr)
  opt_state = opt.init(params)

  def loss_fn(params, x, y):
    logits = model.apply(params, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

  @jax.jit
  def step(params, opt_state, k):
    x = jax.random.normal(k, (args.batch, args.d_in))
    loss, grads = jax.value_and_grad(loss_fn)(params, x, teacher(x))
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  losses, logged_steps, window = [], [], []
  t0 = time.perf_counter()
  for i, k in enumerate(jax.random.split(k_data, args.steps), start=1):
    params, opt_state, loss = step(params, opt_state, k)
    window.append(float(loss))
    if i % args.log_every == 0 or i == args.steps:
      losses.append(float(np.mean(window)))
      logged_steps.append(i)
      window = []
      print(f"[{variant}] step {i:5d}  loss {losses[-1]:.4f}", flush=True)
  dt = time.perf_counter() - t0
  first, last = losses[0], losses[-1]
  ok = len(losses) >= 2 and last < 0.9 * first
  print(f"[{variant}] loss {first:.4f} -> {last:.4f} in {dt:.1f}s: "
        f"{'decreased' if ok else 'DID NOT DECREASE'}", flush=True)
  return ok, {"steps": logged_steps, "loss": losses, "seconds": dt}


def _save_curves(args, curves):
  """--json / --png: the loss curves of every variant, for docs/."""
  dev = jax.devices()[0]
  record = {"backend": jax_sm100.backend(), "device": dev.device_kind,
            "jax": jax.__version__, "args": vars(args), "curves": curves}
  if args.json:
    with open(args.json, "w") as f:
      json.dump(record, f, indent=1)
  if args.png:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for variant, c in curves.items():
      ax.plot(c["steps"], c["loss"], label=variant)
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (mean over {args.log_every} steps)")
    ax.set_title(f"MLP through jax_sm100 ({record['backend']}, {dev.device_kind})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--variant", choices=["bf16", "fp8", "both"], default="both")
  p.add_argument("--steps", type=int, default=300)
  p.add_argument("--batch", type=int, default=256)
  p.add_argument("--d-in", type=int, default=64)
  p.add_argument("--hidden", type=int, default=256)
  p.add_argument("--depth", type=int, default=2, help="number of hidden layers")
  p.add_argument("--classes", type=int, default=10)
  p.add_argument("--lr", type=float, default=3e-3)
  p.add_argument("--log-every", type=int, default=50)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--fused", action="store_true",
                 help="hidden layers DenseAct / Fp8DenseAct (bias + gelu in the GEMM epilogue)")
  p.add_argument("--block", action="store_true",
                 help="the model as one MLPBlock (bf16, jax_sm100.mlp) or Fp8MLPBlock "
                      "(fp8, jax_sm100.fp8_mlp)")
  p.add_argument("--json", help="write the loss curves (and device, backend) to this JSON file")
  p.add_argument("--png", help="plot the loss curves to this PNG file (needs matplotlib)")
  args = p.parse_args(argv)
  if args.steps < 2 * args.log_every:
    p.error("--steps must be at least 2 * --log-every (two loss averages to compare)")

  dev = jax.devices()[0]
  print(f"jax_sm100.backend() = {jax_sm100.backend()!r}  (device: {dev.device_kind}, "
        f"jax {jax.__version__})", flush=True)
  variants = ["bf16", "fp8"] if args.variant == "both" else [args.variant]
  runs = {v: train(v, args) for v in variants}
  results = {v: ok for v, (ok, _) in runs.items()}
  if args.json or args.png:
    _save_curves(args, {v: curve for v, (_, curve) in runs.items()})
  if not all(results.values()):
    print(f"FAILED: the loss did not decrease for {[v for v, ok in results.items() if not ok]}")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
