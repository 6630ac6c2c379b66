"""Which differentiation each public op supports, the same on every backend.

* matmul, matmul_residual, fp8_dot: reverse mode (jax.grad, jax.vjp, jax.jacrev)
  through their custom_vjp rules, whose backward runs on the kernels. Forward mode
  (jax.jvp, jax.jacfwd) has no rule: `reverse_mode_only` raises a TypeError naming the
  op and the alternative at trace time (jax.linearize cannot be told apart from the
  linearization inside jax.grad: its linear function fails with JAX's own message).
* fp8_blockwise_matmul, quantize_fp8_blockwise: not differentiable on any backend (the
  kernels' FFI calls have no derivative, and a derivative through quantized inputs is not
  the one a user wants): `not_differentiable` raises a TypeError naming the op and the
  differentiable alternative whenever a derivative reaches it; the plain call is unchanged.
"""
from __future__ import annotations

import contextlib

import jax

try:  # the tracer of forward-mode differentiation (jax.jvp, jax.jacfwd)
  from jax._src.interpreters.ad import JVPTracer as _JVPTracer
except ImportError:  # a JAX without it: the error is JAX's own, raised at lowering
  _JVPTracer = None

# JAX's own message for jvp of a custom_vjp function.
_JAX_FORWARD_MODE_ERROR = "forward-mode autodiff (jvp) to a custom_vjp function"


def _forward_mode_error(op: str) -> TypeError:
  return TypeError(
        f"jax_sm100.{op} supports reverse-mode differentiation only (jax.grad, jax.vjp, "
        f"jax.jacrev): its custom_vjp rule runs the backward pass on the kernels, and "
        f"forward mode (jax.jvp, jax.jacfwd, jax.linearize) has no rule. Use jax.jacrev or "
        f"jax.vjp instead.")


def _under_forward_mode(args) -> bool:
  return _JVPTracer is not None and any(
      isinstance(x, _JVPTracer) for x in jax.tree.leaves(args))


@contextlib.contextmanager
def reverse_mode_only(op: str, *args):
  """Raises a TypeError naming `op` when forward-mode differentiation reaches it: at
  once when an operand is a forward-mode tracer (under jax.jit JAX would only fail at
  lowering, with a message naming neither the package nor the op), else by rewording
  JAX's own error."""
  if _under_forward_mode(args):
    raise _forward_mode_error(op)
  try:
    yield
  except TypeError as e:
    if _JAX_FORWARD_MODE_ERROR not in str(e):
      raise
    raise _forward_mode_error(op) from None


def not_differentiable(op: str, alternative: str, fn, *args):
  """fn(*args), raising a TypeError that names `op` if a derivative reaches it.

  args are the op's array operands (a pytree); fn closes over everything static.
  """
  message = (f"jax_sm100.{op} is not differentiable (on every backend): its inputs "
             f"are quantized. {alternative}")

  @jax.custom_vjp
  def call(*args):
    return fn(*args)

  def fwd(*args):
    raise TypeError(message)

  def bwd(res, g):  # never reached: fwd raises
    raise TypeError(message)

  call.defvjp(fwd, bwd)
  if _under_forward_mode(args):
    raise TypeError(message)
  try:
    return call(*args)
  except TypeError as e:
    if _JAX_FORWARD_MODE_ERROR in str(e):
      raise TypeError(message) from None
    raise
