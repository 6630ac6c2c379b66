"""Drop-in replacements for jax.lax.dot_general that route matmul patterns to
jax_sm100.matmul / fp8_dot and everything else to lax.dot_general unchanged."""
from __future__ import annotations

import math

import numpy as np
from jax import lax

from jax_sm100 import _checks
from jax_sm100._fp8 import fp8_dot
from jax_sm100._matmul import matmul


def _is_default_precision(precision) -> bool:
  if precision is None:
    return True
  if isinstance(precision, (tuple, list)):
    return all(_is_default_precision(p) for p in precision)
  return precision in (lax.Precision.DEFAULT, "default", "DEFAULT")


def _match(lhs, rhs, dimension_numbers, precision, preferred_element_type, kwargs):
  """(batch, M-shape, K, N-shape, out_dtype) when the call is a plain
  (batched) matmul we can reshape onto ours, else None.

  Pattern: batch dims leading on both in the same order; lhs contracting dims
  are its trailing dims, rhs contracting dims directly follow its batch dims,
  paired in order. Then lhs -> (batch, M, K), rhs -> (batch, K, N) are free
  reshapes and the result is (batch, lhs free, rhs free), as dot_general's.
  """
  if not (hasattr(lhs, "shape") and hasattr(rhs, "shape") and
          hasattr(lhs, "dtype") and hasattr(rhs, "dtype")):
    return None
  if any(v is not None for v in kwargs.values()):   # e.g. out_sharding
    return None
  if not _is_default_precision(precision):
    return None
  try:
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in t) for t in (lc, rc, lb, rb))
  except (TypeError, ValueError):
    return None
  dt = np.dtype(lhs.dtype)
  if np.dtype(rhs.dtype) != dt or dt not in _checks.FLOAT_DTYPES:
    return None
  out = dt if preferred_element_type is None else np.dtype(preferred_element_type)
  if out not in _checks.FLOAT_DTYPES:
    return None
  nb, nc = len(lb), len(lc)
  if nc == 0 or len(rc) != nc or len(rb) != nb:
    return None
  if lb != tuple(range(nb)) or rb != tuple(range(nb)):
    return None
  if lc != tuple(range(lhs.ndim - nc, lhs.ndim)) or rc != tuple(range(nb, nb + nc)):
    return None
  if lhs.ndim - nc < nb:
    return None
  batch = tuple(lhs.shape[:nb])
  if tuple(rhs.shape[:nb]) != batch:
    return None
  k_shape = tuple(lhs.shape[lhs.ndim - nc:])
  if tuple(rhs.shape[nb:nb + nc]) != k_shape:
    return None
  return batch, tuple(lhs.shape[nb:lhs.ndim - nc]), math.prod(k_shape), \
      tuple(rhs.shape[nb + nc:]), out


def dot_general(lhs, rhs, dimension_numbers, precision=None,
                preferred_element_type=None, **kwargs):
  """jax.lax.dot_general, with (batched) matmul patterns on bf16/fp16/f32 routed
  to jax_sm100.matmul (the kernel on a supported GPU).

  Routed: equal input dtypes, default precision, no out_sharding (or other
  extra keyword) set, batch dims leading, lhs contracting its trailing dims
  with rhs's dims right after the batch dims. A routed call takes matmul's measured
  dispatch (the kernel, or XLA's own dot where that was measured faster for the
  shape; tuning.explain says which). Everything else goes to
  lax.dot_general with the same arguments. Accepts the keywords flax passes
  (out_sharding, preferred_element_type).
  """
  m = _match(lhs, rhs, dimension_numbers, precision, preferred_element_type, kwargs)
  if m is None:
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                           preferred_element_type=preferred_element_type, **kwargs)
  batch, m_shape, k, n_shape, out = m
  a = lhs.reshape(batch + (math.prod(m_shape), k))
  b = rhs.reshape(batch + (k, math.prod(n_shape)))
  return matmul(a, b, out_dtype=out).reshape(batch + m_shape + n_shape)


def dense_or_lax(dot, lhs, rhs, dimension_numbers, precision, preferred_element_type, kwargs):
  """`dot(x (M, K), w (K, N), out_dtype=...)` for the dense-layer pattern (lhs's trailing
  dims contracted with rhs's leading dims, no batch dims), reshaped back; anything else to
  lax.dot_general unchanged."""
  m = _match(lhs, rhs, dimension_numbers, precision, preferred_element_type, kwargs)
  if m is None or m[0]:
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                           preferred_element_type=preferred_element_type, **kwargs)
  _, m_shape, k, n_shape, out = m
  x = lhs.reshape((math.prod(m_shape), k))
  w = rhs.reshape((k, math.prod(n_shape)))
  return dot(x, w, out_dtype=out).reshape(m_shape + n_shape)


def fp8_dot_general(lhs, rhs, dimension_numbers, precision=None,
                    preferred_element_type=None, **kwargs):
  """jax.lax.dot_general computed in FP8 (jax_sm100.fp8_dot) for the dense-layer
  pattern: no batch dims, lhs contracting its trailing dims with rhs's leading
  dims. Everything else (batch dims, other layouts, precision or sharding
  requests) goes to lax.dot_general unchanged."""
  return dense_or_lax(fp8_dot, lhs, rhs, dimension_numbers, precision, preferred_element_type,
                      kwargs)
