"""Grouped (mixture-of-experts) GEMMs: ragged_dot (a drop-in for jax.lax.ragged_dot),
ragged_dot_general, fp8_grouped_matmul and fp8_ragged_dot (validation, custom_vjp,
launches of the grouped FFI targets, reference math).

  jax_sm100_grouped_gemm      out[r] = lhs[r] @ rhs[g(r)]         (forward, lhs gradient)
  jax_sm100_kgrouped_gemm     out[g] = lhs[rows g]^T @ dy[rows g]  (rhs gradient)
  jax_sm100_fp8_grouped_gemm  the FP8 blockwise form of the first

Groups (ffi/src/common/grouped_problem.h): rows of lhs are grouped contiguously in group
order; group g owns rows [start_g, start_g + size_g) cut at M; rows past the last group
give zeros. This is jax.lax.ragged_dot's rule for non-negative sizes. A negative size is
invalid: it raises ValueError where the sizes are on the host at trace time (NumPy, Python,
an array on a CPU device); elsewhere (traced, or on a GPU, where reading it would
synchronise) it counts as 0 on every path (lax would let the groups overlap). The sizes
reach the kernels as int32 clipped to [0, M] (the same groups), read on the device only:
no host synchronisation, safe inside CUDA graphs.

Paths: the kernels on backend() 'sm90' (and the CPU handlers on 'cpu_ffi') for bf16/fp16
inputs of one dtype (FP8: e4m3 with a bf16 output), and on 'sm100' the same three kernels
behind their first-use self-tests; the reference (lax.ragged_dot in fp32, or dequantize +
lax.ragged_dot) everywhere else, and for the
targets named in JAX_SM100_DISABLE_TARGETS. Under vmap the
grouped products take the reference (lax's batched ragged dot; the kernels' groups cannot
fold a batch into M).

Partitioning under jit over a mesh (partition.grouped_spec): the launches shard N (the
weights' output columns) with no communication and the contraction K with one psum of
the partials (FP8: K on 128-element block boundaries); the token dim M and the group dim
G stay whole (operands sharded on them are gathered: the groups are global prefix sums
of group_sizes; expert parallelism would need an all-to-all of the tokens). The
K-grouped product (G, K, N) shards K and N; its contraction over tokens stays whole.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_sm100 import _autodiff, _backend, _checks
from jax_sm100._fp8 import _quantize_weight
from jax_sm100._launch import quantize as _quant
from jax_sm100._util import cdiv, pad_to, round_up

# The launch layer; _grouped_kernel, ref_grouped and KGROUPED_DIMS are re-exported for the
# self-test families and the tests.
from jax_sm100._launch.grouped import (  # noqa: F401
    BASIC_DIMS, BLOCK, E4M3, F32, KGROUPED_DIMS, _grouped_kernel, fp8_grouped, fp8_kernel_ok,
    grouped, kgrouped, ref_grouped)


# ----------------------------------------------------------------------------
# group_sizes
# ----------------------------------------------------------------------------

def _host_values(x):
  """x's values when they are on the host at trace time, else None (no transfer)."""
  if isinstance(x, jax.core.Tracer):
    return None
  if isinstance(x, jax.Array):
    try:
      return np.asarray(x) if all(d.platform == "cpu" for d in x.devices()) else None
    except Exception:  # a deleted or not yet materialized array: no check
      return None
  if isinstance(x, (np.ndarray, np.generic, list, tuple)):
    return np.asarray(x)
  return None


def group_sizes_arg(op: str, group_sizes, groups: int | None, m: int):
  """group_sizes checked (integer dtype, shape (groups,) or any (G,) when groups is None,
  non-negative where known) and made the kernels' operand: int32, clipped to [0, m] (the
  same groups)."""
  host = _host_values(group_sizes)
  gs = _checks.as_array(op, "group_sizes", group_sizes)
  if not np.issubdtype(gs.dtype, np.integer):
    raise TypeError(f"jax_sm100.{op}: group_sizes must have an integer dtype (int32); got "
                    f"{gs.dtype.name}.")
  if groups is None and gs.ndim != 1:
    raise ValueError(f"jax_sm100.{op}: group_sizes must have shape (G,), one size per "
                     f"group; got {tuple(gs.shape)}.")
  if groups is not None and gs.shape != (groups,):
    raise ValueError(f"jax_sm100.{op}: group_sizes must have shape (G,) = ({groups},), one "
                     f"size per group of the weights; got {tuple(gs.shape)}.")
  if host is not None and (host < 0).any():
    bad = int(np.argmax(host < 0))
    raise ValueError(f"jax_sm100.{op}: group_sizes must be non-negative; group {bad} has "
                     f"size {int(host[bad])}.")
  if np.dtype(gs.dtype).itemsize > 4 or gs.dtype == np.uint32:
    gs = jnp.clip(gs, 0, m)  # clip in the wide type before narrowing
  return jnp.clip(gs.astype(jnp.int32), 0, m)


# ----------------------------------------------------------------------------
# ragged_dot, ragged_dot_general
# ----------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _ragged(ctx, out_dtype, precision, lhs, rhs, gs):
  return grouped(ctx, lhs, rhs, gs, False, out_dtype, precision)


def _ragged_fwd(ctx, out_dtype, precision, lhs, rhs, gs):
  return grouped(ctx, lhs, rhs, gs, False, out_dtype, precision), (lhs, rhs, gs)


def _ragged_bwd(ctx, out_dtype, precision, res, ct):
  del out_dtype
  lhs, rhs, gs = res
  # dlhs[r] = ct[r] @ rhs[g(r)]^T (rows in no group: 0); drhs[g] = lhs_g^T @ ct_g.
  dlhs = grouped(ctx, ct, rhs, gs, True, lhs.dtype, precision)
  drhs = kgrouped(ctx, lhs, ct, gs, rhs.dtype, precision)
  return dlhs, drhs, None


_ragged.defvjp(_ragged_fwd, _ragged_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _kgrouped_op(ctx, out_dtype, precision, lhs, dy, gs):
  return kgrouped(ctx, lhs, dy, gs, out_dtype, precision)


def _kgrouped_op_fwd(ctx, out_dtype, precision, lhs, dy, gs):
  return kgrouped(ctx, lhs, dy, gs, out_dtype, precision), (lhs, dy, gs)


def _kgrouped_op_bwd(ctx, out_dtype, precision, res, ct):
  del out_dtype
  lhs, dy, gs = res
  # out[g] = lhs_g^T @ dy_g: dlhs[r] = dy[r] @ ct[g(r)]^T, ddy[r] = lhs[r] @ ct[g(r)].
  return (grouped(ctx, dy, ct, gs, True, lhs.dtype, precision),
          grouped(ctx, lhs, ct, gs, False, dy.dtype, precision), None)


_kgrouped_op.defvjp(_kgrouped_op_fwd, _kgrouped_op_bwd)


def _out_dtype(op, out_dtype, preferred_element_type, default):
  if out_dtype is not None and preferred_element_type is not None and (
      np.dtype(out_dtype) != np.dtype(preferred_element_type)):
    raise ValueError(f"jax_sm100.{op}: out_dtype and preferred_element_type disagree "
                     f"({out_dtype} vs {preferred_element_type}); pass one.")
  return _checks.out_dtype_or(op, out_dtype if out_dtype is not None else
                              preferred_element_type, default)


def _float_operands(op, names, *xs):
  xs = [_checks.as_array(op, name, x) for name, x in zip(names, xs)]
  for name, x in zip(names, xs):
    _checks.check_dtype(op, name, x, _checks.FLOAT_DTYPES)
  return xs


def _no_group_offset(op, group_offset):
  if group_offset is not None:
    raise NotImplementedError(f"jax_sm100.{op}: group_offset is not supported (neither is it "
                              "by jax.lax.ragged_dot's differentiation rules).")


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, *, out_dtype=None):
  """jax.lax.ragged_dot on the grouped kernels: out[r] = lhs[r] @ rhs[g] for the rows r of
  group g, with fp32 accumulation.

  Args:
    lhs: (M, K) bfloat16, float16 or float32, rows grouped contiguously in group order.
    rhs: (G, K, N), one weight matrix per group.
    group_sizes: (G,) integer: group g has the next group_sizes[g] rows. A group that
      runs past M is cut at M; rows past sum(group_sizes) give zeros. Negative sizes are
      invalid (module docstring).
    precision: passed to lax on the reference path (the kernels always multiply
      bf16/fp16 exactly and accumulate in fp32).
    preferred_element_type / out_dtype (the same thing): bfloat16, float16 or float32;
      default: the promoted input dtype, as lax's.
    group_offset: unsupported (NotImplementedError), as in lax's derivative rules.
  Returns:
    (M, N). Differentiable in lhs and rhs (reverse mode): dlhs is the grouped product of
    the cotangent with the transposed weights, drhs the K-grouped product lhs_g^T @ ct_g,
    both on the kernels. Paths: module docstring.
  """
  op = "ragged_dot"
  _no_group_offset(op, group_offset)
  lhs, rhs = _float_operands(op, ("lhs", "rhs"), lhs, rhs)
  _checks.check_rank(op, "lhs", lhs, 2, "(M, K)", max_rank=2)
  _checks.check_rank(op, "rhs", rhs, 3, "(G, K, N)", max_rank=3)
  if lhs.shape[1] != rhs.shape[1]:
    raise ValueError(f"jax_sm100.{op}: lhs (M, K) and rhs (G, K, N) must have the same K; got "
                     f"lhs {tuple(lhs.shape)}, rhs {tuple(rhs.shape)}.")
  out = _out_dtype(op, out_dtype, preferred_element_type,
                   jnp.promote_types(lhs.dtype, rhs.dtype))
  gs = group_sizes_arg(op, group_sizes, rhs.shape[0], lhs.shape[0])
  with _autodiff.reverse_mode_only(op, lhs, rhs):
    return _ragged(_backend.context(), out, precision, lhs, rhs, gs)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None):
  """jax.lax.ragged_dot_general with two forms on the grouped kernels:

    * ragged_dot's: lhs (M, K), rhs (G, K, N), ragged dim 0 of lhs, group dim 0 of rhs
      -> ragged_dot (above);
    * its rhs gradient's: lhs (M, K), rhs (M, N), ragged and contracting dim 0 of both,
      no group dim -> (G, K, N), out[g] = lhs_g^T @ rhs_g (differentiable, on the kernels).

  Every other form (batch dims, several free or contracting dims, a ragged batch dim)
  calls jax.lax.ragged_dot_general unchanged.
  """
  op = "ragged_dot_general"
  dims = ragged_dot_dimension_numbers
  shapes = (np.ndim(lhs), np.ndim(rhs))
  if dims == BASIC_DIMS and shapes == (2, 3):
    return ragged_dot(lhs, rhs, group_sizes, precision, preferred_element_type, group_offset)
  if dims != KGROUPED_DIMS or shapes != (2, 2):
    return lax.ragged_dot_general(lhs, rhs, group_sizes, dims, precision=precision,
                                  preferred_element_type=preferred_element_type,
                                  group_offset=group_offset)
  _no_group_offset(op, group_offset)
  lhs, rhs = _float_operands(op, ("lhs", "rhs"), lhs, rhs)
  if lhs.shape[0] != rhs.shape[0]:
    raise ValueError(f"jax_sm100.{op}: lhs (M, K) and rhs (M, N) must have the same M (the "
                     f"ragged contracting dim); got lhs {tuple(lhs.shape)}, rhs "
                     f"{tuple(rhs.shape)}.")
  out = _out_dtype(op, None, preferred_element_type, jnp.promote_types(lhs.dtype, rhs.dtype))
  gs = group_sizes_arg(op, group_sizes, None, lhs.shape[0])
  with _autodiff.reverse_mode_only(op, lhs, rhs):
    return _kgrouped_op(_backend.context(), out, precision, lhs, rhs, gs)


# ----------------------------------------------------------------------------
# FP8: fp8_grouped_matmul, fp8_ragged_dot
# ----------------------------------------------------------------------------

def _check_shape(op, name, x, want, layout):
  if tuple(x.shape) != tuple(want):
    raise ValueError(f"jax_sm100.{op}: {name} must have shape {layout} = {tuple(want)}; got "
                     f"{tuple(x.shape)}.")


def fp8_grouped_matmul(a, a_scale, b, b_scale, group_sizes, *, out_dtype=jnp.bfloat16,
                       a_scale_transposed=False):
  """Grouped FP8 blockwise product: out[r] = (a[r] * a_scale[r]) @ (b[g] * b_scale[g])^T
  for the rows r of group g (groups as ragged_dot's), zeros for rows in no group.

  Args:
    a: (M, K) float8_e4m3fn (or e5m2: reference path) with a_scale (M, ceil(K/128))
      float32 in 1x128 blocks along K; with a_scale_transposed=True, a_scale is
      (ceil(K/128), M), the layout the kernel reads (quantize_fp8_blockwise(...,
      scale_transposed=True)), as in fp8_blockwise_matmul.
    b: (G, N, K) float8 (each expert's weight transposed, K-major) with b_scale
      (G, ceil(N/128), ceil(K/128)) float32 in 128x128 blocks.
    group_sizes: (G,) integer, as in ragged_dot.
    out_dtype: bfloat16 (the kernel's), float16 or float32 (reference).
  Returns:
    (M, N) in out_dtype. Not differentiable (its inputs are quantized): fp8_ragged_dot
    trains.
  """
  op = "fp8_grouped_matmul"
  a, b = _checks.as_array(op, "a", a), _checks.as_array(op, "b", b)
  a_scale = _checks.as_array(op, "a_scale", a_scale)
  b_scale = _checks.as_array(op, "b_scale", b_scale)
  for name, x in (("a", a), ("b", b)):
    _checks.check_dtype(op, name, x, _checks.FP8_DTYPES)
  for name, x in (("a_scale", a_scale), ("b_scale", b_scale)):
    _checks.check_dtype(op, name, x, (F32,))
  _checks.check_rank(op, "a", a, 2, "(M, K)", max_rank=2)
  _checks.check_rank(op, "b", b, 3, "(G, N, K)", max_rank=3)
  (m, k), (g, n, kb) = a.shape, b.shape
  if k != kb:
    raise ValueError(f"jax_sm100.{op}: a (M, K) and b (G, N, K) must have the same K; got "
                     f"a {tuple(a.shape)}, b {tuple(b.shape)}.")
  a_scale_transposed = _checks.static_bool(op, "a_scale_transposed", a_scale_transposed)
  if a_scale_transposed:
    _check_shape(op, "a_scale", a_scale, (cdiv(k, BLOCK), m),
                 "(ceil(K/128), M) with a_scale_transposed=True")
  else:
    _check_shape(op, "a_scale", a_scale, (m, cdiv(k, BLOCK)), "(M, ceil(K/128))")
  _check_shape(op, "b_scale", b_scale, (g, cdiv(n, BLOCK), cdiv(k, BLOCK)),
               "(G, ceil(N/128), ceil(K/128))")
  out_dtype = _checks.out_dtype_or(op, out_dtype, jnp.bfloat16)
  gs = group_sizes_arg(op, group_sizes, g, m)
  ctx = _backend.context()

  def run(a, a_scale, b, b_scale):
    return fp8_grouped(ctx, a, a_scale, b, b_scale, gs, a_scale_transposed, out_dtype)

  return _autodiff.not_differentiable(
      op, "Use fp8_ragged_dot (quantization inside, FP8 backward) to train.", run,
      a, a_scale, b, b_scale)


def _quantize_weights(ctx, w):
  """w (G, K, N) per expert in 128x128 blocks, both ways: ((wq (G, K, N), ws (G, K/128,
  N/128)), (wtq (G, N, K), wts (G, N/128, K/128))); the same tiles (fp8_dot's rule).

  One 2-D quantization of the experts stacked along K, (G*Kp, N) with K zero-padded to
  Kp = round_up(K, 128): every 128x128 tile then lies inside one expert and the pad rows
  share the last tile of their expert without changing its amax, so the result is the
  per-expert one bit for bit. Stacking along K keeps N the minor dim: a weight sharded
  on N is quantized on its local columns (no gather, as a vmap folding G into the
  transposed rows would need)."""
  g, k, n = w.shape
  kp = round_up(k, BLOCK)
  (wq, ws), (wtq, wts) = _quantize_weight(ctx, pad_to(w, 1, kp).reshape(g * kp, n))
  nb = wts.shape[0]
  wq, ws = wq.reshape(g, kp, n)[:, :k], ws.reshape(g, kp // BLOCK, ws.shape[-1])
  wtq = jnp.transpose(wtq.reshape(n, g, kp), (1, 0, 2))[:, :, :k]
  wts = jnp.transpose(wts.reshape(nb, g, kp // BLOCK), (1, 0, 2))
  return (wq, ws), (wtq, wts)


def _quantize_rows(ctx, x, kernel: bool):
  """x (M, C) in 1x128 blocks along C: (q, scale), the scale as a_scale_t for the kernel."""
  return _quant.quantize(ctx, x, (1, BLOCK), E4M3, scale_transposed=kernel, for_gemm=True)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _fp8_ragged(ctx, out_dtype, w_dtype, x, w, gs):
  return _fp8_ragged_fwd(ctx, out_dtype, w_dtype, x, w, gs)[0]


def _fp8_ragged_fwd(ctx, out_dtype, w_dtype, x, w, gs):
  del w_dtype
  (m, k), (g, _, n) = x.shape, w.shape
  kernel = fp8_kernel_ok(ctx, m, n, k, g, out_dtype)
  xq, xs = _quantize_rows(ctx, x, kernel)
  (wq, ws), (wtq, wts) = _quantize_weights(ctx, w)
  y = fp8_grouped(ctx, xq, xs, wtq, wts, gs, kernel, out_dtype)
  # The weight gradient needs x itself (see fp8_ragged_dot), dx the quantized w.
  return y, (x, wq, ws, gs)


def _fp8_ragged_bwd(ctx, out_dtype, w_dtype, res, ct):
  del out_dtype
  x, wq, ws, gs = res
  (m, k), (g, n) = x.shape, (wq.shape[0], wq.shape[2])
  # dx[r] = ct[r] @ w[g]^T: ct in 1x128 blocks along N, w (G, K, N) read as (G, N', K')
  # with N' = K, its 128x128 tiles the forward's (transpose-invariant).
  kernel = fp8_kernel_ok(ctx, m, k, n, g, x.dtype)
  cq, cs = _quantize_rows(ctx, ct, kernel)
  dx = fp8_grouped(ctx, cq, cs, wq, ws, gs, kernel, x.dtype)
  # dw[g] = x_g^T @ ct_g in bf16/fp16 on the K-grouped kernel.
  dw = kgrouped(ctx, x, ct, gs, w_dtype)
  return dx, dw, None


_fp8_ragged.defvjp(_fp8_ragged_fwd, _fp8_ragged_bwd)


def fp8_ragged_dot(x, w, group_sizes, *, out_dtype=None):
  """ragged_dot computed in FP8 with blockwise scales (the DeepSeek-V3 recipe per expert).

  Args:
    x: (M, K) bfloat16, float16 or float32, rows grouped by expert as in ragged_dot;
      quantized in 1x128 blocks along K (a block never spans two rows, so never two
      experts).
    w: (G, K, N) bfloat16, float16 or float32, one matrix per expert, each quantized in
      128x128 blocks.
    group_sizes: (G,) integer, as in ragged_dot.
    out_dtype: bfloat16 (the kernel's), float16 or float32 (reference); default: the
      promoted input dtype.
  Returns:
    (M, N). Its custom_vjp: dx = Q(ct) @ Q(w)^T per expert in FP8 (ct in 1x128 blocks
    along N; w's 128x128 tiles are transpose-invariant, so the forward's quantized w
    serves, transposed); dw = x_g^T @ ct_g per expert in bf16/fp16 on the K-grouped
    kernel, not in FP8: its contraction runs over tokens, and 1x128 blocks along tokens
    would straddle experts (group boundaries fall anywhere), so an FP8 wgrad would need
    every group padded to a multiple of 128 rows (DeepGEMM's M alignment) or scales that
    restart at each group's first row. The bf16 K-grouped product is exact in its inputs
    and costs a third of the step's FLOPs.
  """
  op = "fp8_ragged_dot"
  x, w = _float_operands(op, ("x", "w"), x, w)
  _checks.check_rank(op, "x", x, 2, "(M, K)", max_rank=2)
  _checks.check_rank(op, "w", w, 3, "(G, K, N)", max_rank=3)
  if x.shape[1] != w.shape[1]:
    raise ValueError(f"jax_sm100.{op}: x (M, K) and w (G, K, N) must have the same K; got "
                     f"x {tuple(x.shape)}, w {tuple(w.shape)}.")
  out = _checks.out_dtype_or(op, out_dtype, jnp.promote_types(x.dtype, w.dtype))
  gs = group_sizes_arg(op, group_sizes, w.shape[0], x.shape[0])
  with _autodiff.reverse_mode_only(op, x, w):
    return _fp8_ragged(_backend.context(), out, np.dtype(w.dtype), x, w, gs)
