"""matmul and matmul_residual: validation, custom_vjp, the measured dispatch of each
product (our kernel or XLA's own dot: jax_sm100._dispatch_table), the launch layer."""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _autodiff, _backend, _checks, _dispatch_table, _explain, _reference, tuning
from jax_sm100._launch import gemm as _gemm


def _sum_to(x, shape, dtype):
  """Sum x over the dims that were broadcast to reach x.shape from `shape`."""
  lead = x.ndim - len(shape)
  axes = tuple(range(lead)) + tuple(
      lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1)
  if axes:
    x = jnp.sum(x.astype(jnp.float32), axis=axes).reshape(shape)
  return x.astype(dtype)


def _rows(x):
  """x reshaped to 2-D (all leading dims folded into rows); free for row-major."""
  return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _validate_pair(op, a, b):
  a = _checks.as_array(op, "a", a)
  b = _checks.as_array(op, "b", b)
  _checks.check_dtype(op, "a", a, _checks.FLOAT_DTYPES)
  _checks.check_dtype(op, "b", b, _checks.FLOAT_DTYPES)
  if a.dtype != b.dtype:
    raise TypeError(f"jax_sm100.{op}: a and b must have the same dtype; got "
                    f"{a.dtype.name} and {b.dtype.name}.")
  _checks.check_rank(op, "a", a, 2, "(..., M, K)")
  _checks.check_rank(op, "b", b, 2, "(K, N) or (..., K, N)")
  if a.shape[-1] != b.shape[-2]:
    raise ValueError(f"jax_sm100.{op}: a's last dim (K={a.shape[-1]}) must equal b's "
                     f"second-to-last dim; got a {tuple(a.shape)}, b {tuple(b.shape)}.")
  out_b = _checks.batch_shape(op, ("a", a.shape[:-2]), ("b", b.shape[:-2]))
  return a, b, out_b + (a.shape[-2], b.shape[-1])


# ----------------------------------------------------------------------------
# The measured dispatch of one product
# ----------------------------------------------------------------------------

def _choice(ctx, op, target, a, b, trans_a, trans_b, out_dtype, c=None):
  """The dispatch of one product (a Choice), or None where the kernel cannot run it
  (the launch layer then takes the reference and says why)."""
  if _gemm.why_not_kernel(ctx, target, a, b, out_dtype, c) is not None:
    return None
  m, n, k = _gemm._dims(a, b, trans_a, trans_b)
  batch = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
  return _dispatch_table.decide(ctx.tuning, op, a.dtype, m, n, k, batch)


def _kernel_ctx(ctx, choice):
  """ctx whose tuning settings carry the measured configuration for the launch."""
  if choice is None:
    return ctx
  settings = ctx.tuning if ctx.tuning is not None else tuning.Settings()
  return ctx._replace(tuning=dataclasses.replace(settings,
                                                 gemm_choice=(choice.config, choice.why)))


def _xla_dot(a, b, trans_a, trans_b, out_dtype):
  """XLA's own dot for a product the dispatch sends there: lax.dot_general writing the
  output dtype (XLA's GPU dot accumulates bf16/fp16 in fp32 and rounds once, the
  kernel's contract); another output dtype takes the reference formula."""
  if out_dtype not in (a.dtype, np.dtype(np.float32)):
    return _reference.gemm(a, b, trans_a, trans_b, out_dtype)
  if trans_a:
    a = jnp.swapaxes(a, -1, -2)  # folded into the dot's dimension numbers
  if trans_b:
    b = jnp.swapaxes(b, -1, -2)
  return jnp.matmul(a, b, preferred_element_type=out_dtype)


def _gemm_call(ctx, a, b, trans_a, trans_b, out_dtype):
  """op(a) @ op(b) where the dispatch says: the kernel (its launch layer) or XLA's dot."""
  out_dtype = np.dtype(out_dtype)
  choice = _choice(ctx, "matmul", _gemm.TARGET, a, b, trans_a, trans_b, out_dtype)
  if choice is not None and choice.path == "xla":
    _explain.note_xla(_gemm.TARGET, [a.shape, b.shape], choice.why)
    return _xla_dot(a, b, trans_a, trans_b, out_dtype)
  return _gemm.gemm(_kernel_ctx(ctx, choice), a, b, trans_a, trans_b, out_dtype)


def _residual_call(ctx, a, b, c, alpha, beta, out_dtype):
  """alpha * a @ b + beta * c where the dispatch says: the kernel or, on XLA, the
  reference formula (fp32 epilogue, one rounding)."""
  out_dtype = np.dtype(out_dtype)
  target = _gemm.RESIDUAL_TARGET
  choice = _choice(ctx, "matmul_residual", target, a, b, False, False, out_dtype, c)
  if choice is not None and choice.path == "xla":
    _explain.note_xla(target, [a.shape, b.shape, c.shape], choice.why)
    return _reference.gemm(a, b, False, False, out_dtype, c=c, alpha=alpha, beta=beta)
  return _gemm.gemm_residual(_kernel_ctx(ctx, choice), a, b, c, False, False, alpha, beta,
                             out_dtype)


# ----------------------------------------------------------------------------
# Products
# ----------------------------------------------------------------------------

def _product(ctx, a, b, out_dtype):
  """a @ b; a batched with b 2-D is folded into M: one (B*M, K) x (K, N) GEMM."""
  if b.ndim == 2 and a.ndim > 2:
    d = _gemm_call(ctx, _rows(a), b, False, False, out_dtype)
    return d.reshape(a.shape[:-1] + (b.shape[-1],))
  return _gemm_call(ctx, a, b, False, False, out_dtype)


def _product_grads(ctx, a, b, g):
  """(dA, dB) of d = a @ b for cotangent g; every product goes through the launch layer's gemm
  with transpose flags (no materialized transposes on the kernel path)."""
  if b.ndim == 2:
    # One GEMM each: batch folded into M.  dA = g @ b^T,  dB = a^T @ g.
    g2 = _rows(g)
    da = _gemm_call(ctx, g2, b, False, True, a.dtype).reshape(a.shape)
    db = _gemm_call(ctx, _rows(a), g2, True, False, b.dtype)
    return da, db
  out_b = g.shape[:-2]
  a_red = tuple(a.shape[:-2]) != tuple(out_b)
  b_red = tuple(b.shape[:-2]) != tuple(out_b)
  # Products summed over broadcast batch dims are produced in f32 first.
  da = _gemm_call(ctx, g, b, False, True, jnp.float32 if a_red else a.dtype)
  db = _gemm_call(ctx, a, g, True, False, jnp.float32 if b_red else b.dtype)
  return _sum_to(da, a.shape, a.dtype), _sum_to(db, b.shape, b.dtype)


# ----------------------------------------------------------------------------
# matmul
# ----------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _matmul(ctx, out_dtype, a, b):
  return _product(ctx, a, b, out_dtype)


def _matmul_fwd(ctx, out_dtype, a, b):
  return _product(ctx, a, b, out_dtype), (a, b)


def _matmul_bwd(ctx, out_dtype, res, g):
  del out_dtype
  a, b = res
  return _product_grads(ctx, a, b, g)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def matmul(a, b, *, out_dtype=None):
  """a @ b with fp32 accumulation.

  Args:
    a: (..., M, K), bfloat16, float16 or float32.
    b: (K, N) or (..., K, N) with leading dims that broadcast against a's; same
      dtype as a.
    out_dtype: bfloat16, float16 or float32; defaults to a's dtype.
  Returns:
    (..., M, N) in out_dtype.

  bf16/fp16 inputs run the compiled kernel on a supported GPU (backend()), f32
  and everything else the reference. Each product goes to the kernel or to XLA's own
  dot, whichever was measured faster for its shape on this GPU kind (the dispatch
  table, or jax_sm100.autotune's cache; tuning.override(dispatch=...) forces either;
  tuning.explain says which and why). Differentiable (reverse mode): dA = g@b^T,
  dB = a^T@g, each product through the same dispatch.
  """
  a, b, _ = _validate_pair("matmul", a, b)
  out_dtype = _checks.out_dtype_or("matmul", out_dtype, a.dtype)
  with _autodiff.reverse_mode_only("matmul", a, b):
    return _matmul(_backend.context(), out_dtype, a, b)


# ----------------------------------------------------------------------------
# matmul_residual
# ----------------------------------------------------------------------------

def _residual(ctx, alpha, beta, out_dtype, a, b, c):
  if b.ndim == 2 and a.ndim > 2 and c.shape == a.shape[:-1] + (b.shape[-1],):
    d = _residual_call(ctx, _rows(a), b, _rows(c), alpha, beta, out_dtype)
    return d.reshape(c.shape)
  return _residual_call(ctx, a, b, c, alpha, beta, out_dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def _matmul_residual(ctx, alpha, beta, out_dtype, a, b, c):
  return _residual(ctx, alpha, beta, out_dtype, a, b, c)


def _matmul_residual_fwd(ctx, alpha, beta, out_dtype, a, b, c):
  return _residual(ctx, alpha, beta, out_dtype, a, b, c), (a, b, c)


def _matmul_residual_bwd(ctx, alpha, beta, out_dtype, res, g):
  del out_dtype
  a, b, c = res
  if beta == 0.0:
    dc = jnp.zeros_like(c)
  else:
    dc = _sum_to(g.astype(jnp.float32) * np.float32(beta), c.shape, c.dtype)
  # alpha scales the cotangent once (exact when alpha is a power of two).
  ga = g if alpha == 1.0 else (g.astype(jnp.float32) * np.float32(alpha)).astype(g.dtype)
  da, db = _product_grads(ctx, a, b, ga)
  return da, db, dc


_matmul_residual.defvjp(_matmul_residual_fwd, _matmul_residual_bwd)


def matmul_residual(a, b, c, *, alpha=1.0, beta=1.0, out_dtype=None):
  """alpha * (a @ b) + beta * c, fused (fp32 accumulation and epilogue).

  Args:
    a, b: as in `matmul`.
    c: the residual, shaped like the product (..., M, N) or (M, N) (broadcast
      over the batch), with the output dtype.
    alpha, beta: finite Python real numbers (static kernel attributes).
      beta == 0 means c is not read at all (NaN in c does not propagate).
    out_dtype: bfloat16, float16 or float32; defaults to a's dtype.
  Returns:
    (..., M, N) in out_dtype. Differentiable in a, b, c (dC = beta * g).

  Dispatched like matmul (per product: the kernel, or XLA computing the same formula
  in fp32 with one rounding, where that was measured faster).
  """
  op = "matmul_residual"
  a, b, out_shape = _validate_pair(op, a, b)
  c = _checks.as_array(op, "c", c)
  alpha = _checks.static_scalar(op, "alpha", alpha)
  beta = _checks.static_scalar(op, "beta", beta)
  out_dtype = _checks.out_dtype_or(op, out_dtype, a.dtype)
  if c.dtype != out_dtype:
    raise TypeError(f"jax_sm100.{op}: c must have the output dtype {out_dtype.name}; "
                    f"got {c.dtype.name} (cast c or pass out_dtype).")
  if tuple(c.shape) not in (tuple(out_shape), tuple(out_shape[-2:])):
    accepted = f"the product's shape {tuple(out_shape)}"
    if len(out_shape) > 2:
      accepted += f" or (M, N) = {tuple(out_shape[-2:])} (broadcast over the batch)"
    hint = ""
    if c.ndim == 1 and c.shape[0] == out_shape[-1]:
      hint = (f" A bias of shape (N,) is not broadcast here: pass "
              f"jnp.broadcast_to(c, {tuple(out_shape[-2:])}).")
    raise ValueError(f"jax_sm100.{op}: c must have {accepted}; got {tuple(c.shape)}.{hint}")
  with _autodiff.reverse_mode_only(op, a, b, c):
    return _matmul_residual(_backend.context(), alpha, beta, out_dtype, a, b, c)
