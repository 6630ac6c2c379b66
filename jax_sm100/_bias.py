"""matmul_bias: act(a @ b + bias) with the bias add and the activation fused into the
GEMM's epilogue (FFI target jax_sm100_gemm_bias), its custom_vjp, and its dispatch.

Forward: z = a @ b (fp32 accumulation) + bias in fp32; d = act(z) rounded once to the
output dtype. Paths, decided at trace time per product as for matmul: the kernel (sm90;
cpu_ffi runs the target's CPU handler), XLA's own dot followed by the same fp32 epilogue
where the measured dispatch prefers XLA for the product's shape (matmul_bias's own
entries: that path writes an fp32 product and reads it back, so it loses to the kernel
where the plain matmul's XLA dot wins), and the reference (jnp, the same formula)
everywhere else: f32 inputs,
CPUs. On sm100 the kernel (compiled, SASS-checked, emulated, self-tested on first use,
never run on hardware here) runs once the gemm_bias family's self-test passed.

Backward (custom_vjp). What the forward saves, per activation:
  * none: nothing beyond a and b (dz = g);
  * relu: the output d (act'(z) = [d > 0], the same set as [z > 0]): no extra write;
  * gelu (tanh / exact), silu: the pre-activation z, rounded to the output dtype. Under
    differentiation the kernel's epilogue writes both d = act(z) and z (as in the primal
    call, d is rounded once from the fp32 z). Measured in the Flax MLP example's training
    step on an H200 (benchmarks/bench_mlp_step.py's model, GPU time): 52 us (3%) faster
    than the kernel writing z alone and XLA applying the activation in a pass of its own.
    Recomputing z in the backward pass would re-run the whole GEMM.
Then (_activations.epilogue_grads) dz = g * act'(z) in fp32, rounded once to g's dtype and
written once (an optimization barrier keeps XLA from recomputing it inside the bias
reduction: it reads g and z twice otherwise; 74 us, 4.5%, of that step), the bias
gradient db = sum of dz over every row (and batch entry) in fp32, and dz feeds the same
two product gradients matmul uses (da = dz @ b^T, db_w = a^T @ dz; _matmul._product_grads,
each dispatched like matmul). The bias gradient sums the rounded dz that the product
gradients see, as XLA's autodiff of a bf16 `act(x @ w + b)` does.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _activations, _autodiff, _backend, _checks, _explain
from jax_sm100 import _matmul
from jax_sm100._launch import bias as _launch_bias

OP = "matmul_bias"


def _bias_call(ctx, a, b, bias, name, out_dtype, want_pre):
  """(d, pre or None) of one product where the dispatch says: the kernel (its launch layer,
  which may take the reference) or XLA's dot followed by the fp32 epilogue."""
  out_dtype = np.dtype(out_dtype)
  target = _launch_bias.TARGET
  choice = None
  if _launch_bias.why_not_kernel(ctx, a, b, out_dtype) is None:
    choice = _matmul._choice(ctx, OP, target, a, b, False, False, out_dtype)
  if choice is not None and choice.path == "xla":
    _explain.note_xla(target, [x.shape for x in (a, b, bias) if x is not None], choice.why)
    return _activations.reference(a, b, bias, False, False, name, out_dtype, want_pre)
  return _launch_bias.gemm_bias(_matmul._kernel_ctx(ctx, choice), a, b, bias, False, False,
                                name, want_pre, out_dtype)


def _forward(ctx, name, out_dtype, has_bias, a, b, bias, want_pre):
  """(d, pre or None); a batched a with a 2-D b is folded into M (one GEMM)."""
  bias = bias if has_bias else None
  if b.ndim == 2 and a.ndim > 2:
    d, pre = _bias_call(ctx, _matmul._rows(a), b, bias, name, out_dtype, want_pre)
    shape = a.shape[:-1] + (b.shape[-1],)
    return d.reshape(shape), (None if pre is None else pre.reshape(shape))
  return _bias_call(ctx, a, b, bias, name, out_dtype, want_pre)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def _matmul_bias(ctx, name, out_dtype, has_bias, a, b, bias):
  return _forward(ctx, name, out_dtype, has_bias, a, b, bias, want_pre=False)[0]


def _matmul_bias_fwd(ctx, name, out_dtype, has_bias, a, b, bias):
  if name in _activations.NEEDS_PRE:
    # Differentiated gelu/silu: the epilogue writes d and z, z is saved (module docstring).
    d, z = _forward(ctx, name, out_dtype, has_bias, a, b, bias, True)
    return d, (a, b, z)
  d, _ = _forward(ctx, name, out_dtype, has_bias, a, b, bias, False)
  return d, (a, b, d if name == "relu" else None)


def _matmul_bias_bwd(ctx, name, out_dtype, has_bias, res, g):
  del out_dtype
  a, b, saved = res
  dz, dbias = _activations.epilogue_grads(name, saved, g, has_bias)
  da, db = _matmul._product_grads(ctx, a, b, dz)
  return da, db, dbias


_matmul_bias.defvjp(_matmul_bias_fwd, _matmul_bias_bwd)


def matmul_bias(a, b, bias=None, *, activation=None, out_dtype=None):
  """act(a @ b + bias), the bias add and the activation fused into the GEMM's epilogue.

  Args:
    a: (..., M, K), bfloat16, float16 or float32 (as in `matmul`).
    b: (K, N) or (..., K, N), a's dtype, leading dims broadcasting against a's.
    bias: None, or shape (N,) of any float dtype (added in float32; its gradient comes
      back in its own dtype).
    activation: None (identity), "relu", "gelu" (the tanh approximation, jax.nn.gelu's
      default; also "gelu_tanh"), "gelu_exact" (erf; also "gelu_erf"), "silu" (also
      "swish").
    out_dtype: bfloat16, float16 or float32; defaults to a's dtype.
  Returns:
    (..., M, N) in out_dtype: act(z) rounded once, z = a @ b + bias in float32.

  bf16/fp16 inputs run the sm90 kernel's fused epilogue (or XLA's dot with the same fp32
  epilogue where the measured dispatch prefers XLA for the shape), on sm100 the sm_100a
  kernel once its first-use self-test passed; everything else the reference.
  Differentiable (reverse mode) in a, b and bias: the backward reuses the saved
  pre-activation for gelu/silu, the output for relu (module docstring).
  """
  a, b, out_shape = _matmul._validate_pair(OP, a, b)
  name = _activations.canonical(OP, activation)
  out_dtype = _checks.out_dtype_or(OP, out_dtype, a.dtype)
  n = out_shape[-1]
  bias = _checks.bias_vector(OP, bias, n)
  bias32 = jnp.zeros((0,), jnp.float32) if bias is None else bias.astype(jnp.float32)
  with _autodiff.reverse_mode_only(OP, a, b, bias32):
    return _matmul_bias(_backend.context(), name, out_dtype, bias is not None, a, b, bias32)
