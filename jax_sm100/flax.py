"""Flax layers whose matmuls run through jax_sm100 (needs `pip install jax_sm100[flax]`).

linen: Dense (bf16/fp16 kernel matmul), Fp8Dense (FP8 blockwise matmul),
       MxFp8Dense (MXFP8 matmul; reference path on every backend, no kernel yet).
nnx:   Linear, Fp8Linear, MxFp8Linear (same, as nnx.Linear subclasses).
Fused: DenseAct (linen) and LinearAct (nnx): act(x @ kernel + bias) in one
       jax_sm100.matmul_bias call (bias add and activation in the GEMM's epilogue);
       Fp8DenseAct / Fp8LinearAct: the same through jax_sm100.fp8_dot(..., bias=,
       activation=) (FP8 product, bias and activation in the FP8 kernel's epilogue for a
       bfloat16 output; otherwise in one XLA pass after it).

They are the stock Flax layers with `dot_general` defaulted to
jax_sm100.dot_general / fp8_dot_general / mxfp8_dot_general; every other argument
(dtype, param_dtype, initializers, use_bias, ...) is Flax's. Passing
`dot_general=jax_sm100.dot_general` to the stock layers is equivalent. DenseAct /
LinearAct keep nn.Dense's / nnx.Linear's parameters (names `kernel` (in, out) and
`bias` (out,), shapes, initializers, dtypes), so checkpoints move between them and the
stock layers; they add `activation=` (None, "relu", "gelu", "gelu_tanh", "gelu_exact",
"gelu_erf", "silu", "swish": jax_sm100.matmul_bias's names).
MLPBlock (linen): a stack of dense layers as one jax_sm100.mlp call, whose backward fuses
       each hidden activation's derivative and bias gradient into the GEMM above it; its
       parameters are a stack of nn.Dense layers' (Dense_0, Dense_1, ...).
Fp8MLPBlock (linen): the same as one jax_sm100.fp8_mlp call (FP8 products; each hidden
       activation and its backward inside the FP8 quantizers), the same parameters.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import linen as nn
from flax import nnx
from flax.linen.dtypes import promote_dtype as _linen_promote_dtype
from flax.nnx.nn.dtypes import promote_dtype as _nnx_promote_dtype

from jax_sm100 import _activations
from jax_sm100._bias import matmul_bias
from jax_sm100._dot_general import _is_default_precision, dot_general, fp8_dot_general
from jax_sm100._fp8 import fp8_dot
from jax_sm100._mlp import fp8_mlp, mlp
from jax_sm100._mxfp8 import mxfp8_dot_general

__all__ = ["Dense", "Fp8Dense", "MxFp8Dense", "Linear", "Fp8Linear", "MxFp8Linear",
           "DenseAct", "LinearAct", "Fp8DenseAct", "Fp8LinearAct", "MLPBlock"]


class Dense(nn.Dense):
  """flax.linen.Dense whose matmul is jax_sm100.dot_general."""
  dot_general: Any = dot_general


class Fp8Dense(nn.Dense):
  """flax.linen.Dense whose matmul is FP8 blockwise (jax_sm100.fp8_dot_general)."""
  dot_general: Any = fp8_dot_general


class MxFp8Dense(nn.Dense):
  """flax.linen.Dense whose matmul is MXFP8 (jax_sm100.mxfp8_dot_general)."""
  dot_general: Any = mxfp8_dot_general


class Linear(nnx.Linear):
  """flax.nnx.Linear whose matmul is jax_sm100.dot_general."""

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               **kwargs):
    kwargs.setdefault("dot_general", dot_general)
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)


class Fp8Linear(nnx.Linear):
  """flax.nnx.Linear whose matmul is FP8 blockwise (jax_sm100.fp8_dot_general)."""

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               **kwargs):
    kwargs.setdefault("dot_general", fp8_dot_general)
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)


class MxFp8Linear(nnx.Linear):
  """flax.nnx.Linear whose matmul is MXFP8 (jax_sm100.mxfp8_dot_general)."""

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               **kwargs):
    kwargs.setdefault("dot_general", mxfp8_dot_general)
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)


def _fused(x, kernel, bias, activation, out_dtype=None, fp8=False):
  """act(x @ kernel + bias) for x (..., in): x folded to rows (a free reshape; also for a
  1-D x), one matmul_bias call (fp8: one fp8_dot call), reshaped back."""
  op = fp8_dot if fp8 else matmul_bias
  y = op(x.reshape(-1, x.shape[-1]), kernel, bias=bias, activation=activation,
         out_dtype=out_dtype)
  return y.reshape(x.shape[:-1] + (kernel.shape[-1],))


class DenseAct(nn.Dense):
  """flax.linen.Dense followed by an activation, fused: act(x @ kernel + bias) is one
  jax_sm100.matmul_bias call (the bias add and the activation run in the GEMM's epilogue
  on the kernel path). Parameters, initializers and dtype promotion are nn.Dense's;
  `precision` must be the default and `dot_general` / `dot_general_cls` are not used (the
  fused op is the matmul), so setting them is an error.

  Attributes:
    activation: None, "relu", "gelu" (tanh approximation, as jax.nn.gelu), "gelu_tanh",
      "gelu_exact" / "gelu_erf", "silu" / "swish".
  """
  activation: str | None = None
  _FP8 = False  # Fp8DenseAct: the product is fp8_dot's

  def __post_init__(self):
    layer = f"flax.{type(self).__name__}"
    _activations.canonical(layer, self.activation)  # a bad name fails here
    if self.dot_general is not None or self.dot_general_cls is not None:
      raise ValueError(f"jax_sm100.{layer}: dot_general / dot_general_cls are not used "
                       "(the fused op is the layer's matmul); leave them unset.")
    if not _is_default_precision(self.precision):
      raise ValueError(f"jax_sm100.{layer}: precision must be the default (fp32 "
                       f"accumulation); got {self.precision!r}.")
    super().__post_init__()

  @nn.compact
  def __call__(self, inputs):
    kernel = self.param("kernel", self.kernel_init, (jnp.shape(inputs)[-1], self.features),
                        self.param_dtype)
    bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias else None)
    promote = getattr(self, "promote_dtype", None) or _linen_promote_dtype
    inputs, kernel, bias = promote(inputs, kernel, bias, dtype=self.dtype)
    return _fused(inputs, kernel, bias, self.activation, fp8=self._FP8)


class Fp8DenseAct(DenseAct):
  """DenseAct whose product is FP8 blockwise: act(x @ kernel + bias) is one
  jax_sm100.fp8_dot(x, kernel, bias=, activation=) call (x in 1x128 blocks, the kernel in
  128x128 blocks, forward and backward products in FP8; the bias add and the activation
  in the FP8 kernel's epilogue, see fp8_dot). Parameters and attributes are DenseAct's."""
  _FP8 = True


class LinearAct(nnx.Linear):
  """flax.nnx.Linear followed by an activation, fused into one jax_sm100.matmul_bias call
  (as DenseAct). `activation=` takes matmul_bias's names; every other argument is
  nnx.Linear's (a `dot_general` argument is not used: leave it unset).
  preferred_element_type becomes the output dtype. A call with `out_sharding` runs the
  stock layer (XLA's dot with that sharding), then the activation."""

  _FP8 = False  # Fp8LinearAct: the product is fp8_dot's

  def __init__(self, in_features: int, out_features: int, *, activation: str | None = None,
               rngs: nnx.Rngs, **kwargs):
    layer = f"flax.{type(self).__name__}"
    _activations.canonical(layer, activation)  # a bad name fails here
    if "dot_general" in kwargs:
      raise ValueError(f"jax_sm100.{layer}: dot_general is not used (the fused op is the "
                       "layer's matmul); leave it unset.")
    if not _is_default_precision(kwargs.get("precision")):
      raise ValueError(f"jax_sm100.{layer}: precision must be the default (fp32 "
                       f"accumulation); got {kwargs['precision']!r}.")
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)
    self.activation = activation

  def __call__(self, inputs, out_sharding=None):
    name = _activations.canonical(f"flax.{type(self).__name__}", self.activation)
    if out_sharding is not None:
      return _activations.apply(name, super().__call__(inputs, out_sharding=out_sharding))
    kernel = self.kernel[...]
    bias = self.bias[...] if self.bias is not None else None
    promote = getattr(self, "promote_dtype", None) or _nnx_promote_dtype
    inputs, kernel, bias = promote((inputs, kernel, bias), dtype=self.dtype)
    return _fused(inputs, kernel, bias, self.activation,
                  getattr(self, "preferred_element_type", None), fp8=self._FP8)


class Fp8LinearAct(LinearAct):
  """LinearAct whose product is FP8 blockwise (one jax_sm100.fp8_dot(x, kernel, bias=,
  activation=) call, as Fp8DenseAct). Arguments are LinearAct's."""
  _FP8 = True


class _DenseParams(nn.Module):
  """nn.Dense's parameters (kernel (in, out), bias (out,)) without its computation."""
  features: int
  use_bias: bool
  param_dtype: Any
  kernel_init: Any
  bias_init: Any

  @nn.compact
  def __call__(self, in_features: int):
    kernel = self.param("kernel", self.kernel_init, (in_features, self.features), self.param_dtype)
    bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias else None)
    return kernel, bias


class MLPBlock(nn.Module):
  """Dense layers of widths `features`, `activation` after each but the last,
  `final_activation` after the last: one jax_sm100.mlp call (forward: each layer's bias
  and activation in its GEMM's epilogue; backward: each hidden activation's derivative
  and bias gradient in the epilogue of the GEMM above it). Parameters: Dense_0,
  Dense_1, ... each {kernel, bias} as nn.Dense's (same initializers and param_dtype by
  default), so a stack of nn.Dense layers' checkpoint loads. Inputs and kernels are
  promoted to `dtype` (default: as nn.Dense); biases stay in param_dtype (added in f32).
  """
  features: tuple
  activation: str | None = "gelu"
  final_activation: str | None = None
  use_bias: bool = True
  dtype: Any = None
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.lecun_normal()
  bias_init: Any = nn.initializers.zeros_init()

  def __post_init__(self):
    layer = f"flax.{type(self).__name__}"
    _activations.canonical(layer, self.activation)  # a bad name fails here
    _activations.canonical(layer, self.final_activation)
    if not self.features:
      raise ValueError(f"jax_sm100.{layer}: features must name at least one layer width.")
    super().__post_init__()

  @nn.compact
  def __call__(self, inputs):
    width = jnp.shape(inputs)[-1]
    kernels, biases = [], []
    for i, f in enumerate(self.features):
      k, b = _DenseParams(int(f), self.use_bias, self.param_dtype, self.kernel_init,
                          self.bias_init, name=f"Dense_{i}")(width)
      kernels.append(k)
      biases.append(b)
      width = int(f)
    promoted = _linen_promote_dtype(inputs, *kernels, dtype=self.dtype)
    op = fp8_mlp if self._fp8 else mlp
    return op(promoted[0], list(promoted[1:]), biases if self.use_bias else None,
              activation=self.activation, final_activation=self.final_activation)

  _fp8 = False


class Fp8MLPBlock(MLPBlock):
  """MLPBlock in FP8: one jax_sm100.fp8_mlp call (every product as fp8_dot computes it;
  each hidden activation and its backward inside the FP8 quantizers). Same parameters."""
  _fp8 = True
