"""jax_sm100.fp8_mlp (mlp in FP8) and its two quantizers with a prologue (FFI targets
jax_sm100_quantize_fp8_act_dual and jax_sm100_quantize_fp8_dact_dual), on cpu_ffi (the
targets' CPU handlers through the real launch layer) and on the reference path, on fresh
random data.

The quantizers are checked against the ideal quantization of the float64 activation (or
its backward g * act'(z)) rounded once to the input dtype, elementwise up to one e4m3 step
where act's fp32 ulps move a rounding, and the bias sums against float64 sums of that
rounded dz; the op against the stack of fp8_dot
layers it is documented to equal and, loosely, against the float64 network (FP8 operands
carry 2^-4 relative errors).
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _reference
from jax_sm100._launch import quantize as quant
from conftest import act64, act64_derivative, f64, random_array
from test_api_mlp import loss_fn, rel

BF16, F16, F32, E4M3 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.float8_e4m3fn
ACT, DACT = quant.ACT_DUAL_TARGET, quant.DACT_DUAL_TARGET
CANON = {"relu": "relu", "gelu": "gelu_tanh", "gelu_exact": "gelu_erf", "silu": "silu"}
ACTS = list(CANON)


def deq(q, s, rows_per_block):
  """(q (R, C) e4m3 times its scale s (ceil(R/b), ceil(C/128)), that scale per element),
  float64."""
  r, c = q.shape
  s = np.repeat(np.repeat(f64(s), rows_per_block, 0)[:r], 128, 1)[:, :c]
  return f64(q) * s, s


def close_fp8(got, want, what, atol=0.0):
  """Two dequantized FP8 arrays of the same values up to the activation's fp32 error
  (a few ulps, or `atol` per element where its formula cancels) and the input dtype's
  rounding after it: a block's scale may move by an ulp (every element of it then by
  2^-23 relative), and a few elements by one e4m3 step (2^-3)."""
  (got, s), (want, _) = got, want
  diff = np.abs(got - want)
  mag = np.maximum(np.abs(want), np.abs(got))
  # + one step of e4m3's subnormals (2^-9 of the scale) near zero
  assert np.all(diff <= 2.0**-3 * mag + 2.0**-8 * s + 2 * atol), (what, diff.max())
  moved = diff > 2.0**-12 * mag + 2 * atol
  assert np.mean(moved) < 1e-2, (what, np.mean(moved))


def cancel_atol(name, z, g=None):
  """The fp32 error of the activation (g * its derivative with g) where its formula
  cancels: the exact GELU's 1 + erf(z / sqrt 2) in the negative tail (an absolute 2^-24,
  times 0.5 z, resp. 0.5 g). A block whose every element lies that deep (a 2-row block
  of x^T) is quantized relative to values that small."""
  if name != "gelu_erf":
    return 0.0
  return 2.0**-23 * np.abs(f64(z) if g is None else f64(g))


def ideal(values64, dtype, t_rows):
  """The quantizations a prologue quantizer should give for exact values (float64): each
  rounded once to dtype, then the quantize recipe (bit-exact reference) in 1x128 blocks,
  and the transpose in t_rows x 128: ((q, scale), (qt, scale_t)) dequantized by deq."""
  v = np.asarray(values64, dtype=np.dtype(dtype)).astype(np.float32)
  # On the CPU: XLA's GPU division is not the recipe's correctly rounded one.
  with jax.default_device(jax.devices("cpu")[0]):
    q, s = _reference.quantize_blockwise(jnp.asarray(v), (1, 128), E4M3)
    qt, st = _reference.quantize_blockwise(jnp.asarray(v.T), (t_rows, 128), E4M3)
  return (deq(q, s, 1), deq(qt, st, t_rows)), (q, v)


def dact64(g, z, name):
  return f64(g) if name == "none" else f64(g) * act64_derivative(name, f64(z))


def check_act(z, name, got):
  """got = ((q, s), (qt, st)) of act_quantize_dual(z, name), scales in the documented
  layout, against the ideal quantization of float64 act(z)."""
  (q, s), (qt, st) = got
  r, c = z.shape
  assert q.shape == (r, c) and qt.shape == (c, r) and s.shape == (r, -(-c // 128))
  assert st.shape == (c, -(-r // 128))
  (rq, rqt), (ideal_q, _) = ideal(act64(name, f64(z)), z.dtype, 1)
  atol = cancel_atol(name, z)
  close_fp8(deq(q, s, 1), rq, "q", atol)
  close_fp8(deq(qt, st, 1), rqt, "qt", np.transpose(atol))
  if name == "relu":  # exact in every dtype: bit for bit
    np.testing.assert_array_equal(np.asarray(q).view(np.uint8), np.asarray(ideal_q).view(np.uint8))


def check_dact(g, z, name, got):
  """got = ((q, s), (qt, st), dbias) of dact_quantize_dual(g, z, name), s in the documented
  layout, against the ideal quantization of float64 g * act'(z) and its column sums."""
  (q, s), (qt, st), db = got
  r, c = g.shape
  (rq, rqt), (_, v) = ideal(dact64(g, z, name), g.dtype, 128)
  atol = cancel_atol(name, z, g)
  close_fp8(deq(q, s, 1), rq, "q", atol)
  close_fp8(deq(qt, st, 128), rqt, "qt", np.transpose(atol))
  assert db.shape == (c,) and db.dtype == np.float32
  # fp32 sums of the dtype-rounded dz (v): their own rounding, plus, per element, a few
  # fp32 ulps of act' that may move dz's rounding by one step of dtype.
  u = {np.dtype(BF16): 2.0**-8, np.dtype(F16): 2.0**-11, np.dtype(F32): 2.0**-23}[np.dtype(g.dtype)]
  tol = (r + 2) * 2.0**-24 * np.abs(v).sum(0) + 2 * u * np.abs(v).sum(0) * (name != "none")
  err = np.abs(f64(db) - f64(v).sum(0))
  assert np.all(err <= tol + 1e-30), err.max()


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype,r,c", [(BF16, 200, 264), (F16, 64, 128), (F32, 33, 40)])
def test_act_dual_target(cpu_ffi, rng, act, dtype, r, c):
  z = random_array(rng, (r, c), dtype, scale=3.0)
  ctx = _backend.context()
  got = jax.jit(lambda z: quant.act_quantize_dual(ctx, z, CANON[act]))(z)
  assert [t for t, _, _ in cpu_ffi] == [ACT]
  check_act(z, CANON[act], got)


@pytest.mark.parametrize("act", ACTS + [None])
@pytest.mark.parametrize("dtype,r,c", [(BF16, 300, 136), (F16, 128, 64), (F32, 20, 33)])
def test_dact_dual_target(cpu_ffi, rng, act, dtype, r, c):
  g = random_array(rng, (r, c), dtype)
  z = random_array(rng, (r, c), dtype, scale=3.0)
  ctx = _backend.context()
  name = CANON.get(act, "none")
  (q, s), qt, db = jax.jit(lambda g, z: quant.dact_quantize_dual(ctx, g, z, name, True))(g, z)
  assert [t for t, _, _ in cpu_ffi] == [DACT]
  assert s.shape == (-(-c // 128), -(-r // 4) * 4)  # transposed for the GEMM, padded
  check_dact(g, z, name, ((q, np.asarray(s)[:, :r].T), qt, db))


def test_the_fallback_is_the_same_sequence(rng):
  # The reference path (no kernel): XLA's activation pass, then the dual quantizer.
  g = random_array(rng, (150, 136), BF16)
  z = random_array(rng, (150, 136), BF16, scale=3.0)
  ctx = _backend.context()
  check_act(z, "silu", jax.jit(lambda z: quant.act_quantize_dual(ctx, z, "silu"))(z))
  check_dact(g, z, "gelu_tanh",
             jax.jit(lambda g, z: quant.dact_quantize_dual(ctx, g, z, "gelu_tanh"))(g, z))


def test_prologue_targets_refuse_bad_input(cpu_ffi, rng):
  z = random_array(rng, (16, 32), BF16)
  q = jax.ShapeDtypeStruct((16, 32), jnp.float8_e4m3fn)
  qt = jax.ShapeDtypeStruct((32, 16), jnp.float8_e4m3fn)
  f32 = lambda *s: jax.ShapeDtypeStruct(s, np.float32)
  act_out = (q, f32(16, 1), qt, f32(32, 1))
  call = lambda t, res, ops, **a: jax.ffi.ffi_call(t, res)(*ops, **a)
  base = dict(scale_transposed=np.int32(0), scale_t_transposed=np.int32(0))
  with pytest.raises(Exception, match="activation must be 1 \\(relu\\)"):
    call(ACT, act_out, [z], activation=np.int32(0), **base)
  with pytest.raises(Exception, match=re.escape("scale must have shape (16, 1)")):
    call(ACT, (q, f32(16, 2), qt, f32(32, 1)), [z], activation=np.int32(2), **base)
  dact_out = (q, f32(16, 1), qt, f32(1, 1), f32(1, 32))
  with pytest.raises(Exception, match="activation must be 0 \\(none\\)"):
    call(DACT, dact_out, [z, z], activation=np.int32(5), scale_transposed=np.int32(0))
  with pytest.raises(Exception, match="z must have g's shape and dtype"):
    call(DACT, dact_out, [z, z.astype(F16)], activation=np.int32(2), scale_transposed=np.int32(0))
  with pytest.raises(Exception, match=re.escape("col_sums must have shape (1, 32)")):
    call(DACT, dact_out[:4] + (f32(1, 31),), [z, z], activation=np.int32(2),
         scale_transposed=np.int32(0))


def test_prologue_quantizers_under_vmap(cpu_ffi, rng):
  # Under vmap the activation runs in XLA (then the batched dual quantizer): the same
  # values up to one e4m3 step (q: 2^-3 relative, 2^-9 absolute near 0), scales and sums
  # up to the activation's ulps.
  def same(a, b):
    fp8 = a.dtype == jnp.float8_e4m3fn
    np.testing.assert_allclose(f64(a), f64(b), rtol=0.13 if fp8 else 1e-3,
                               atol=2.0**-8 if fp8 else 1e-6)

  ctx = _backend.context()
  g = random_array(rng, (3, 40, 24), BF16)
  z = random_array(rng, (3, 40, 24), BF16, scale=2.0)
  got = jax.jit(jax.vmap(lambda g, z: quant.dact_quantize_dual(ctx, g, z, "silu")))(g, z)
  act = jax.jit(jax.vmap(lambda z: quant.act_quantize_dual(ctx, z, "gelu_tanh")))(z)
  for i in range(3):
    want = jax.jit(lambda g, z: quant.dact_quantize_dual(ctx, g, z, "silu"))(g[i], z[i])
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
      same(a[i], b)
    want = jax.jit(lambda z: quant.act_quantize_dual(ctx, z, "gelu_tanh"))(z[i])
    for a, b in zip(jax.tree_util.tree_leaves(act), jax.tree_util.tree_leaves(want)):
      same(a[i], b)


# ---------------------------------------------------------------------------
# fp8_mlp
# ---------------------------------------------------------------------------

def net64(x, ws, bs, act, final):
  y = f64(x)
  for l, w in enumerate(ws):
    z = y @ f64(w) + (f64(bs[l]) if bs is not None else 0.0)
    y = act64(CANON.get(act if l < len(ws) - 1 else final, "none"), z)
  return y


def stack(act, final):
  def op(x, ws, bs):
    y = x
    for l, w in enumerate(ws):
      y = jax_sm100.fp8_dot(y, w, bias=None if bs is None else bs[l],
                            activation=final if l == len(ws) - 1 else act)
    return y
  return op


def network(rng, dims, lead, with_bias=True):
  x = random_array(rng, lead + (dims[0],), BF16)
  ws = [random_array(rng, (dims[i], dims[i + 1]), BF16, scale=dims[i] ** -0.5)
        for i in range(len(dims) - 1)]
  bs = ([random_array(rng, (dims[i + 1],), F32, scale=0.5) for i in range(len(dims) - 1)]
        if with_bias else None)
  t = random_array(rng, lead + (dims[-1],), F32)
  return x, ws, bs, t


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("final,with_bias", [(None, True), ("gelu", True), ("relu", False)])
def test_fp8_mlp_matches_the_stack_of_fp8_dot_layers(path, rng, act, final, with_bias):
  mode, calls = path
  x, ws, bs, t = network(rng, [136, 256, 200, 24], (2, 70), with_bias)
  op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation=act, final_activation=final)
  y = jax.jit(op)(x, ws, bs)
  assert y.shape == (2, 70, 24) and y.dtype == np.dtype(BF16)
  ref = jax.jit(stack(act, final))(x, ws, bs)
  assert rel(y, ref) < 1e-2, rel(y, ref)
  assert rel(y, net64(x, ws, bs, act, final)) < 0.1
  argnums = (0, 1, 2) if with_bias else (0, 1)
  if calls is not None:
    calls.clear()
  grads = jax.jit(jax.grad(loss_fn(op), argnums))(x, ws, bs, t)
  if calls is not None:
    launched = [c[0] for c in calls]
    assert launched.count(ACT) == 2, launched  # one per hidden activation
    assert launched.count(DACT) == 2 + (final is not None), launched
  want = jax.jit(jax.grad(loss_fn(stack(act, final)), argnums))(x, ws, bs, t)
  flat_g, flat_w = jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want)
  assert len(flat_g) == len(flat_w)
  for g, w in zip(flat_g, flat_w):
    assert g.shape == w.shape and g.dtype == w.dtype
    assert np.isfinite(f64(g)).all()
    # The same FP8 products of the same rounded values, but for the activations' ulps
    # (a flipped e4m3 rounding moves one element by 2^-3 of itself).
    assert rel(g, w) < 2e-2, rel(g, w)


def test_fp8_mlp_without_hidden_activation_or_biases(cpu_ffi, rng):
  # No activation between the layers: the next layer quantizes z itself (the plain dual
  # quantizer), the backward's quantizer runs with activation 0 (dz = g and its sums).
  x, ws, _, t = network(rng, [128, 256, 64], (96,), with_bias=False)
  for act, final in [(None, "silu"), ("relu", None)]:
    op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation=act, final_activation=final)
    cpu_ffi.clear()
    grads = jax.jit(jax.grad(loss_fn(op), (0, 1)))(x, ws, None, t)
    launched = [c[0] for c in cpu_ffi]
    # dact: the hidden layer's, and the top layer's when it has an activation
    assert launched.count(ACT) == (act is not None), launched
    assert launched.count(DACT) == 1 + (final is not None), launched
    want = jax.jit(jax.grad(loss_fn(stack(act, final)), (0, 1)))(x, ws, None, t)
    for g, w in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want)):
      assert rel(g, w) < 2e-2, rel(g, w)


def test_fp8_mlp_grads_against_float64(cpu_ffi, rng):
  x, ws, bs, t = network(rng, [128, 256, 128, 16], (96,))
  op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation="silu")
  grads = jax.jit(jax.grad(loss_fn(op), (0, 1, 2)))(x, ws, bs, t)
  try:
    x64 = jax.enable_x64
  except AttributeError:
    from jax.experimental import enable_x64 as x64
  with x64(True):
    def f(x, ws, bs):
      y = x
      for l, w in enumerate(ws):
        z = y @ w + bs[l]
        y = jax.nn.silu(z) if l < 2 else z
      return jnp.sum((y - t.astype(jnp.float64)) ** 2) / y.shape[0]
    to64 = lambda v: jnp.asarray(f64(v))
    ref = jax.grad(f, (0, 1, 2))(to64(x), [to64(w) for w in ws], [to64(b) for b in bs])
    ref = [np.asarray(r) for r in jax.tree_util.tree_leaves(ref)]
  for g, r in zip(jax.tree_util.tree_leaves(grads), ref):
    assert rel(g, r) < 0.1, rel(g, r)  # FP8 operands: 2^-4 relative each


def test_fp8_mlp_hlo_writes_neither_d_nor_dz(cpu_ffi, rng):
  x, ws, bs, t = network(rng, [128, 256, 256, 16], (128,))
  op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation="gelu")
  g = jax.jit(jax.grad(lambda x, ws, bs: jnp.sum(op(x, ws, bs).astype(F32) ** 2), (1, 2)))
  text = g.lower(x, ws, bs).compile().as_text()
  assert text.count(f'custom_call_target="{ACT}"') == 2
  assert text.count(f'custom_call_target="{DACT}"') == 2
  assert text.count('custom_call_target="jax_sm100_fp8_gemm_bias"') == 3
  # No XLA gelu (tanh) outside the reference: the hidden activations are in the quantizer.
  assert "tanh" not in text


def test_fp8_mlp_falls_back_to_the_layers(path, rng):
  # f32 in: the block needs bf16; the op is then the stack of fp8_dot layers exactly.
  x = random_array(rng, (40, 64), F32)
  ws = [random_array(rng, (64, 128), F32, scale=0.125), random_array(rng, (128, 8), F32)]
  op = lambda x, ws: jax_sm100.fp8_mlp(x, ws, activation="relu")
  np.testing.assert_array_equal(np.asarray(jax.jit(op)(x, ws)),
                                np.asarray(jax.jit(lambda x, ws: stack("relu", None)(x, ws, None))(x, ws)))


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(weights=[]), TypeError, "fp8_mlp: weights must be a non-empty list"),
    (dict(weights=[np.zeros((9, 8), np.float32)]), ValueError, "weights[0] must have shape (16, d)"),
    (dict(biases=[np.zeros((7,), np.float32)]), ValueError, "bias must have shape (N,) = (8,)"),
    (dict(final_activation="tanh"), ValueError, "unknown activation 'tanh'"),
])
def test_fp8_mlp_bad_input_raises_before_running(kwargs, exc, msg):
  args = dict(x=np.zeros((4, 16), np.float32), weights=[np.zeros((16, 8), np.float32)],
              biases=None)
  args.update(kwargs)
  x, ws, bs = args.pop("x"), args.pop("weights"), args.pop("biases")
  with pytest.raises(exc, match=re.escape(msg)):
    jax_sm100.fp8_mlp(x, ws, bs, **args)


def test_fp8_mlp_per_example_grads_under_vmap(cpu_ffi, rng):
  x, ws, bs, t = network(rng, [64, 128, 16], (3, 48))
  op = lambda x, ws, bs: jax_sm100.fp8_mlp(x, ws, bs, activation="gelu")
  g = jax.jit(jax.vmap(jax.grad(loss_fn(op), (1, 2)), in_axes=(0, None, None, 0)))
  got = g(x, ws, bs, t)
  for i in range(3):
    want = jax.jit(jax.grad(loss_fn(op), (1, 2)))(x[i], ws, bs, t[i])
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
      assert rel(a[i], b) < 2e-2, rel(a[i], b)
