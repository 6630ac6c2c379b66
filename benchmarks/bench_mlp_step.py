"""Training step of the Flax MLP example (examples/train_mlp.py's model) with fused Dense
layers against the same model with our plain ops and with XLA's, side by side in one
process (issue 30's step target: fused >= 1.10x plain, bf16 and FP8).

    python benchmarks/bench_mlp_step.py [--out step.json] [--batch 8192 --d-in 64
        --hidden 4096 --depth 2] [--kernels [--hlo DIR]]

Variants (hidden layers gelu, the output layer plain Dense):
  xla         flax.linen.Dense + nn.gelu (XLA's dot)
  plain       jax_sm100.flax.Dense + nn.gelu (our GEMM, XLA's bias + gelu pass)
  fused       jax_sm100.flax.DenseAct(activation="gelu") (bias and gelu in the epilogue)
  block       jax_sm100.flax.MLPBlock (jax_sm100.mlp): fused's forward, and each gelu's
              derivative and bias gradient in the epilogue of the GEMM above it
  fp8_plain   jax_sm100.flax.Fp8Dense + nn.gelu
  fp8_fused   jax_sm100.flax.Fp8DenseAct(activation="gelu")
  fp8_block   jax_sm100.flax.Fp8MLPBlock (jax_sm100.fp8_mlp): each gelu and its backward
              inside the FP8 quantizers that read the layer's output and gradient
One step: loss and gradients (softmax cross-entropy) and an Adam update, jitted, over
distinct batches and parameter sets. Wall time (benchmarks/common.time_jax) and GPU time
(CUPTI, with torch). --kernels adds each variant's GPU time per kernel name (top 25, one
step), to see which passes a variant adds or removes; --hlo DIR writes the compiled step
whose fusion names those kernels carry.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _torch, git_commit, gpu_time_jax, kernel_table, time_jax  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402

import jax_sm100  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import train_mlp  # noqa: E402


def make_model(kind, args):
  """examples/train_mlp.py's model for one variant (XLA's: its MLP with flax's Dense)."""
  if kind == "xla":
    return train_mlp.MLP(nn.Dense, args.hidden, args.depth, args.classes)
  variant = "fp8" if kind.startswith("fp8") else "bf16"
  return train_mlp.make_model(variant, args.hidden, args.depth, args.classes,
                              fused=kind.endswith("fused"), block=kind.endswith("block"))


VARIANTS = ("xla", "plain", "fused", "block", "fp8_plain", "fp8_fused", "fp8_block")


def make_step(kind, args):
  model = make_model(kind, args)
  opt = optax.adam(1e-3)

  def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(model.apply(params, x), y).mean()

  def step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  def make_set(key):
    k1, k2, k3 = jax.random.split(key, 3)
    params = model.init(k1, jnp.zeros((1, args.d_in)))
    x = jax.random.normal(k2, (args.batch, args.d_in))
    y = jax.random.randint(k3, (args.batch,), 0, args.classes)
    return params, opt.init(params), x, y

  return step, make_set


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--batch", type=int, default=8192)
  ap.add_argument("--d-in", type=int, default=64)
  ap.add_argument("--hidden", type=int, default=4096)
  ap.add_argument("--depth", type=int, default=2)
  ap.add_argument("--classes", type=int, default=10)
  # Wall time is the difference of two jits (all sets, two sets), medians over reps: with
  # 4 sets and 5 reps it moved by 10-15% between runs of the same code.
  ap.add_argument("--sets", type=int, default=12)
  ap.add_argument("--reps", type=int, default=15)
  ap.add_argument("--variants", default=",".join(VARIANTS))
  ap.add_argument("--kernels", action="store_true", help="GPU time per kernel name")
  ap.add_argument("--hlo", default="", help="with --kernels: a folder for each variant's "
                  "compiled step (<variant>.hlo.txt), whose fusion names the kernels carry")
  ap.add_argument("--out", default="")
  args = ap.parse_args()
  torch, why = _torch()
  if torch is None:
    print(f"no GPU time: {why}", flush=True)
  rec = dict(meta=dict(device=jax.devices()[0].device_kind, backend=jax_sm100.backend(),
                       jax=jax.__version__, git_commit=git_commit(),
                       date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"),
                       config={k: getattr(args, k) for k in ("batch", "d_in", "hidden", "depth",
                                                             "classes")}),
             wall_us={}, gpu_us={}, kernels_us={})
  for kind in args.variants.split(","):
    step, make_set = make_step(kind, args)
    sets = [make_set(jax.random.key(i)) for i in range(args.sets)]
    jax.block_until_ready(sets)
    rec["wall_us"][kind] = time_jax(step, sets, args.reps) * 1e6
    if torch is not None:
      rec["gpu_us"][kind] = gpu_time_jax(torch, step, sets) * 1e6
      if args.kernels:
        hlo = os.path.join(args.hlo, f"{kind}.hlo.txt") if args.hlo else ""
        rec["kernels_us"][kind] = kernel_table(torch, step, sets, hlo_path=hlo)
    print(f"{kind:10s} wall {rec['wall_us'][kind]:9.1f} us  gpu "
          f"{rec['gpu_us'].get(kind, float('nan')):9.1f} us", flush=True)
  for a, b in (("plain", "fused"), ("plain", "block"), ("fp8_plain", "fp8_fused"),
               ("fp8_plain", "fp8_block"), ("xla", "fp8_block"),
               ("xla", "block"), ("xla", "fused"),
               ("xla", "fp8_fused")):
    if a in rec["wall_us"] and b in rec["wall_us"]:
      g = (rec["gpu_us"][a] / rec["gpu_us"][b]) if b in rec["gpu_us"] else float("nan")
      print(f"{a} / {b}: wall {rec['wall_us'][a] / rec['wall_us'][b]:.3f}  gpu {g:.3f}")
  for kind, table in rec["kernels_us"].items():
    print(f"-- {kind}: GPU us per step by kernel")
    for name, us in table.items():
      print(f"   {us:8.1f}  {name}")
  if args.out:
    with open(args.out, "w") as f:
      json.dump(rec, f, indent=1)


if __name__ == "__main__":
  main()
