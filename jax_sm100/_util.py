"""Integer and padding helpers shared by every layer (the one copy of each)."""
from __future__ import annotations

import jax.numpy as jnp


def cdiv(a: int, b: int) -> int:
  """ceil(a / b) for non-negative ints."""
  return -(-a // b)


def round_up(n: int, m: int) -> int:
  """The smallest multiple of m that is >= n."""
  return cdiv(n, m) * m


def pad_to(x, axis: int, size: int, value: float = 0.0):
  """x padded with `value` along `axis` up to `size` (x itself when already that size)."""
  if x.shape[axis] == size:
    return x
  pads = [(0, 0)] * x.ndim
  pads[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, pads, constant_values=value)
