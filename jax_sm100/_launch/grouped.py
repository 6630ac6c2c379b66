"""The grouped GEMMs' launch layer (jax_sm100/_grouped.py holds the public ops): the three
grouped FFI targets' launches (padding, attributes, the tile choice, partitioning, vmap
rules), the choice between kernel and reference per product, and the reference math
(fp32 accumulation, one rounding) every grouped kernel is tested against.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

from jax_sm100 import _explain, _reference, _selftest_guard, tuning
from jax_sm100._launch import partition
from jax_sm100._launch.fp8 import transpose_a_scale, untranspose_a_scale
from jax_sm100._util import pad_to, round_up

TARGET = "jax_sm100_grouped_gemm"
KGROUPED_TARGET = "jax_sm100_kgrouped_gemm"
FP8_TARGET = "jax_sm100_fp8_grouped_gemm"
BLOCK = _reference.FP8_BLOCK
BF16, F32 = np.dtype(jnp.bfloat16), np.dtype(np.float32)
E4M3 = np.dtype(jnp.float8_e4m3fn)
KERNEL_IN = (BF16, np.dtype(jnp.float16))
KERNEL_OUT = (BF16, np.dtype(jnp.float16), F32)
FP8_MAX_K = 65536
# lax.ragged_dot's form, and the form of its rhs gradient (ragged contracting dim).
BASIC_DIMS = lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])
KGROUPED_DIMS = lax.RaggedDotDimensionNumbers((([0], [0]), ([], [])), [0], [])


# ----------------------------------------------------------------------------
# Reference math (fp32 accumulation, one rounding)
# ----------------------------------------------------------------------------

def ref_grouped(lhs, rhs, gs, trans_rhs, out_dtype, precision=None):
  """out[r] = lhs[r] @ rhs[g(r)] (rhs (G, N, K) when trans_rhs); zeros outside groups."""
  ct = jnp.promote_types(lhs.dtype, rhs.dtype)
  rhs = jnp.swapaxes(rhs, 1, 2) if trans_rhs else rhs
  return lax.ragged_dot(lhs.astype(ct), rhs.astype(ct), gs, precision=precision,
                        preferred_element_type=jnp.float32).astype(out_dtype)


def ref_kgrouped(lhs, dy, gs, out_dtype, precision=None):
  """out[g] = lhs[rows of g]^T @ dy[rows of g], (G, K, N)."""
  ct = jnp.promote_types(lhs.dtype, dy.dtype)
  return lax.ragged_dot_general(lhs.astype(ct), dy.astype(ct), gs, KGROUPED_DIMS,
                                precision=precision,
                                preferred_element_type=jnp.float32).astype(out_dtype)


def ref_fp8_grouped(a, a_scale, b, b_scale, gs, out_dtype):
  """(a * a_scale)[r] @ (b[g] * b_scale[g])^T, dequantized to f32, f32 products."""
  a_deq = _reference.dequantize_blockwise(a, a_scale, (1, BLOCK))
  b_deq = jax.vmap(lambda q, s: _reference.dequantize_blockwise(q, s, (BLOCK, BLOCK)))(
      b, b_scale)
  return lax.ragged_dot(a_deq, jnp.swapaxes(b_deq, 1, 2), gs, precision=lax.Precision.HIGHEST,
                        preferred_element_type=jnp.float32).astype(out_dtype)


_REFS = {"grouped": ref_grouped, "kgrouped": ref_kgrouped, "fp8": ref_fp8_grouped}


def _batched_reference(kind, static, axis_size, in_batched, ops):
  """A custom_vmap rule's fallback: reference `kind` under vmap with every operand batched
  (lax's ragged dot batches only when all its operands are)."""
  ops = [x if b else jnp.broadcast_to(x, (axis_size,) + x.shape)
         for x, b in zip(ops, in_batched)]
  return jax.vmap(lambda *o: _REFS[kind](*o, *static))(*ops)


@functools.lru_cache(maxsize=None)
def _reference_call(kind: str, *static):
  """Reference `kind` (its static arguments bound) as a custom_vmap function, so that the
  reference path vmaps over any subset of its operands."""

  @custom_vmap
  def call(*ops):
    return _REFS[kind](*ops, *static)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    return _batched_reference(kind, static, axis_size, in_batched, ops), True

  return call


# ----------------------------------------------------------------------------
# Launches
# ----------------------------------------------------------------------------

def _launch(target, ops, out, attrs, why):
  _explain.note_launch(target, ops, attrs, why)
  return jax.ffi.ffi_call(target, out)(*ops, **attrs)


@_explain.launch_builder
def _grouped_kernel(trans_rhs: bool, out_dtype: np.dtype, forced):
  """The jax_sm100_grouped_gemm launch (16-byte row padding, attributes), vmap-able;
  forced: the override(grouped=...) traced under (None: the default choice)."""

  def local(lhs, rhs, gs):
    (m, k), g = lhs.shape, rhs.shape[0]
    n = rhs.shape[1] if trans_rhs else rhs.shape[2]
    e_out = 16 // out_dtype.itemsize
    kp, np_ = round_up(k, 8), round_up(n, e_out if trans_rhs else max(8, e_out))
    lhs = pad_to(lhs, 1, kp)
    rhs = pad_to(pad_to(rhs, 2 if trans_rhs else 1, kp), 1 if trans_rhs else 2, np_)
    cfg, why = tuning.grouped_config(m, np_, kp, g, kind="gemm", forced=forced)
    attrs = dict(trans_rhs=bool(trans_rhs), **cfg.attributes())
    d = _launch(TARGET, [lhs, rhs, gs], jax.ShapeDtypeStruct((m, np_), out_dtype), attrs,
                f"{m}x{np_}x{kp}, {g} groups: {why}")
    return d[:, :n] if np_ != n else d

  @custom_vmap
  def call(lhs, rhs, gs):
    return partition.sharded_call(local, partition.grouped_spec("grouped", trans_rhs), lhs,
                                  rhs, gs)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    return _batched_reference("grouped", (trans_rhs, out_dtype), axis_size, in_batched,
                              ops), True

  return call


@_explain.launch_builder
def _kgrouped_kernel(out_dtype: np.dtype, forced):
  """The jax_sm100_kgrouped_gemm launch, vmap-able (forced: as _grouped_kernel's)."""

  def local(lhs, dy, gs):
    (m, k), n, g = lhs.shape, dy.shape[1], gs.shape[0]
    kp, np_ = round_up(k, 8), round_up(n, 8)
    lhs, dy = pad_to(lhs, 1, kp), pad_to(dy, 1, np_)
    cfg, why = tuning.grouped_config(m, np_, kp, g, kind="kgrouped", forced=forced)
    d = _launch(KGROUPED_TARGET, [lhs, dy, gs], jax.ShapeDtypeStruct((g, kp, np_), out_dtype),
                cfg.attributes(), f"{g}x{kp}x{np_} over {m} rows: {why}")
    return d[:, :k, :n] if (kp, np_) != (k, n) else d

  @custom_vmap
  def call(lhs, dy, gs):
    return partition.sharded_call(local, partition.grouped_spec("kgrouped"), lhs, dy, gs)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    return _batched_reference("kgrouped", (out_dtype,), axis_size, in_batched, ops), True

  return call


@_explain.launch_builder
def _fp8_kernel(forced):
  """The jax_sm100_fp8_grouped_gemm launch of (a, a_scale_t, b, b_scale, gs), vmap-able
  (forced: as _grouped_kernel's)."""

  def local(a, a_scale_t, b, b_scale, gs):
    (m, k), (g, n) = a.shape, b.shape[:2]
    kp, np_ = round_up(k, 16), round_up(n, 8)  # both stay inside the last scale block
    a_scale_t = pad_to(a_scale_t, 1, round_up(m, 4), value=1.0)
    a, b = pad_to(a, 1, kp), pad_to(pad_to(b, 2, kp), 1, np_)
    cfg, why = tuning.grouped_config(m, np_, kp, g, kind="fp8", forced=forced)
    d = _launch(FP8_TARGET, [a, a_scale_t, b, b_scale, gs], jax.ShapeDtypeStruct((m, np_), BF16),
                cfg.attributes(), f"{m}x{np_}x{kp}, {g} groups: {why}")
    return d[:, :n] if np_ != n else d

  @custom_vmap
  def call(a, a_scale_t, b, b_scale, gs):
    return partition.sharded_call(local, partition.grouped_spec("fp8", op="fp8_grouped_matmul"),
                                  a, a_scale_t, b, b_scale, gs)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    a, a_scale_t = ops[:2]  # a (..., M, K): the untranspose works batched or not
    ops = (a, untranspose_a_scale(a_scale_t, a.shape[-2])) + tuple(ops[2:])
    return _batched_reference("fp8", (BF16,), axis_size, in_batched, ops), True

  return call


def _why_not(ctx, target, a, b, out_dtype):
  """None when a bf16/fp16 grouped product runs the kernel, else why not."""
  if not ctx.can_call(target):
    return ctx.why_not(target)
  if a.dtype != b.dtype or a.dtype not in KERNEL_IN:
    return (f"inputs {a.dtype.name} x {b.dtype.name}: the kernel takes bfloat16 or float16 "
            "inputs of one dtype")
  if np.dtype(out_dtype) not in KERNEL_OUT:
    return f"output {np.dtype(out_dtype).name}: the kernel writes bfloat16, float16 or float32"
  if 0 in a.shape or 0 in b.shape:
    return "an empty operand"
  # Kernels never run on hardware here (sm100): the family's known-answer self-test, run
  # on its first use in the process, decides (targets no family covers: the reference).
  refused = _selftest_guard.refusal(ctx, target)
  if refused is not None:
    return refused
  return None


def grouped(ctx, lhs, rhs, gs, trans_rhs: bool, out_dtype, precision=None):
  """M-grouped product: the kernel when supported, else the reference."""
  out_dtype = np.dtype(out_dtype)
  why = _why_not(ctx, TARGET, lhs, rhs, out_dtype)
  if why is None:
    return _grouped_kernel(bool(trans_rhs), out_dtype, tuning.current().grouped)(lhs, rhs, gs)
  _explain.note_reference(TARGET, [lhs.shape, rhs.shape], why)
  return _reference_call("grouped", bool(trans_rhs), out_dtype, precision)(lhs, rhs, gs)


def kgrouped(ctx, lhs, dy, gs, out_dtype, precision=None):
  """K-grouped product (G, K, N): the kernel when supported, else the reference."""
  out_dtype = np.dtype(out_dtype)
  why = _why_not(ctx, KGROUPED_TARGET, lhs, dy, out_dtype)
  if why is None and gs.shape[0] == 0:
    why = "no groups"
  if why is None:
    return _kgrouped_kernel(out_dtype, tuning.current().grouped)(lhs, dy, gs)
  _explain.note_reference(KGROUPED_TARGET, [lhs.shape, dy.shape], why)
  return _reference_call("kgrouped", out_dtype, precision)(lhs, dy, gs)


def fp8_grouped(ctx, a, a_scale, b, b_scale, gs, a_scale_transposed: bool, out_dtype):
  """FP8 M-grouped product; a_scale is a_scale_t (ceil(K/128), M or round_up(M, 4)) when
  a_scale_transposed, else (M, ceil(K/128))."""
  out_dtype = np.dtype(out_dtype)
  (m, k), (g, n) = a.shape, b.shape[:2]
  if (a.dtype == E4M3 and b.dtype == E4M3 and fp8_kernel_ok(ctx, m, n, k, g, out_dtype)):
    a_scale_t = a_scale if a_scale_transposed else transpose_a_scale(a_scale)
    return _fp8_kernel(tuning.current().grouped)(a, a_scale_t, b, b_scale, gs)

  def why():
    if not ctx.can_call(FP8_TARGET):
      return ctx.why_not(FP8_TARGET)
    if a.dtype != E4M3 or b.dtype != E4M3:
      return f"inputs {a.dtype.name} x {b.dtype.name}: the kernel takes float8_e4m3fn"
    if out_dtype != BF16:
      return f"output {out_dtype.name}: the kernel writes bfloat16"
    if min(m, n, k, g) == 0:
      return "an empty operand"
    if k > FP8_MAX_K:
      return f"K = {k} > {FP8_MAX_K}"
    return _selftest_guard.refusal(ctx, FP8_TARGET)

  _explain.note_reference(FP8_TARGET, [a.shape, a_scale.shape, b.shape, b_scale.shape], why)
  if a_scale_transposed:
    a_scale = untranspose_a_scale(a_scale, m)
  return _reference_call("fp8", out_dtype)(a, a_scale, b, b_scale, gs)


def fp8_kernel_ok(ctx, m: int, n: int, k: int, g: int, out_dtype) -> bool:
  """Whether an e4m3 grouped product (M, K) x (G, N, K) -> out_dtype runs the kernel (on
  sm100 only once its family's first-use self-test has passed)."""
  return (ctx.can_call(FP8_TARGET) and np.dtype(out_dtype) == BF16
          and min(m, n, k, g) > 0 and k <= FP8_MAX_K
          and _selftest_guard.refusal(ctx, FP8_TARGET) is None)
