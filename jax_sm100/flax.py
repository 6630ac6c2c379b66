"""Flax layers whose matmuls run through jax_sm100 (needs `pip install jax_sm100[flax]`).

linen: Dense (bf16/fp16 kernel matmul), Fp8Dense (FP8 blockwise matmul),
       MxFp8Dense (MXFP8 matmul; reference path on every backend, no kernel yet).
nnx:   Linear, Fp8Linear, MxFp8Linear (same, as nnx.Linear subclasses).
Fused: DenseAct (linen) and LinearAct (nnx): act(x @ kernel + bias) in one
       jax_sm100.matmul_bias call (bias add and activation in the GEMM's epilogue).

They are the stock Flax layers with `dot_general` defaulted to
jax_sm100.dot_general / fp8_dot_general / mxfp8_dot_general; every other argument
(dtype, param_dtype, initializers, use_bias, ...) is Flax's. Passing
`dot_general=jax_sm100.dot_general` to the stock layers is equivalent. DenseAct /
LinearAct keep nn.Dense's / nnx.Linear's parameters (names `kernel` (in, out) and
`bias` (out,), shapes, initializers, dtypes), so checkpoints move between them and the
stock layers; they add `activation=` (None, "relu", "gelu", "gelu_tanh", "gelu_exact",
"gelu_erf", "silu", "swish": jax_sm100.matmul_bias's names).
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
from jax_sm100._mxfp8 import mxfp8_dot_general

__all__ = ["Dense", "Fp8Dense", "MxFp8Dense", "Linear", "Fp8Linear", "MxFp8Linear",
           "DenseAct", "LinearAct"]


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


def _fused(x, kernel, bias, activation, out_dtype=None):
  """act(x @ kernel + bias) for x (..., in): x folded to rows (a free reshape; also for a
  1-D x), one matmul_bias call, reshaped back."""
  y = matmul_bias(x.reshape(-1, x.shape[-1]), kernel, bias, activation=activation,
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

  def __post_init__(self):
    _activations.canonical("flax.DenseAct", self.activation)  # a bad name fails here
    if self.dot_general is not None or self.dot_general_cls is not None:
      raise ValueError("jax_sm100.flax.DenseAct: dot_general / dot_general_cls are not used "
                       "(the fused matmul_bias is the layer's matmul); leave them unset.")
    if not _is_default_precision(self.precision):
      raise ValueError(f"jax_sm100.flax.DenseAct: precision must be the default (fp32 "
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
    return _fused(inputs, kernel, bias, self.activation)


class LinearAct(nnx.Linear):
  """flax.nnx.Linear followed by an activation, fused into one jax_sm100.matmul_bias call
  (as DenseAct). `activation=` takes matmul_bias's names; every other argument is
  nnx.Linear's (a `dot_general` argument is not used: leave it unset).
  preferred_element_type becomes the output dtype. A call with `out_sharding` runs the
  stock layer (XLA's dot with that sharding), then the activation."""

  def __init__(self, in_features: int, out_features: int, *, activation: str | None = None,
               rngs: nnx.Rngs, **kwargs):
    _activations.canonical("flax.LinearAct", activation)  # a bad name fails here
    if "dot_general" in kwargs:
      raise ValueError("jax_sm100.flax.LinearAct: dot_general is not used (the fused "
                       "matmul_bias is the layer's matmul); leave it unset.")
    if not _is_default_precision(kwargs.get("precision")):
      raise ValueError(f"jax_sm100.flax.LinearAct: precision must be the default (fp32 "
                       f"accumulation); got {kwargs['precision']!r}.")
    super().__init__(in_features, out_features, rngs=rngs, **kwargs)
    self.activation = activation

  def __call__(self, inputs, out_sharding=None):
    name = _activations.canonical("flax.LinearAct", self.activation)
    if out_sharding is not None:
      return _activations.apply(name, super().__call__(inputs, out_sharding=out_sharding))
    kernel = self.kernel[...]
    bias = self.bias[...] if self.bias is not None else None
    promote = getattr(self, "promote_dtype", None) or _nnx_promote_dtype
    inputs, kernel, bias = promote((inputs, kernel, bias), dtype=self.dtype)
    return _fused(inputs, kernel, bias, self.activation,
                  getattr(self, "preferred_element_type", None))
