#!/usr/bin/env python3
"""Train a Flax mixture-of-experts (MoE) MLP block through jax_sm100's grouped GEMMs.

The block: a router (softmax over E experts), top-k routing, the token copies sorted by
expert, two grouped products (jax_sm100.ragged_dot, or fp8_ragged_dot with --fp8) around
a GELU, the copies unsorted, weighted by their router probabilities and summed per token.
--impl xla runs the same block on jax.lax.ragged_dot (XLA's grouped dot) for comparison.
The task: classify Gaussian inputs by the argmax of a fixed random "teacher" network,
fresh batches every step. Prints the loss every --log-every steps, the step time after
the first steps, and the backend; exits 1 if the loss did not decrease.

  python examples/moe.py --steps 40 --log-every 10          # CPU, reference path: seconds
  python examples/moe.py --fp8 --steps 40 --log-every 10
  # GPU (H100/H200), a few hundred steps at MoE expert shapes:
  python examples/moe.py --steps 300 --tokens 8192 --d-model 2048 --d-ff 1408 \\
      --experts 32 --top-k 4 [--fp8 | --impl xla] [--json curve.json]
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


def grouped_dot(impl: str, fp8: bool):
  """The grouped product (x (T, K), w (E, K, N), group_sizes (E,)) -> (T, N) in bf16."""
  if impl == "xla":
    return lambda x, w, gs: jax.lax.ragged_dot(x, w, gs)
  if fp8:
    return lambda x, w, gs: jax_sm100.fp8_ragged_dot(x, w, gs, out_dtype=jnp.bfloat16)
  return jax_sm100.ragged_dot


class MoEBlock(nn.Module):
  """x (T, D) -> (T, D): top-k routed expert MLPs (D -> F -> D per expert), bf16 compute."""
  experts: int
  d_ff: int
  top_k: int
  dot: callable

  @nn.compact
  def __call__(self, x):
    t, d = x.shape
    e, k = self.experts, self.top_k
    logits = nn.Dense(e, use_bias=False, name="router")(x.astype(jnp.float32))
    probs = jax.nn.softmax(logits, axis=-1)
    top_p, top_e = jax.lax.top_k(probs, k)                     # (T, k)
    top_p = top_p / jnp.sum(top_p, axis=-1, keepdims=True)
    # Sort the T*k token copies by expert: each expert's rows are then contiguous.
    flat_e = top_e.reshape(-1)
    order = jnp.argsort(flat_e, stable=True)
    token = order // k                                         # the token of each sorted row
    group_sizes = jnp.bincount(flat_e, length=e).astype(jnp.int32)
    init = nn.initializers.variance_scaling(1.0, "fan_in", "normal", in_axis=1, out_axis=2)
    w_in = self.param("w_in", init, (e, d, self.d_ff))
    w_out = self.param("w_out", init, (e, self.d_ff, d))
    xs = x.astype(jnp.bfloat16)[token]                         # (T*k, D), sorted
    h = nn.gelu(self.dot(xs, w_in.astype(jnp.bfloat16), group_sizes))
    ys = self.dot(h.astype(jnp.bfloat16), w_out.astype(jnp.bfloat16), group_sizes)
    # Unsort and combine: each copy weighted by its router probability, summed per token.
    weight = top_p.reshape(-1)[order]
    y = jnp.zeros((t, d), jnp.float32).at[token].add(ys.astype(jnp.float32) * weight[:, None])
    # Switch-style load balancing: E * sum_e (fraction of copies to e) * (mean prob of e).
    balance = e * jnp.sum(group_sizes / (t * k) * jnp.mean(probs, axis=0))
    return y, balance


class Model(nn.Module):
  d_model: int
  experts: int
  d_ff: int
  top_k: int
  classes: int
  dot: callable

  @nn.compact
  def __call__(self, x):
    h = nn.Dense(self.d_model, name="embed")(x)
    y, balance = MoEBlock(self.experts, self.d_ff, self.top_k, self.dot, name="moe")(
        nn.LayerNorm()(h))
    h = h + y
    return nn.Dense(self.classes, name="head")(nn.LayerNorm()(h)), balance


def make_teacher(key, d_in, classes):
  k1, k2 = jax.random.split(key)
  w1 = jax.random.normal(k1, (d_in, 64)) / np.sqrt(d_in)
  w2 = jax.random.normal(k2, (64, classes)) / 8.0
  return lambda x: jnp.argmax(jnp.tanh(x @ w1) @ w2, axis=-1)


def train(args):
  variant = "xla" if args.impl == "xla" else ("fp8" if args.fp8 else "bf16")
  model = Model(args.d_model, args.experts, args.d_ff, args.top_k, args.classes,
                grouped_dot(args.impl, args.fp8))
  key = jax.random.key(args.seed)
  k_teacher, k_init, k_data = jax.random.split(key, 3)
  teacher = make_teacher(k_teacher, args.d_in, args.classes)
  params = model.init(k_init, jnp.zeros((args.tokens, args.d_in)))
  opt = optax.adam(args.lr)
  opt_state = opt.init(params)

  def loss_fn(params, x, y):
    logits, balance = model.apply(params, x)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), y).mean()
    return ce + args.balance * balance, ce

  @jax.jit
  def step(params, opt_state, k):
    x = jax.random.normal(k, (args.tokens, args.d_in))
    (_, ce), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, teacher(x))
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, ce

  losses, logged, window = [], [], []
  warm = min(5, args.steps - 1)
  t0 = t_warm = time.perf_counter()
  for i, k in enumerate(jax.random.split(k_data, args.steps), start=1):
    params, opt_state, loss = step(params, opt_state, k)
    window.append(loss)
    if i == warm:
      jax.block_until_ready(loss)
      t_warm = time.perf_counter()
    if i % args.log_every == 0 or i == args.steps:
      losses.append(float(np.mean([float(v) for v in window])))
      logged.append(i)
      window = []
      print(f"[{variant}] step {i:5d}  loss {losses[-1]:.4f}", flush=True)
  jax.block_until_ready(params)
  t_end = time.perf_counter()
  step_ms = (t_end - t_warm) / max(args.steps - warm, 1) * 1e3
  ok = len(losses) >= 2 and losses[-1] < 0.9 * losses[0]
  print(f"[{variant}] loss {losses[0]:.4f} -> {losses[-1]:.4f} in {t_end - t0:.1f}s "
        f"({step_ms:.2f} ms/step after {warm} steps): "
        f"{'decreased' if ok else 'DID NOT DECREASE'}", flush=True)
  return ok, {"variant": variant, "steps": logged, "loss": losses, "step_ms": step_ms}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--impl", choices=["jax_sm100", "xla"], default="jax_sm100",
                 help="the grouped products: jax_sm100's ops or jax.lax.ragged_dot")
  p.add_argument("--fp8", action="store_true", help="jax_sm100.fp8_ragged_dot (FP8 recipe)")
  p.add_argument("--steps", type=int, default=60)
  p.add_argument("--tokens", type=int, default=256, help="tokens per batch")
  p.add_argument("--d-in", type=int, default=64)
  p.add_argument("--d-model", type=int, default=128)
  p.add_argument("--d-ff", type=int, default=256)
  p.add_argument("--experts", type=int, default=8)
  p.add_argument("--top-k", type=int, default=2)
  p.add_argument("--classes", type=int, default=10)
  p.add_argument("--balance", type=float, default=0.01, help="load-balancing loss weight")
  p.add_argument("--lr", type=float, default=3e-3)
  p.add_argument("--log-every", type=int, default=15)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--json", help="write the loss curve, step time, device and backend here")
  args = p.parse_args(argv)
  if args.steps < 2 * args.log_every:
    p.error("--steps must be at least 2 * --log-every (two loss averages to compare)")
  if args.fp8 and args.impl == "xla":
    p.error("--fp8 runs jax_sm100.fp8_ragged_dot; XLA has no FP8 grouped product")
  dev = jax.devices()[0]
  print(f"jax_sm100.backend() = {jax_sm100.backend()!r}  (device: {dev.device_kind}, "
        f"jax {jax.__version__})", flush=True)
  ok, curve = train(args)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"backend": jax_sm100.backend(), "device": dev.device_kind,
                 "jax": jax.__version__, "args": vars(args), **curve}, f, indent=1)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
