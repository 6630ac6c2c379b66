"""The activations of the fused bias/activation epilogue (jax_sm100.matmul_bias): their
names, the FFI attribute codes, their values and derivatives in fp32, and the reference
formula of the whole epilogue.

The codes mirror `enum class Activation` in ffi/include/jax_sm100/kernels/common/
activation.h, the one definition the GPU epilogue and the CPU handler use. Values are
jax.nn's functions evaluated in fp32 (the kernel computes the same formulas in fp32).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

# Canonical name -> the FFI attribute `activation` (kernels::Activation).
CODES = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
# Accepted spellings -> canonical name. "gelu" is jax.nn.gelu's default (tanh approximation).
ALIASES = {"none": "none", "relu": "relu", "gelu": "gelu_tanh", "gelu_tanh": "gelu_tanh",
           "gelu_exact": "gelu_erf", "gelu_erf": "gelu_erf", "silu": "silu", "swish": "silu"}
# Activations whose derivative needs the pre-activation z (relu's comes from the output).
NEEDS_PRE = frozenset({"gelu_tanh", "gelu_erf", "silu"})


def canonical(op: str, activation) -> str:
  """The canonical name of `activation` (None means "none"); TypeError / ValueError naming
  the argument and listing the valid names otherwise."""
  if activation is None:
    return "none"
  valid = "None, " + ", ".join(repr(k) for k in ALIASES)
  if not isinstance(activation, str):
    raise TypeError(f"jax_sm100.{op}: activation must be None or one of {valid}; got "
                    f"{type(activation).__name__}.")
  name = ALIASES.get(activation.strip().lower())
  if name is None:
    raise ValueError(f"jax_sm100.{op}: unknown activation {activation!r}; valid: {valid}.")
  return name


def apply(name: str, z):
  """act(z) for a canonical name, in z's dtype (fp32 in the epilogue)."""
  if name == "relu":
    return jnp.maximum(z, jnp.zeros((), z.dtype))
  if name == "gelu_tanh":
    return jax.nn.gelu(z, approximate=True)
  if name == "gelu_erf":
    return jax.nn.gelu(z, approximate=False)
  if name == "silu":
    return jax.nn.silu(z)
  return z


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def derivative(name: str, z):
  """act'(z) in fp32 for a canonical name; z is the pre-activation (for relu, the output
  serves as well: both are > 0 exactly where z > 0)."""
  z = z.astype(jnp.float32)
  f32 = np.float32
  if name == "relu":
    return (z > 0).astype(jnp.float32)
  if name == "gelu_tanh":
    # With s = sigmoid(2u): 0.5 (1 + tanh u) = s, 1 - tanh(u)^2 = 4 s (1 - s). The tanh
    # form cancels to 0 in fp32 below z of about -4.5 (act' is still -2e-6 there).
    c = f32(_SQRT_2_OVER_PI)
    s = jax.nn.sigmoid(f32(2) * c * (z + f32(0.044715) * z * z * z))
    return s + f32(2) * z * s * (1 - s) * c * (1 + f32(3 * 0.044715) * z * z)
  if name == "gelu_erf":
    return (f32(0.5) * (1 + jax.lax.erf(z * f32(math.sqrt(0.5)))) +
            z * jnp.exp(f32(-0.5) * z * z) * f32(_INV_SQRT_2PI))
  if name == "silu":
    s = jax.nn.sigmoid(z)
    return s * (1 + z * (1 - s))
  return jnp.ones_like(z)


def rounded(name: str, z):
  """act(z) in fp32, rounded once to z's dtype: a layer's output as XLA's pass after the
  GEMM writes it (and as the prologue quantizer quantizes it)."""
  return apply(name, z.astype(jnp.float32)).astype(z.dtype)


def rounded_grad(name: str, saved, g):
  """dz = g * act'(z) in fp32, rounded once to g's dtype (g itself without an
  activation); `saved` z, or for relu d."""
  if name == "none":
    return g
  return (g.astype(jnp.float32) * derivative(name, saved)).astype(g.dtype)


def epilogue_grads(name: str, saved, g, has_bias: bool):
  """(dz, dbias) of the fused bias/activation epilogue's backward (matmul_bias and
  fp8_dot(bias=) alike): dz = g * act'(z) in fp32, rounded once to g's dtype and written
  once (an optimization barrier keeps XLA from recomputing it inside the bias reduction,
  which would read g and z twice), and dbias the fp32 sum of that rounded dz over every
  axis but the last (an empty fp32 array without a bias). `saved`: z, or for relu d."""
  dz = rounded_grad(name, saved, g)
  if name != "none" and has_bias:
    dz = jax.lax.optimization_barrier(dz)
  if not has_bias:
    return dz, jnp.zeros((0,), jnp.float32)
  return dz, jnp.sum(dz.astype(jnp.float32), axis=tuple(range(g.ndim - 1)))


def reference(a, b, bias, trans_a: bool, trans_b: bool, name: str, out_dtype, want_pre: bool):
  """(d, pre or None) of the fused epilogue in plain jax.numpy: z = op(a) @ op(b) (fp32
  accumulation) + bias in fp32, pre = z and d = act(z), each rounded once to out_dtype.

  bias: None, or f32 whose last dim is N and whose leading dims broadcast against the
  product's batch dims (the launch layer's vmap rule passes a per-entry bias this way).
  """
  ct = jnp.promote_types(a.dtype, b.dtype)
  a, b = a.astype(ct), b.astype(ct)
  if trans_a:
    a = jnp.swapaxes(a, -1, -2)
  if trans_b:
    b = jnp.swapaxes(b, -1, -2)
  z = jnp.matmul(a, b, preferred_element_type=jnp.float32)
  if bias is not None:
    bias = bias.astype(jnp.float32)
    if bias.ndim > 1:  # (L, N), one row per leading batch entry -> (L, 1, ..., 1, N)
      bias = bias.reshape(bias.shape[:-1] + (1,) * (z.ndim - bias.ndim) + bias.shape[-1:])
    z = z + bias
  d = apply(name, z).astype(out_dtype)
  return d, (z.astype(out_dtype) if want_pre else None)
