"""Launches of the FP8 blockwise GEMM targets, or the reference.

  d = (a * a_scale) @ (b * b_scale)^T (+ beta * c)
      targets jax_sm100_fp8_gemm, jax_sm100_fp8_gemm_residual
  d = act((a * a_scale) @ (b * b_scale)^T + bias)
      target jax_sm100_fp8_gemm_bias: z in fp32, one rounding to bf16 (the plain
      target's tiling choice and attributes, plus the activation's code)

a (M, K) e4m3 with 1x128 scales, b (N, K) e4m3 with b_scale (ceil(N/128),
ceil(K/128)), c (M, N) bf16 -> d (M, N) bf16.

A's scales reach the kernel TRANSPOSED, `a_scale_t` (ceil(K/128), M): one TMA box
then brings a stage's scales. (The documented layout, a_scale (M, ceil(K/128)),
has rows strided by ceil(K/128) floats, which no TMA box fits.) The kernel's rows
must span a multiple of 16 bytes, so M is padded to a multiple of 4 with 1s; that
padding is this module's business: the quantize launches (quantize.py) may write
it already (`for_gemm`), and `fp8_gemm` takes a_scale_t with or without it.
K is padded to a multiple of 16 (a's and b's rows) and N to a multiple of 8 (d's
and c's rows); both stay inside the last scale block, so the scales are unchanged.
The tile configuration (jax_sm100.tuning.Fp8Config) is chosen per launch from
(M, padded N) and passed as the attributes block_m, block_n, cluster,
pair_along_n, group_m.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jax_sm100 import _activations, _explain, _reference, _selftest_guard, tuning
from jax_sm100._backend import Context
from jax_sm100._launch import partition
from jax_sm100._util import pad_to, round_up

TARGET = "jax_sm100_fp8_gemm"
RESIDUAL_TARGET = "jax_sm100_fp8_gemm_residual"
BIAS_TARGET = "jax_sm100_fp8_gemm_bias"
BF16 = np.dtype(jnp.bfloat16)
E4M3 = np.dtype(jnp.float8_e4m3fn)
MAX_K = 65536  # the sm90 kernel keeps all of a row's K-block scales on chip


def _pad_a_scale_t(a_scale_t, m: int):
  """a_scale_t (..., ceil(K/128), M or round_up(M, 4)) with the kernel's pad columns
  (1s, as the quantize kernels write them; the GEMM never reads them)."""
  return pad_to(a_scale_t, -1, round_up(m, 4), value=1.0)


def transpose_a_scale(a_scale):
  """a's scales (..., M, ceil(K/128)) -> a_scale_t as the GEMM reads it (padded)."""
  return _pad_a_scale_t(jnp.swapaxes(a_scale, -1, -2), a_scale.shape[-2])


def untranspose_a_scale(a_scale_t, m: int):
  """a_scale_t (..., ceil(K/128), M or round_up(M, 4)) -> a's scales (..., M, ceil(K/128))."""
  return jnp.swapaxes(a_scale_t[..., :m], -1, -2)


def _padded(a, a_scale_t, b):
  """The one place that knows the FP8 kernels' operand layout (module docstring):
  (m, n, padded n, padded k, a, a_scale_t, b) as the kernels read them."""
  m, k = a.shape
  n = b.shape[0]
  kp, np_ = round_up(k, 16), round_up(n, 8)
  return (m, n, np_, kp, pad_to(a, 1, kp), _pad_a_scale_t(a_scale_t, m),
          pad_to(pad_to(b, 1, kp), 0, np_))


def _launch(a, a_scale_t, b, b_scale, c, beta, settings):
  m, n, np_, kp, a, a_scale_t, b = _padded(a, a_scale_t, b)
  out = jax.ShapeDtypeStruct((m, np_), BF16)
  residual = c is not None
  cfg, why = tuning.resolve_fp8(settings, m, np_, kp, residual)
  attrs = cfg.attributes()
  ops = [a, a_scale_t, b, b_scale]
  if residual:
    ops.append(pad_to(c, 1, np_))
    attrs["beta"] = np.float32(beta)
  target = RESIDUAL_TARGET if residual else TARGET
  _explain.note_launch(target, ops, attrs, f"{m}x{np_}x{kp}: {why}")
  d = jax.ffi.ffi_call(target, out)(*ops, **attrs)
  return d[:, :n] if np_ != n else d


@_explain.launch_builder
def _kernel(residual: bool, beta: float, settings):
  """The FP8 launch as a custom_vmap function of (a, a_scale_t, b, b_scale[, c]).

  vmap rule: when only the a side (a, a_scale_t, c) is batched, the vmapped axis
  folds into M (one launch); when b or b_scale is batched, the batched reference
  runs instead (one XLA batched dot, not a loop).
  """

  def local(*ops):
    a, a_scale_t, b, b_scale = ops[:4]
    return _launch(a, a_scale_t, b, b_scale, ops[4] if residual else None, beta, settings)

  @custom_vmap
  def call(*ops):
    return partition.sharded_call(local, partition.fp8_gemm_spec(residual), *ops)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    if in_batched[2] or in_batched[3]:
      def ref(a, a_scale_t, b, b_scale, *c):
        return _reference.fp8_gemm(a, untranspose_a_scale(a_scale_t, a.shape[0]), b, b_scale,
                                   c[0] if residual else None, beta, BF16)
      axes = [0 if bt else None for bt in in_batched]
      return jax.vmap(ref, in_axes=axes)(*ops), True
    ops = [x if bt else jnp.broadcast_to(x, (axis_size,) + x.shape)
           if i in (0, 1, 4) else x for i, (x, bt) in enumerate(zip(ops, in_batched))]
    a, a_scale_t = ops[:2]
    m = a.shape[1]
    ops[0] = a.reshape((axis_size * m,) + a.shape[2:])  # fold the vmapped axis into M
    st = jnp.moveaxis(a_scale_t[..., :m], 0, 1)        # (K/128, B, M)
    ops[1] = st.reshape(st.shape[0], axis_size * m)
    if residual:
      ops[4] = ops[4].reshape((axis_size * m,) + ops[4].shape[2:])
    d = call(*ops)
    return d.reshape((axis_size, m) + d.shape[1:]), True

  return call


def kernel_ok(ctx: Context, m: int, n: int, k: int, out_dtype, residual: bool = False) -> bool:
  """Whether an e4m3 x e4m3 product (M, K) @ (N, K)^T -> out_dtype runs the FP8 kernel."""
  target = RESIDUAL_TARGET if residual else TARGET
  # Last: on a backend whose kernels were never run on hardware here (sm100), the
  # family's known-answer self-test, run on its first use in the process, decides.
  return (ctx.can_call(target) and np.dtype(out_dtype) == BF16
          and min(m, n, k) > 0 and k <= MAX_K and _selftest_guard.refusal(ctx, target) is None)


def _why_reference(ctx, a, b, c, m, n, k, out_dtype):
  target = TARGET if c is None else RESIDUAL_TARGET
  if not ctx.can_call(target):
    return ctx.why_not(target)
  if a.dtype != E4M3 or b.dtype != E4M3:
    return f"inputs {a.dtype.name} x {b.dtype.name}: the kernel takes float8_e4m3fn"
  if np.dtype(out_dtype) != BF16:
    return f"output {np.dtype(out_dtype).name}: the kernel writes bfloat16"
  if c is not None and c.dtype != BF16:
    return f"c is {c.dtype.name}: the kernel reads bfloat16"
  if min(m, n, k) == 0:
    return "an empty operand"
  if k > MAX_K:
    return f"K = {k} > {MAX_K}"
  return _selftest_guard.refusal(ctx, target)


def fp8_gemm(ctx: Context, a, a_scale, b, b_scale, *, a_scale_transposed: bool,
             c=None, beta: float = 0.0, out_dtype=BF16):
  """(a*a_scale) @ (b*b_scale)^T (+ beta*c): the FP8 kernel when supported, else the
  reference. a_scale_transposed: a_scale is a_scale_t, (ceil(K/128), M) or already
  padded for the kernel (a quantize launch's for_gemm output); the kernel reads it
  as it is. Otherwise a_scale is (M, ceil(K/128)) and is transposed here (an XLA op).
  """
  out_dtype = np.dtype(out_dtype)
  if beta == 0.0:
    c = None  # beta == 0: c is never read
  (m, k), n = a.shape, b.shape[0]
  if (a.dtype == E4M3 and b.dtype == E4M3 and (c is None or c.dtype == BF16)
      and kernel_ok(ctx, m, n, k, out_dtype, residual=c is not None)):
    a_scale_t = a_scale if a_scale_transposed else a_scale.T
    residual, beta_k = ((), 0.0) if c is None else ((c,), float(beta))
    return _kernel(c is not None, beta_k, ctx.tuning)(a, a_scale_t, b, b_scale, *residual)
  _explain.note_reference(TARGET if c is None else RESIDUAL_TARGET,
                          [x.shape for x in (a, a_scale, b, b_scale, c) if x is not None],
                          lambda: _why_reference(ctx, a, b, c, m, n, k, out_dtype))
  if a_scale_transposed:
    a_scale = untranspose_a_scale(a_scale, m)
  return _reference.fp8_gemm(a, a_scale, b, b_scale, c, beta, out_dtype)


# ---------------------------------------------------------------------------
# The fused bias/activation epilogue (jax_sm100_fp8_gemm_bias)
# ---------------------------------------------------------------------------

def _launch_bias(a, a_scale_t, b, b_scale, bias, name, settings):
  """_launch's layout with the bias ((N,) f32 or (0,)) and the activation's code."""
  m, n, np_, kp, a, a_scale_t, b = _padded(a, a_scale_t, b)
  if bias.shape[0]:
    bias = pad_to(bias, 0, np_)
  cfg, why = tuning.resolve_fp8(settings, m, np_, kp, False)
  attrs = dict(cfg.attributes(), activation=np.int32(_activations.CODES[name]))
  ops = [a, a_scale_t, b, b_scale, bias]
  _explain.note_launch(BIAS_TARGET, ops, attrs, f"{m}x{np_}x{kp}, {name}: {why}")
  d = jax.ffi.ffi_call(BIAS_TARGET, jax.ShapeDtypeStruct((m, np_), BF16))(*ops, **attrs)
  return d[:, :n] if np_ != n else d


def _bias_reference(a, a_scale_t, b, b_scale, bias, name):
  """The same numbers from jnp: the product in f32, + bias, act, one rounding to bf16."""
  z = _reference.fp8_gemm(a, untranspose_a_scale(a_scale_t, a.shape[0]), b, b_scale, None, 0.0,
                          np.dtype(jnp.float32))
  if bias.shape[0]:
    z = z + bias
  return _activations.apply(name, z).astype(BF16)


@_explain.launch_builder
def _kernel_bias(name: str, has_bias: bool, settings):
  """The FP8 bias/activation launch as a custom_vmap function of (a, a_scale_t, b,
  b_scale, bias): an a-side batch folds into M (one launch); a batched b, b_scale or
  bias runs the batched reference."""

  def local(a, a_scale_t, b, b_scale, bias):
    return _launch_bias(a, a_scale_t, b, b_scale, bias, name, settings)

  @custom_vmap
  def call(*ops):
    return partition.sharded_call(local, partition.fp8_bias_spec(has_bias), *ops)

  @call.def_vmap
  def rule(axis_size, in_batched, *ops):
    if not any(in_batched):
      return call(*ops), False
    if any(in_batched[2:]):
      axes = [0 if bt else None for bt in in_batched]
      return jax.vmap(lambda *o: _bias_reference(*o, name), in_axes=axes)(*ops), True
    ops = list(ops)
    a, a_scale_t = [x if bt else jnp.broadcast_to(x, (axis_size,) + x.shape)
                    for x, bt in zip(ops[:2], in_batched[:2])]
    m = a.shape[1]
    ops[0] = a.reshape((axis_size * m,) + a.shape[2:])  # fold the vmapped axis into M
    st = jnp.moveaxis(a_scale_t[..., :m], 0, 1)        # (K/128, B, M)
    ops[1] = st.reshape(st.shape[0], axis_size * m)
    d = call(*ops)
    return d.reshape((axis_size, m) + d.shape[1:]), True

  return call


def bias_kernel_ok(ctx: Context, m: int, n: int, k: int, out_dtype) -> bool:
  """Whether act(x @ w + bias) with an (M, K) @ (N, K)^T FP8 product -> out_dtype runs the
  fused kernel (sm90; sm100 once its first-use self-test passed; cpu_ffi)."""
  return (ctx.can_call(BIAS_TARGET) and np.dtype(out_dtype) == BF16 and min(m, n, k) > 0
          and k <= MAX_K and _selftest_guard.refusal(ctx, BIAS_TARGET) is None)


def fp8_gemm_bias(ctx: Context, a, a_scale_t, b, b_scale, bias, name: str):
  """bf16 act((a*a_scale) @ (b*b_scale)^T + bias) on the fused kernel: a_scale_t as a
  quantize launch's for_gemm output, bias (N,) f32 or None, name a canonical activation.
  The caller checked bias_kernel_ok."""
  has_bias = bias is not None
  bias = bias if has_bias else jnp.zeros((0,), jnp.float32)
  return _kernel_bias(name, has_bias, ctx.tuning)(a, a_scale_t, b, b_scale, bias)
