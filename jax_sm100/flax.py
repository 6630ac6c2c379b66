"""Flax layers whose matmuls run through jax_sm100 (needs `pip install jax_sm100[flax]`).

linen: Dense (bf16/fp16 kernel matmul), Fp8Dense (FP8 blockwise matmul),
       MxFp8Dense (MXFP8 matmul; reference path on every backend, no kernel yet).
nnx:   Linear, Fp8Linear, MxFp8Linear (same, as nnx.Linear subclasses).

They are the stock Flax layers with `dot_general` defaulted to
jax_sm100.dot_general / fp8_dot_general / mxfp8_dot_general; every other argument
(dtype, param_dtype, initializers, use_bias, ...) is Flax's. Passing
`dot_general=jax_sm100.dot_general` to the stock layers is equivalent.
"""
from __future__ import annotations

from typing import Any

from flax import linen as nn
from flax import nnx

from jax_sm100._dot_general import dot_general, fp8_dot_general
from jax_sm100._mxfp8 import mxfp8_dot_general

__all__ = ["Dense", "Fp8Dense", "MxFp8Dense", "Linear", "Fp8Linear", "MxFp8Linear"]


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
