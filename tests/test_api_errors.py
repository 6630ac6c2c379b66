"""Bad input raises TypeError/ValueError at trace time with a sentence that
names the argument and what was expected."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100

BF = jnp.bfloat16


def _sds(shape, dtype=BF):
  return jax.ShapeDtypeStruct(shape, dtype)


def _raises_at_trace(fn, args, exc, match):
  """The error comes from tracing (eval_shape runs nothing) and eagerly."""
  with pytest.raises(exc, match=match):
    jax.eval_shape(fn, *args)
  concrete = [jnp.zeros(a.shape, a.dtype) if isinstance(a, jax.ShapeDtypeStruct) else a
              for a in args]
  with pytest.raises(exc, match=match):
    fn(*concrete)


MATMUL_CASES = [
    # (a, b, kwargs, exception, message)
    (_sds((4, 8), jnp.int32), _sds((8, 2), jnp.int32), {}, TypeError,
     r"matmul: a must have dtype bfloat16, float16, float32; got int32"),
    (_sds((4, 8), BF), _sds((8, 2), jnp.float32), {}, TypeError,
     r"matmul: a and b must have the same dtype; got bfloat16 and float32"),
    (_sds((8,)), _sds((8, 2)), {}, ValueError,
     r"matmul: a must have rank >= 2 \(\.\.\., M, K\); got shape \(8,\)"),
    (_sds((4, 8)), _sds((8,)), {}, ValueError, r"matmul: b must have rank >= 2"),
    (_sds((4, 8)), _sds((7, 2)), {}, ValueError,
     r"matmul: a's last dim \(K=8\) must equal b's second-to-last dim"),
    (_sds((3, 4, 8)), _sds((2, 8, 2)), {}, ValueError,
     r"matmul: the leading \(batch\) dims must match or broadcast"),
    (_sds((4, 8)), _sds((8, 2)), {"out_dtype": jnp.int8}, TypeError,
     r"matmul: out_dtype must be one of bfloat16, float16, float32; got int8"),
    (_sds((4, 8), jnp.float64 if jax.config.jax_enable_x64 else jnp.int16), _sds((8, 2)), {},
     TypeError, r"matmul: a must have dtype"),
]


@pytest.mark.parametrize("a,b,kw,exc,match", MATMUL_CASES)
def test_matmul_bad_input(a, b, kw, exc, match):
  _raises_at_trace(lambda a, b: jax_sm100.matmul(a, b, **kw), (a, b), exc, match)


def test_matmul_rejects_non_arrays():
  with pytest.raises(TypeError, match=r"matmul: a must be an array; got str"):
    jax_sm100.matmul("abc", jnp.ones((3, 2)))


RESIDUAL_CASES = [
    (_sds((4, 2)), {}, None, None),  # valid, sanity
    (_sds((4, 3)), {}, ValueError, r"matmul_residual: c must have the product's shape \(4, 2\)"),
    (_sds((4, 2), jnp.float32), {}, TypeError,
     r"matmul_residual: c must have the output dtype bfloat16; got float32"),
    (_sds((4, 2)), {"alpha": float("nan")}, ValueError,
     r"matmul_residual: alpha must be a finite real number; got nan"),
    (_sds((4, 2)), {"beta": float("inf")}, ValueError,
     r"matmul_residual: beta must be a finite real number; got inf"),
    (_sds((4, 2)), {"alpha": "2"}, TypeError,
     r"matmul_residual: alpha must be a finite Python real number \(it is a static kernel "
     r"attribute\); got str"),
    (_sds((4, 2)), {"beta": True}, TypeError, r"matmul_residual: beta must be a finite Python real"),
    (_sds((4, 2)), {"alpha": 1 + 2j}, TypeError, r"matmul_residual: alpha must be a finite Python real"),
]


@pytest.mark.parametrize("c,kw,exc,match", RESIDUAL_CASES)
def test_matmul_residual_bad_input(c, kw, exc, match):
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, **kw)
  args = (_sds((4, 8)), _sds((8, 2)), c)
  if exc is None:
    assert jax.eval_shape(f, *args).shape == (4, 2)
  else:
    _raises_at_trace(f, args, exc, match)


@pytest.mark.parametrize("a,b,c,match", [
    # 2-D product: one accepted shape, named once.
    ((4, 8), (8, 2), (4, 3), r"c must have the product's shape \(4, 2\); got \(4, 3\)\.(\n|$)"),
    # batched product: the full shape or (M, N) broadcast over the batch.
    ((3, 4, 8), (8, 2), (4, 3), r"c must have the product's shape \(3, 4, 2\) or \(M, N\) = "
     r"\(4, 2\) \(broadcast over the batch\); got \(4, 3\)\.(\n|$)"),
    # a bias-shaped c: says what to pass instead.
    ((4, 8), (8, 2), (2,), r"got \(2,\)\. A bias of shape \(N,\) is not broadcast here: pass "
     r"jnp\.broadcast_to\(c, \(4, 2\)\)\."),
])
def test_residual_shape_error_says_what_is_accepted(a, b, c, match):
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c)
  with pytest.raises(ValueError, match=match) as info:
    jax.eval_shape(f, _sds(a), _sds(b), _sds(c))
  assert str(info.value).count("(4, 2)") <= 2  # never the same shape twice in a row
  assert "(4, 2) or (4, 2)" not in str(info.value)


def test_residual_alpha_must_be_static():
  a, b, c = jnp.ones((4, 8), BF), jnp.ones((8, 2), BF), jnp.ones((4, 2), BF)
  f = jax.jit(lambda a, b, c, alpha: jax_sm100.matmul_residual(a, b, c, alpha=alpha))
  with pytest.raises(TypeError, match=r"alpha must be a finite Python real number .*"
                                      r"got a traced/JAX array"):
    f(a, b, c, 2.0)
  assert np.isfinite(np.asarray(jax_sm100.matmul_residual(a, b, c, alpha=np.float32(2),
                                                          beta=np.int64(3)),
                                np.float32)).all()


QUANT_CASES = [
    (_sds((4, 8, 2)), {}, ValueError,
     r"quantize_fp8_blockwise: x must have rank 2 \(R, C\); got shape \(4, 8, 2\)"),
    (_sds((4, 8), jnp.int32), {}, TypeError, r"quantize_fp8_blockwise: x must have dtype"),
    (_sds((4, 8)), {"block": (0, 128)}, ValueError,
     r"quantize_fp8_blockwise: block must be a pair of positive ints \(rows, cols\); got \(0, 128\)"),
    (_sds((4, 8)), {"block": 128}, ValueError, r"block must be a pair of positive ints"),
    (_sds((4, 8)), {"block": (1.0, 128)}, ValueError, r"block must be a pair of positive ints"),
    (_sds((4, 8)), {"dtype": jnp.int8}, TypeError,
     r"quantize_fp8_blockwise: dtype must be float8_e4m3fn or float8_e5m2"),
    (_sds((4, 8)), {"scale_transposed": 1}, TypeError,
     r"quantize_fp8_blockwise: scale_transposed must be a Python bool .*; got int"),
]


@pytest.mark.parametrize("x,kw,exc,match", QUANT_CASES)
def test_quantize_bad_input(x, kw, exc, match):
  _raises_at_trace(lambda x: jax_sm100.quantize_fp8_blockwise(x, **kw), (x,), exc, match)


E4 = jnp.float8_e4m3fn
F32 = jnp.float32
GOOD_FP8 = dict(a=_sds((200, 300), E4), a_scale=_sds((200, 3), F32),
                b=_sds((130, 300), E4), b_scale=_sds((2, 3), F32))
FP8_CASES = [
    ({}, {}, None, None),
    ({"a": _sds((200, 300), BF)}, {}, TypeError,
     r"fp8_blockwise_matmul: a must have dtype float8_e4m3fn, float8_e5m2; got bfloat16"),
    ({"a_scale": _sds((200, 2), F32)}, {}, ValueError,
     r"fp8_blockwise_matmul: a_scale must have shape \(200, 3\); got \(200, 2\)"),
    ({"b_scale": _sds((3, 3), F32)}, {}, ValueError,
     r"fp8_blockwise_matmul: b_scale must have shape \(2, 3\); got \(3, 3\)"),
    ({"b_scale": _sds((2, 3), BF)}, {}, TypeError,
     r"fp8_blockwise_matmul: b_scale must have dtype float32; got bfloat16"),
    ({"b": _sds((130, 256), E4)}, {}, ValueError,
     r"fp8_blockwise_matmul: a \(M, K\) and b \(N, K\) must have the same K"),
    ({"b": _sds((2, 130, 300), E4)}, {}, ValueError, r"b must have rank 2 \(N, K\)"),
    ({}, {"c": jnp.zeros((200, 131), BF)}, ValueError,
     r"fp8_blockwise_matmul: c must have shape \(M, N\) = \(200, 130\); got \(200, 131\)"),
    ({}, {"c": jnp.zeros((200, 130), F32)}, TypeError,
     r"fp8_blockwise_matmul: c must have the output dtype bfloat16; got float32"),
    ({}, {"beta": float("nan")}, ValueError, r"beta must be a finite real number"),
    ({}, {"out_dtype": jnp.int32}, TypeError, r"out_dtype must be one of"),
    ({"a_scale": _sds((3, 200), F32)}, {"a_scale_transposed": True}, None, None),
    ({}, {"a_scale_transposed": True}, ValueError,
     r"fp8_blockwise_matmul: a_scale must have shape \(3, 200\) = \(ceil\(K/128\), M\) "
     r"with a_scale_transposed=True; got \(200, 3\)"),
    ({"a_scale": _sds((3, 200), F32)}, {}, ValueError,
     r"a_scale must have shape \(200, 3\); got \(3, 200\)"),
    ({}, {"a_scale_transposed": "yes"}, TypeError,
     r"fp8_blockwise_matmul: a_scale_transposed must be a Python bool .*; got str"),
]


@pytest.mark.parametrize("over,kw,exc,match", FP8_CASES)
def test_fp8_blockwise_matmul_bad_input(over, kw, exc, match):
  args = {**GOOD_FP8, **over}
  f = lambda a, a_scale, b, b_scale: jax_sm100.fp8_blockwise_matmul(a, a_scale, b, b_scale, **kw)
  order = (args["a"], args["a_scale"], args["b"], args["b_scale"])
  if exc is None:
    assert jax.eval_shape(f, *order).shape == (200, 130)
  else:
    _raises_at_trace(f, order, exc, match)


FP8_DOT_CASES = [
    (_sds((4, 8), E4), _sds((8, 2)), TypeError, r"fp8_dot: x must have dtype bfloat16"),
    (_sds((4, 8)), _sds((2, 8, 2)), ValueError, r"fp8_dot: w must have rank 2 \(K, N\)"),
    (_sds((4, 8)), _sds((7, 2)), ValueError,
     r"fp8_dot: x's last dim \(K=8\) must equal w's first dim"),
    (_sds(()), _sds((7, 2)), ValueError, r"fp8_dot: x must have rank >= 1"),
]


@pytest.mark.parametrize("x,w,exc,match", FP8_DOT_CASES)
def test_fp8_dot_bad_input(x, w, exc, match):
  _raises_at_trace(jax_sm100.fp8_dot, (x, w), exc, match)
