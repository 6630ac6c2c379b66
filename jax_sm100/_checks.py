"""Trace-time argument validation shared by the public ops.

Every check raises TypeError (wrong kind/dtype) or ValueError (wrong rank,
shape or value) with a sentence that names the op and the argument.
"""
from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

# Floating dtypes the matmul ops accept (kernels take bf16/fp16, f32 runs the
# reference).
FLOAT_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16), np.dtype(jnp.float32))
FP8_DTYPES = (np.dtype(jnp.float8_e4m3fn), np.dtype(jnp.float8_e5m2))


def _names(dtypes) -> str:
  return ", ".join(d.name for d in dtypes)


def as_array(op: str, name: str, x):
  """x as a jax array (tracers pass through); TypeError for non-arrays."""
  if isinstance(x, (jax.Array, np.ndarray, np.generic)) or hasattr(x, "aval"):
    return jnp.asarray(x)
  if isinstance(x, (list, tuple, numbers.Number)):
    return jnp.asarray(x)
  raise TypeError(f"jax_sm100.{op}: {name} must be an array; got {type(x).__name__}.")


def check_dtype(op: str, name: str, x, allowed) -> None:
  if x.dtype not in allowed:
    raise TypeError(f"jax_sm100.{op}: {name} must have dtype {_names(allowed)}; "
                    f"got {x.dtype.name}.")


def check_rank(op: str, name: str, x, min_rank: int, layout: str,
               max_rank: int | None = None) -> None:
  if x.ndim < min_rank or (max_rank is not None and x.ndim > max_rank):
    want = (f"rank {min_rank}" if max_rank == min_rank
            else f"rank >= {min_rank}")
    raise ValueError(f"jax_sm100.{op}: {name} must have {want} {layout}; "
                     f"got shape {tuple(x.shape)}.")


def out_dtype_or(op: str, out_dtype, default, allowed=FLOAT_DTYPES) -> np.dtype:
  """The requested output dtype (default when None), checked against `allowed`."""
  if out_dtype is None:
    return np.dtype(default)
  try:
    dt = np.dtype(out_dtype)
  except TypeError:
    raise TypeError(f"jax_sm100.{op}: out_dtype must be one of {_names(allowed)}; "
                    f"got {out_dtype!r}.") from None
  if dt not in allowed:
    raise TypeError(f"jax_sm100.{op}: out_dtype must be one of {_names(allowed)}; "
                    f"got {dt.name}.")
  return dt


def static_scalar(op: str, name: str, v) -> float:
  """alpha/beta: finite Python (or NumPy) real numbers, static at trace time."""
  if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.integer,
                                                            np.floating)):
    kind = "a traced/JAX array" if isinstance(v, jax.Array) or hasattr(v, "aval") \
        else type(v).__name__
    raise TypeError(f"jax_sm100.{op}: {name} must be a finite Python real number "
                    f"(it is a static kernel attribute); got {kind}.")
  f = float(v)
  if not math.isfinite(f):
    raise ValueError(f"jax_sm100.{op}: {name} must be a finite real number; got {f}.")
  return f


def static_bool(op: str, name: str, v) -> bool:
  """A layout flag: a Python (or NumPy) bool, static at trace time."""
  if not isinstance(v, (bool, np.bool_)):
    raise TypeError(f"jax_sm100.{op}: {name} must be a Python bool (it picks a static "
                    f"layout); got {type(v).__name__}.")
  return bool(v)


def batch_shape(op: str, *named_shapes) -> tuple[int, ...]:
  """Broadcast of the operands' leading (batch) dims, NumPy rules."""
  try:
    return tuple(np.broadcast_shapes(*[s for _, s in named_shapes]))
  except ValueError:
    desc = ", ".join(f"{n} {tuple(s)}" for n, s in named_shapes)
    raise ValueError(f"jax_sm100.{op}: the leading (batch) dims must match or "
                     f"broadcast; got {desc}.") from None


def fp8_operands(op: str, a, b, a_scale, b_scale):
  """The FP8 GEMM operands a (M, K) and b (N, K) with their scales as arrays, checked for
  dtype, rank and a common K (scale shapes are the caller's: they differ per format).
  Returns (a, b, a_scale, b_scale, m, n, k)."""
  a, b = as_array(op, "a", a), as_array(op, "b", b)
  a_scale, b_scale = as_array(op, "a_scale", a_scale), as_array(op, "b_scale", b_scale)
  check_dtype(op, "a", a, FP8_DTYPES)
  check_dtype(op, "b", b, FP8_DTYPES)
  check_rank(op, "a", a, 2, "(M, K)", max_rank=2)
  check_rank(op, "b", b, 2, "(N, K)", max_rank=2)
  (m, k), (n, kb) = a.shape, b.shape
  if k != kb:
    raise ValueError(f"jax_sm100.{op}: a (M, K) and b (N, K) must have the same K; "
                     f"got a {tuple(a.shape)}, b {tuple(b.shape)}.")
  return a, b, a_scale, b_scale, m, n, k


def bias_vector(op: str, bias, n: int):
  """bias as an array of shape (N,) and a floating dtype, or None when it is None;
  TypeError / ValueError naming the argument otherwise."""
  if bias is None:
    return None
  bias = as_array(op, "bias", bias)
  if not jnp.issubdtype(bias.dtype, jnp.floating):
    raise TypeError(f"jax_sm100.{op}: bias must have a floating dtype; got {bias.dtype.name}.")
  if tuple(bias.shape) != (n,):
    raise ValueError(f"jax_sm100.{op}: bias must have shape (N,) = ({n},), one value per "
                     f"output column; got {tuple(bias.shape)}.")
  return bias
