"""Launches of the FP8 quantize targets, or the reference recipe.

  jax_sm100_quantize_fp8:       x (R, C) bf16/fp16/f32 -> q (R, C) e4m3 and its scales,
                                1x128 or 128x128 blocks (attribute block_rows)
  jax_sm100_quantize_fp8_dual:  x and x^T quantized in one pass over x
  jax_sm100_quantize_fp8_act_dual, jax_sm100_quantize_fp8_dact_dual: the dual
                                quantization of a layer's activation act(z), or of its
                                backward g * act'(z) (with that product's column sums),
                                computed as the kernel reads z (and g): see
                                `act_quantize_dual`, `dact_quantize_dual`

Bit-identical to jax_sm100._reference.quantize_blockwise. A 1x128 quantization
can write its scales transposed (attribute scale_transposed): `a_scale_t`, the
layout the FP8 GEMM reads (see fp8.py), with the GEMM's pad columns included.
Callers that hand the scales to fp8.fp8_gemm ask for them `for_gemm` (pad columns
kept, no XLA op in between); everyone else gets exactly (ceil(C/128), R).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jax_sm100 import _activations, _explain, _reference, _selftest_guard
from jax_sm100._backend import Context
from jax_sm100._launch import partition
from jax_sm100._launch.fp8 import transpose_a_scale
from jax_sm100._util import cdiv, round_up

TARGET = "jax_sm100_quantize_fp8"
DUAL_TARGET = "jax_sm100_quantize_fp8_dual"
ACT_DUAL_TARGET = "jax_sm100_quantize_fp8_act_dual"
DACT_DUAL_TARGET = "jax_sm100_quantize_fp8_dact_dual"
BLOCK = _reference.FP8_BLOCK
E4M3 = np.dtype(jnp.float8_e4m3fn)
KERNEL_BLOCKS = ((1, BLOCK), (BLOCK, BLOCK))
KERNEL_IN = tuple(np.dtype(t) for t in (jnp.bfloat16, jnp.float16, jnp.float32))


def _scale_shape(r: int, c: int, block_rows: int, transposed: bool):
  if transposed:  # a_scale_t with the GEMM's pad columns (1x128 only)
    return (cdiv(c, BLOCK), round_up(r, 4))
  return (r if block_rows == 1 else cdiv(r, BLOCK), cdiv(c, BLOCK))


def quantize_launch(x, block_rows: int, scale_transposed: bool = False):
  """One jax_sm100_quantize_fp8 launch: (q, scale) of x (R, C)."""
  r, c = x.shape
  out = (jax.ShapeDtypeStruct((r, c), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(r, c, block_rows, scale_transposed), np.float32))
  attrs = dict(block_rows=np.int32(block_rows), scale_transposed=np.int32(scale_transposed))
  _explain.note_launch(TARGET, [x], attrs, f"{block_rows}x{BLOCK} blocks of {r}x{c}")
  return jax.ffi.ffi_call(TARGET, out)(x, **attrs)


@functools.lru_cache(maxsize=None)
def _quantize_kernel(block_rows: int, scale_transposed: bool = False):
  """The quantize launch as a custom_vmap function (vmap never loops).

  vmap rule: the vmapped axis folds into R, one launch. 1x128 blocks never cross
  rows; for 128x128 blocks each example's rows are first zero-padded to a multiple
  of 128, which leaves every block's amax, scale and q unchanged (a batched XLA
  reference could differ from the recipe in the last bit: XLA's GPU division is not
  the recipe's correctly rounded one). Transposed scales are made per example from
  the folded launch's.
  """

  @custom_vmap
  def call(x):
    return partition.sharded_call(lambda x: quantize_launch(x, block_rows, scale_transposed),
                                  partition.quantize_spec(block_rows, scale_transposed), x)

  @call.def_vmap
  def rule(axis_size, in_batched, x):
    del axis_size
    if not in_batched[0]:
      return call(x), (False, False)
    if block_rows == 1:
      q, s = _quantize_kernel(1)(x.reshape((-1, x.shape[-1])))
      s = s.reshape(x.shape[:2] + s.shape[-1:])
      return (q.reshape(x.shape), transpose_a_scale(s) if scale_transposed else s), (True, True)
    b, r, c = x.shape
    rp = round_up(r, BLOCK)
    xp = jnp.pad(x, ((0, 0), (0, rp - r), (0, 0))) if rp != r else x
    q, s = _quantize_kernel(block_rows)(xp.reshape((b * rp, c)))
    q = q.reshape((b, rp, c))[:, :r]
    return (q, s.reshape((b, rp // BLOCK) + s.shape[-1:])), (True, True)

  return call


def _kernel_ok(ctx: Context, x, block, dtype) -> bool:
  # Last: on a backend whose kernels were never run on hardware here (sm100), the
  # family's known-answer self-test, run on its first use in the process, decides.
  return (ctx.can_call(TARGET) and np.dtype(dtype) == E4M3 and tuple(block) in KERNEL_BLOCKS
          and np.dtype(x.dtype) in KERNEL_IN and x.size > 0
          and _selftest_guard.refusal(ctx, TARGET) is None)


def _why_reference(ctx: Context, x, block, dtype) -> str:
  if not ctx.can_call(TARGET):
    return ctx.why_not(TARGET)
  if np.dtype(dtype) != E4M3:
    return f"{np.dtype(dtype).name}: the kernel writes float8_e4m3fn"
  if tuple(block) not in KERNEL_BLOCKS:
    return f"{block[0]}x{block[1]} blocks: the kernel does 1x128 and 128x128"
  if np.dtype(x.dtype) not in KERNEL_IN:
    return f"input {x.dtype.name}"
  if x.size == 0:
    return "an empty input"
  return _selftest_guard.refusal(ctx, TARGET)


def quantize(ctx: Context, x, block, dtype, scale_transposed: bool = False,
             for_gemm: bool = False):
  """Blockwise quantization (q, scale) of x (R, C): the kernel when usable, else the
  reference recipe. scale_transposed (1x128 blocks only): the scale comes as
  a_scale_t (ceil(C/128), R), written so by the kernel, else transposed by XLA;
  for_gemm: it goes straight to fp8.fp8_gemm (the GEMM's pad columns may stay)."""
  assert not scale_transposed or tuple(block) == (1, BLOCK)
  if _kernel_ok(ctx, x, block, dtype):
    q, s = _quantize_kernel(int(block[0]), bool(scale_transposed))(x)
  else:
    _explain.note_reference(TARGET, [x.shape], lambda: _why_reference(ctx, x, block, dtype))
    q, s = _reference.quantize_blockwise(x, tuple(block), dtype)
    if scale_transposed:
      s = transpose_a_scale(s)
  if scale_transposed and not for_gemm:
    s = s[..., :x.shape[-2]]
  return q, s


def quantize_dual_launch(x, t_block_rows: int, scale_transposed: bool = False,
                         scale_t_transposed: bool = False, block_rows: int = 1):
  """One jax_sm100_quantize_fp8_dual launch: ((q, s), (qt, st)), the quantizations of
  x in block_rows x 128 blocks and of x^T in t_block_rows x 128 blocks. The
  arguments are the target's attributes (scale_t_transposed: x^T's scales transposed)."""
  r, c = x.shape
  out = (jax.ShapeDtypeStruct((r, c), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(r, c, block_rows, scale_transposed), np.float32),
         jax.ShapeDtypeStruct((c, r), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(c, r, t_block_rows, scale_t_transposed), np.float32))
  attrs = dict(block_rows=np.int32(block_rows), t_block_rows=np.int32(t_block_rows),
               scale_transposed=np.int32(scale_transposed),
               scale_t_transposed=np.int32(scale_t_transposed))
  _explain.note_launch(DUAL_TARGET, [x], attrs,
                       f"{r}x{c} in {block_rows}x{BLOCK} blocks and its transpose in "
                       f"{t_block_rows}x{BLOCK} blocks, one pass")
  q, s, qt, st = jax.ffi.ffi_call(DUAL_TARGET, out)(x, **attrs)
  return (q, s), (qt, st)


@functools.lru_cache(maxsize=None)
def _quantize_dual_kernel(t_block_rows: int, scale_transposed: bool, scale_t_transposed: bool,
                          block_rows: int):
  """The dual quantize launch as a custom_vmap function. A batched call (vmap of
  fp8_dot) runs the two single quantizations under vmap instead, which have
  their own batching rules (the 1x128 launch folds the batch into rows)."""

  def local(x):
    (q, s), (qt, st) = quantize_dual_launch(x, t_block_rows, scale_transposed,
                                            scale_t_transposed, block_rows)
    return q, s, qt, st

  spec = partition.quantize_dual_spec(block_rows, t_block_rows, scale_transposed,
                                      scale_t_transposed)

  @custom_vmap
  def call(x):
    q, s, qt, st = partition.sharded_call(local, spec, x)
    return (q, s), (qt, st)

  @call.def_vmap
  def rule(axis_size, in_batched, x):
    del axis_size
    if not in_batched[0]:
      return call(x), ((False, False), (False, False))
    separate = lambda x: (_quantize_kernel(block_rows, scale_transposed)(x),
                          _quantize_kernel(t_block_rows, scale_t_transposed)(x.T))
    return jax.vmap(separate)(x), ((True, True), (True, True))

  return call


def quantize_dual(ctx: Context, x, t_block_rows: int, scale_transposed: bool = False,
                  scale_t_transposed: bool = False, block_rows: int = 1):
  """((q, s), (qt, st)) = (quantize(x, block_rows x 128), quantize(x^T, t_block_rows x 128)),
  block_rows 1, or 128 with t_block_rows 128 (x's 128x128 tiles are x^T's: a weight).

  One kernel reads x once for both when usable; otherwise the two quantizations
  run separately (x^T through an XLA transpose). Bit-identical either way.
  scale_transposed / scale_t_transposed (the latter with t_block_rows == 1): that
  1x128 scale comes as a_scale_t for fp8.fp8_gemm (quantize(..., for_gemm=True)).
  """
  assert not scale_t_transposed or t_block_rows == 1
  assert block_rows == 1 or (t_block_rows == BLOCK and not scale_transposed)
  if (ctx.can_call(DUAL_TARGET) and np.dtype(x.dtype) in KERNEL_IN and x.size > 0
      and _selftest_guard.refusal(ctx, DUAL_TARGET) is None):
    return _quantize_dual_kernel(int(t_block_rows), bool(scale_transposed),
                                 bool(scale_t_transposed), int(block_rows))(x)
  return (quantize(ctx, x, (block_rows, BLOCK), E4M3, scale_transposed, for_gemm=True),
          quantize(ctx, x.T, (t_block_rows, BLOCK), E4M3, scale_t_transposed, for_gemm=True))


# ---------------------------------------------------------------------------
# The dual quantization with a prologue: a layer's activation, or its backward
# ---------------------------------------------------------------------------

def _block_col_sums(dz):
  """The fp32 column sums of dz (R, C) per 128-row block: (ceil(R/128), C)."""
  r, c = dz.shape
  rp = round_up(r, BLOCK)
  d = jnp.pad(dz.astype(jnp.float32), ((0, rp - r), (0, 0)))
  return jnp.sum(d.reshape(rp // BLOCK, BLOCK, c), axis=1)


def _act_dual_launch(z, name, scale_transposed, scale_t_transposed):
  r, c = z.shape
  out = (jax.ShapeDtypeStruct((r, c), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(r, c, 1, scale_transposed), np.float32),
         jax.ShapeDtypeStruct((c, r), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(c, r, 1, scale_t_transposed), np.float32))
  attrs = dict(activation=np.int32(_activations.CODES[name]),
               scale_transposed=np.int32(scale_transposed),
               scale_t_transposed=np.int32(scale_t_transposed))
  _explain.note_launch(ACT_DUAL_TARGET, [z], attrs,
                       f"{name}({r}x{c}) and its transpose in 1x{BLOCK} blocks, one pass")
  return tuple(jax.ffi.ffi_call(ACT_DUAL_TARGET, out)(z, **attrs))


def _dact_dual_launch(g, z, name, scale_transposed):
  r, c = g.shape
  out = (jax.ShapeDtypeStruct((r, c), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(r, c, 1, scale_transposed), np.float32),
         jax.ShapeDtypeStruct((c, r), E4M3),
         jax.ShapeDtypeStruct(_scale_shape(c, r, BLOCK, False), np.float32),
         jax.ShapeDtypeStruct((cdiv(r, BLOCK), c), np.float32))
  attrs = dict(activation=np.int32(_activations.CODES[name]),
               scale_transposed=np.int32(scale_transposed))
  _explain.note_launch(DACT_DUAL_TARGET, [g, z], attrs,
                       f"g * {name}'(z) ({r}x{c}) in 1x{BLOCK} blocks, its transpose in "
                       f"{BLOCK}x{BLOCK} blocks and its column sums, one pass")
  return tuple(jax.ffi.ffi_call(DACT_DUAL_TARGET, out)(g, z, **attrs))


@functools.lru_cache(maxsize=None)
def _act_dual_kernel(name: str, scale_transposed: bool, scale_t_transposed: bool):
  """act_quantize_dual's launch as a custom_vmap function: under vmap the activation runs
  as an XLA pass and the dual quantization's own batching rule takes over."""
  spec = partition.quantize_dual_spec(1, 1, scale_transposed, scale_t_transposed)

  @custom_vmap
  def call(z):
    q, s, qt, st = partition.sharded_call(
        lambda z: _act_dual_launch(z, name, scale_transposed, scale_t_transposed), spec, z)
    return (q, s), (qt, st)

  @call.def_vmap
  def rule(axis_size, in_batched, z):
    del axis_size
    if not in_batched[0]:
      return call(z), ((False, False), (False, False))
    inner = _quantize_dual_kernel(1, scale_transposed, scale_t_transposed, 1)
    return jax.vmap(lambda z: inner(_activations.rounded(name, z)))(z), ((True, True), (True, True))

  return call


@functools.lru_cache(maxsize=None)
def _dact_dual_kernel(name: str, scale_transposed: bool):
  """dact_quantize_dual's launch as a custom_vmap function (under vmap: the formula in
  XLA, then the dual quantization's batching rule)."""
  base = partition.quantize_dual_spec(1, BLOCK, scale_transposed, False)
  spec = base._replace(operands=base.operands * 2,
                       results=base.results + ((partition.Block("r", BLOCK), "c"),))

  @custom_vmap
  def call(g, z):
    q, s, qt, st, sums = partition.sharded_call(
        lambda g, z: _dact_dual_launch(g, z, name, scale_transposed), spec, g, z)
    return (q, s), (qt, st), sums

  @call.def_vmap
  def rule(axis_size, in_batched, g, z):
    g = g if in_batched[0] else jnp.broadcast_to(g, (axis_size,) + g.shape)
    z = z if in_batched[1] else jnp.broadcast_to(z, (axis_size,) + z.shape)
    inner = _quantize_dual_kernel(BLOCK, scale_transposed, False, 1)

    def one(g, z):
      dz = _activations.rounded_grad(name, z, g)
      return inner(dz) + (_block_col_sums(dz),)

    return jax.vmap(one)(g, z), ((True, True), (True, True), True)

  return call


def _prologue_ok(ctx: Context, target: str, x) -> bool:
  return (ctx.can_call(target) and np.dtype(x.dtype) in KERNEL_IN and x.size > 0
          and _selftest_guard.refusal(ctx, target) is None)


def act_quantize_dual(ctx: Context, z, name: str, scale_transposed: bool = False,
                      scale_t_transposed: bool = False):
  """((q, s), (qt, st)) = quantize_dual(d, 1) with d = act(z) rounded to z's dtype (name
  a canonical activation): a layer's output quantized for the next layer's product and
  its weight gradient without d being written. One kernel when usable, else the
  activation as an XLA pass and quantize_dual."""
  if name != "none" and _prologue_ok(ctx, ACT_DUAL_TARGET, z):
    return _act_dual_kernel(name, bool(scale_transposed), bool(scale_t_transposed))(z)
  if name != "none":
    _explain.note_reference(ACT_DUAL_TARGET, [z.shape], lambda: ctx.why_not(ACT_DUAL_TARGET)
                            or f"input {z.dtype.name}")
  return quantize_dual(ctx, _activations.rounded(name, z), 1, scale_transposed,
                      scale_t_transposed)


def dact_quantize_dual(ctx: Context, g, z, name: str, scale_transposed: bool = False):
  """((q, s), (qt, st), dbias): dz = g * act'(z) rounded to g's dtype (z the
  pre-activation; relu's derivative may read the output instead), quantized as
  quantize_dual(dz, 128) (1x128 blocks for the input gradient, dz^T in 128x128 for the
  weight gradient), and dbias (C,) f32 = the column sums of that rounded dz. One kernel
  when usable (the sums per 128-row block, added here), else XLA's pass then
  quantize_dual."""
  if _prologue_ok(ctx, DACT_DUAL_TARGET, g):
    q, qt, sums = _dact_dual_kernel(name, bool(scale_transposed))(g, z)
    return q, qt, jnp.sum(sums, axis=0)
  _explain.note_reference(DACT_DUAL_TARGET, [g.shape, z.shape],
                          lambda: ctx.why_not(DACT_DUAL_TARGET) or f"input {g.dtype.name}")
  dz, dbias = _activations.epilogue_grads(name, z, g, True)  # dz written once
  q, qt = quantize_dual(ctx, dz, BLOCK, scale_transposed)
  return q, qt, dbias
