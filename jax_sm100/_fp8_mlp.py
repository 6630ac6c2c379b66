"""fp8_mlp: mlp's stack of dense layers in FP8 (fp8_dot's DeepSeek-V3 recipe), as one
custom_vjp, so that each activation and each activation's backward is computed inside
the quantizer that reads its input anyway.

A stack of fp8_dot(bias=, activation=) layers trains as: the FP8 GEMM writes z (bias
fused), XLA writes d = act(z), the next layer's dual quantizer reads d; backward, the FP8
GEMM writes g, XLA reads g and z to write dz = g * act'(z) and its column sums, the dual
quantizer reads dz. Here, for each hidden layer:
  * forward: z_l from the FP8 bias kernel; the next layer's input Q(d_l) and Q(d_l^T) from
    ONE pass over z_l (target jax_sm100_quantize_fp8_act_dual): d_l is never written;
  * backward: Q(dz_l), Q(dz_l^T) and the bias gradient from ONE pass over g_l and z_l
    (target jax_sm100_quantize_fp8_dact_dual): dz_l is never written.
The numbers are the layers' (d rounded to the hidden dtype before its quantization, dz
likewise, the bias gradient the fp32 sum of the rounded dz), with the activations of the
kernels (kernels/common/activation.h, within a few fp32 ulps of jax.nn's).

Where a piece cannot run as a kernel (the reference backend, dtypes other than bfloat16,
sm100 until the first-use self-tests of the quantizers and the FP8 bias GEMM passed),
fp8_mlp is exactly the stack of fp8_dot layers.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _activations, _autodiff, _backend, _fp8, _selftest_guard
from jax_sm100._launch import fp8 as _fp8_launch
from jax_sm100._launch import quantize as _quant
from jax_sm100._reference import FP8_BLOCK as BLOCK

OP = "fp8_mlp"
BF16 = np.dtype(jnp.bfloat16)


def block_ok(ctx, x_dtype, out_dtype, shapes) -> bool:
  """Whether the fused block runs: bf16 in and out, both quantizer targets callable (on
  sm100: their family's first-use self-test passed), every layer's FP8 bias kernel
  usable. shapes: (m, k, n) per layer."""
  return (np.dtype(x_dtype) == BF16 and np.dtype(out_dtype) == BF16
          and all(ctx.can_call(t) and _selftest_guard.refusal(ctx, t) is None
                  for t in (_quant.ACT_DUAL_TARGET, _quant.DACT_DUAL_TARGET))
          and all(_fp8_launch.bias_kernel_ok(ctx, m, n, k, BF16) for m, k, n in shapes))


def _layer_input(ctx, plan, x, z_below, name_below):
  """((xq, xs), (xtq, xts)) of a layer's input: x itself for the first layer, else
  act(z) of the layer below, quantized in the pass that applies the activation."""
  if z_below is None:
    return _quant.quantize_dual(ctx, x, 1, plan[0], plan[1])
  return _quant.act_quantize_dual(ctx, z_below, name_below, plan[0], plan[1])


def _forward(ctx, names, plans, has_bias, x, weights, biases, for_grad: bool):
  """(y, residuals): per layer (xtq, xts, wq, ws), and the arrays the backward reads
  (z of every hidden layer; the top layer's as fp8_dot saves it). The primal pass is
  fp8_dot's, layer by layer (the activation in the GEMM's epilogue)."""
  n = len(weights)
  res, saved = [], []
  z = None
  for l, (w, b) in enumerate(zip(weights, biases)):
    bias = b if has_bias else None
    plan, name = plans[l], names[l]
    (wq, ws), (wtq, wts) = _fp8._quantize_weight(ctx, w)
    if not for_grad:
      xq, xs = _quant.quantize(ctx, x, (1, BLOCK), _fp8.E4M3, plan[0], for_gemm=True)
      x = _fp8_launch.fp8_gemm_bias(ctx, xq, xs, wtq, wts, bias, name)
      continue
    (xq, xs), (xtq, xts) = _layer_input(ctx, plan, x, z, names[l - 1] if l else None)
    res.append((xtq, xts, wq, ws))
    if l < n - 1:  # hidden: z only; the next layer's quantizer applies the activation
      z = _fp8_launch.fp8_gemm_bias(ctx, xq, xs, wtq, wts, bias, "none")
      saved.append(z)
    elif name in _activations.NEEDS_PRE:  # as fp8_dot: z, then the activation in XLA
      z = _fp8_launch.fp8_gemm_bias(ctx, xq, xs, wtq, wts, bias, "none")
      x = _activations.rounded(name, z)
      saved.append(z)
    else:
      x = _fp8_launch.fp8_gemm_bias(ctx, xq, xs, wtq, wts, bias, name)
      saved.append(x if name == "relu" else None)
  return x, (tuple(res), tuple(saved))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def _fp8_mlp(ctx, names, plans, has_bias, x, weights, biases):
  return _forward(ctx, names, plans, has_bias, x, weights, biases, False)[0]


def _fp8_mlp_fwd(ctx, names, plans, has_bias, x, weights, biases):
  y, res = _forward(ctx, names, plans, has_bias, x, weights, biases, True)
  return y, res


def _fp8_mlp_bwd(ctx, names, plans, has_bias, res, g):
  fp8_res, saved = res
  n = len(fp8_res)
  dws, dbs = [None] * n, [None] * n
  empty = jnp.zeros((0,), jnp.float32)
  top = names[-1]
  if top == "none":
    (gq, gs), (gtq, gts) = _quant.quantize_dual(ctx, g, BLOCK, plans[-1][2])
    db = jnp.sum(g.astype(jnp.float32), axis=0)
  else:
    (gq, gs), (gtq, gts), db = _quant.dact_quantize_dual(ctx, g, saved[-1], top, plans[-1][2])
  dx = None
  for l in range(n - 1, -1, -1):
    xtq, xts, wq, ws = fp8_res[l]
    dbs[l] = db if has_bias else empty
    # dW_l (K, N) = x^T (K, M) @ dz (M, N); the input gradient (M, K) = dz @ W^T.
    dws[l] = _fp8._product(ctx, xtq, xts, gtq, gts, BF16, plans[l][1])
    gx = _fp8._product(ctx, gq, gs, wq, ws, BF16, plans[l][2])
    if l == 0:
      dx = gx
      break
    (gq, gs), (gtq, gts), db = _quant.dact_quantize_dual(ctx, gx, saved[l - 1], names[l - 1],
                                                         plans[l - 1][2])
  return dx, tuple(dws), tuple(dbs)


_fp8_mlp.defvjp(_fp8_mlp_fwd, _fp8_mlp_bwd)


def fused(x2, weights, b32, names, has_bias, out_dtype):
  """The fused block on 2-D x (bf16), or None when it cannot run here (the caller then
  stacks fp8_dot layers)."""
  ctx = _backend.context()
  m = x2.shape[0]
  shapes = [(m, w.shape[0], w.shape[1]) for w in weights]
  if not block_ok(ctx, x2.dtype, out_dtype, shapes):
    return None
  plans = tuple(_fp8._plan(ctx, m, k, n, BF16, BF16, BF16) for m, k, n in shapes)
  with _autodiff.reverse_mode_only(OP, x2, *weights, *b32):
    return _fp8_mlp(ctx, names, plans, has_bias, x2, tuple(weights), tuple(b32))
