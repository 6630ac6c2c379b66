"""mlp: a stack of dense layers, y_l = act_l(y_{l-1} @ W_l + b_l), as one custom_vjp, so
that each layer's activation backward is fused into the GEMM of the layer above.

Forward: the layers of matmul_bias, in order (each its fused bias/activation epilogue;
under differentiation the epilogue also writes the pre-activation z_l for gelu/silu).

Backward, from the top layer down, with g the output's cotangent:
  * top layer: dz = g * act'(z) and its bias gradient as in matmul_bias
    (_activations.epilogue_grads; dz = g without a final activation);
  * dW_l = y_{l-1}^T @ dz_l (matmul's dispatch);
  * below an activation, dz_{l-1} = (dz_l @ W_l^T) * act'(z_{l-1}) and its bias gradient
    (the column sums of dz_{l-1}) come from ONE kernel, the GEMM with the activation-
    backward epilogue (target jax_sm100_gemm_dact, _launch/dact.py), which reads z_{l-1}
    as its C operand: the per-layer op (matmul_bias) writes dz_l @ W_l^T and then XLA
    reads it and z again to write dz_{l-1}, and reads dz_{l-1} once more for the bias
    gradient;
  * the input gradient dx = dz_0 @ W_0^T.
The bias gradients sum the kernel's fp32 dz before its rounding to the output dtype
(matmul_bias sums the rounded dz): both are within the output dtype's rounding of the
float64 sum. Where the dact kernel does not run (f32 inputs, CPUs without cpu_ffi, sm100
until the kernel's first-use self-test passed) the same formula runs in XLA.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _activations, _autodiff, _backend, _bias, _checks
from jax_sm100 import _fp8, _fp8_mlp, _matmul
from jax_sm100._launch import dact as _launch_dact

OP = "mlp"


def _saved(name, d, z):
  """What a layer's backward reads of its output: z for gelu/silu, d for relu."""
  if name in _activations.NEEDS_PRE:
    return z
  return d if name == "relu" else None


def _forward(ctx, names, out_dtype, has_bias, x, weights, biases, want_saved):
  """(y, inputs, saved) over the layers; x is 2-D."""
  inputs, saved = [], []
  y = x
  for l, (w, b) in enumerate(zip(weights, biases)):
    name = names[l]
    dt = out_dtype if l == len(weights) - 1 else x.dtype
    want_pre = want_saved and name in _activations.NEEDS_PRE
    inputs.append(y)
    y, z = _bias._forward(ctx, name, dt, has_bias, y, w, b, want_pre)
    saved.append(_saved(name, y, z) if want_saved else None)
  return y, inputs, saved


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def _mlp(ctx, names, out_dtype, has_bias, x, weights, biases):
  return _forward(ctx, names, out_dtype, has_bias, x, weights, biases, False)[0]


def _mlp_fwd(ctx, names, out_dtype, has_bias, x, weights, biases):
  y, inputs, saved = _forward(ctx, names, out_dtype, has_bias, x, weights, biases, True)
  return y, (inputs, weights, saved)


def _mlp_bwd(ctx, names, out_dtype, has_bias, res, g):
  del out_dtype
  inputs, weights, saved = res
  n = len(weights)
  dws, dbs = [None] * n, [None] * n
  dz, dbs[-1] = _activations.epilogue_grads(names[-1], saved[-1], g, has_bias)
  dz = dz.astype(inputs[-1].dtype)  # an f32 out_dtype: the products take x's dtype
  dx = None
  for l in range(n - 1, -1, -1):
    w = weights[l]
    dws[l] = _matmul._gemm_call(ctx, inputs[l], dz, True, False, w.dtype)
    if l == 0:
      dx = _matmul._gemm_call(ctx, dz, w, False, True, inputs[0].dtype)
      break
    below = names[l - 1]
    if below == "none":  # no activation between the layers: dz passes through
      dz = _matmul._gemm_call(ctx, dz, w, False, True, inputs[l].dtype)
      dbs[l - 1] = (jnp.sum(dz.astype(jnp.float32), axis=0) if has_bias
                    else jnp.zeros((0,), jnp.float32))
    else:
      dz, colsum = _launch_dact.gemm_dact(ctx, dz, w, saved[l - 1], False, True, below,
                                          with_sums=has_bias)
      dbs[l - 1] = colsum if has_bias else jnp.zeros((0,), jnp.float32)
  return dx, tuple(dws), tuple(dbs)


_mlp.defvjp(_mlp_fwd, _mlp_bwd)


def _validate(op, x, weights, biases, activation, final_activation, out_dtype):
  """mlp's and fp8_mlp's argument checks: (x2 (M, d_0), leading dims, weights, biases as
  f32 vectors (or (0,) arrays), canonical names per layer, has_bias, out_dtype)."""
  if isinstance(weights, jax.Array) or not isinstance(weights, (list, tuple)) or not weights:
    raise TypeError(f"jax_sm100.{op}: weights must be a non-empty list or tuple of 2-D "
                    f"arrays; got {type(weights).__name__}.")
  weights = tuple(jnp.asarray(w) for w in weights)
  x = jnp.asarray(x)
  if x.ndim < 1:
    raise ValueError(f"jax_sm100.{op}: x must have rank >= 1; got shape {x.shape}.")
  width = x.shape[-1]
  for l, w in enumerate(weights):
    if w.ndim != 2 or w.shape[0] != width:
      raise ValueError(f"jax_sm100.{op}: weights[{l}] must have shape ({width}, d) (its "
                       f"input width is the previous layer's output); got {w.shape}.")
    if w.dtype != x.dtype:
      raise TypeError(f"jax_sm100.{op}: weights[{l}] is {w.dtype.name}, x is "
                      f"{x.dtype.name}; every weight must have x's dtype.")
    width = w.shape[1]
  if biases is not None:
    if not isinstance(biases, (list, tuple)) or len(biases) != len(weights):
      raise TypeError(f"jax_sm100.{op}: biases must be None or a list / tuple of "
                      f"{len(weights)} arrays, one per weight.")
    vecs = tuple(_checks.bias_vector(f"{op} (biases[{l}])", b, w.shape[1])
                 for l, (b, w) in enumerate(zip(biases, weights)))
  hidden = _activations.canonical(op, activation)  # checked even for one layer
  names = tuple([hidden] * (len(weights) - 1) + [_activations.canonical(op, final_activation)])
  if x.dtype not in (np.dtype(jnp.bfloat16), np.dtype(jnp.float16), np.dtype(np.float32)):
    raise TypeError(f"jax_sm100.{op}: x must be bfloat16, float16 or float32; got "
                    f"{x.dtype.name}.")
  out_dtype = _checks.out_dtype_or(op, out_dtype, x.dtype)
  has_bias = biases is not None
  b32 = tuple(v.astype(jnp.float32) for v in vecs) if has_bias else tuple(
      jnp.zeros((0,), jnp.float32) for _ in weights)
  return (x.reshape((-1, x.shape[-1])), x.shape[:-1], weights, b32, names, has_bias,
          out_dtype)


def mlp(x, weights, biases=None, *, activation="gelu", final_activation=None,
        out_dtype=None):
  """A stack of dense layers with one fused backward: for l = 1..L,
  y_l = act_l(y_{l-1} @ weights[l-1] + biases[l-1]), y_0 = x, act_l = `activation` for
  every layer but the last, `final_activation` for the last.

  Args:
    x: (..., d_0), bfloat16, float16 or float32.
    weights: a sequence of L >= 1 arrays, weights[l] of shape (d_l, d_{l+1}), x's dtype.
    biases: None, or a sequence of L arrays, biases[l] of shape (d_{l+1},) (any float
      dtype; added in float32, gradients in their own dtype).
    activation, final_activation: None, "relu", "gelu" ("gelu_tanh"), "gelu_exact"
      ("gelu_erf"), "silu" ("swish"), as for matmul_bias.
    out_dtype: the last layer's output dtype; defaults to x's dtype. Hidden layers keep
      x's dtype.
  Returns:
    (..., d_L) in out_dtype.

  Forward: each layer is matmul_bias (bias and activation in the GEMM's epilogue).
  Backward (reverse mode in x, weights and biases): each layer's activation derivative
  and bias gradient are fused into the epilogue of the GEMM computing the gradient that
  flows into it (module docstring); values match matmul_bias layer by layer up to the
  output dtype's rounding.
  """
  x2, lead, weights, b32, names, has_bias, out_dtype = _validate(
      OP, x, weights, biases, activation, final_activation, out_dtype)
  with _autodiff.reverse_mode_only(OP, x2, *weights, *b32):
    y = _mlp(_backend.context(), names, out_dtype, has_bias, x2, weights, b32)
  return y.reshape(lead + (weights[-1].shape[1],))


def fp8_mlp(x, weights, biases=None, *, activation="gelu", final_activation=None,
            out_dtype=None):
  """mlp in FP8: the same stack of dense layers with every product computed as fp8_dot
  computes it (DeepSeek-V3 blockwise recipe: activations and gradients in 1x128 blocks,
  weights in 128x128), forward and backward.

  Args and returns as for mlp (weights in x's dtype, biases any float dtype).

  Values: those of the stack of fp8_dot(bias=, activation=) layers, to within the
  activations' few-fp32-ulp differences from jax.nn's. Where it can (bfloat16 in and
  out, on sm90 or cpu_ffi), the backward and the activations run inside the FP8
  quantizers (jax_sm100._fp8_mlp): each hidden layer's output d = act(z) is quantized for
  the next layer as the quantizer reads z, and its gradient dz = g * act'(z) and bias
  gradient as the quantizer reads g and z, so neither d nor dz is written. Elsewhere
  it runs as that stack of fp8_dot layers.
  """
  op = "fp8_mlp"
  x2, lead, weights, b32, names, has_bias, out_dtype = _validate(
      op, x, weights, biases, activation, final_activation, out_dtype)
  y = _fp8_mlp.fused(x2, weights, b32, names, has_bias, out_dtype)
  if y is None:
    y = x2
    for l, w in enumerate(weights):
      y = _fp8.fp8_dot(y, w, bias=b32[l] if has_bias else None, activation=names[l],
                       out_dtype=out_dtype if l == len(weights) - 1 else x2.dtype)
  return y.reshape(lead + (weights[-1].shape[1],))
