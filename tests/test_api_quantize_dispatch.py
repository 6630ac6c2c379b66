"""The FP8 quantization kernel dispatch, checked without a GPU (see test_api_dispatch).

quantize_fp8_blockwise and fp8_dot's quantizations must launch the
jax_sm100_quantize_fp8 kernel on the kernel path (1x128 / 128x128 e4m3 blocks)
and the reference for everything else; vmap must not loop.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from conftest import assert_same_product, random_array

TARGET = "jax_sm100_quantize_fp8"


def quant_calls(f, *args):
  text = jax.jit(f).lower(*args).as_text()
  return re.findall(r"stablehlo\.custom_call @" + TARGET + r"\(.*?\{.*?block_rows = (\d+) : i32", text)


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_quantize_lowers_to_the_kernel(fake_sm90, block):
  x = jnp.ones((257, 300), jnp.bfloat16)
  calls = quant_calls(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block), x)
  assert calls == [str(block[0])]


@pytest.mark.parametrize("block,dtype", [((1, 64), jnp.float8_e4m3fn),
                                         ((32, 128), jnp.float8_e4m3fn),
                                         ((1, 128), jnp.float8_e5m2)])
def test_quantize_other_blocks_or_formats_take_the_reference(fake_sm90, block, dtype):
  x = jnp.ones((64, 256), jnp.float32)
  assert quant_calls(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block, dtype=dtype), x) == []


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_quantize_vmap_is_one_launch(fake_sm90, block):
  x = jnp.ones((4, 33, 256), jnp.bfloat16)
  f = jax.vmap(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))
  assert quant_calls(f, x) == [str(block[0])]


def test_fp8_dot_forward_and_backward_quantize_on_the_kernel(fake_sm90, monkeypatch):
  # Without the dual kernel (see below for the default, with it).
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", "jax_sm100_quantize_fp8_dual")
  x, w = jnp.ones((64, 256), jnp.bfloat16), jnp.ones((256, 128), jnp.bfloat16)
  fwd = quant_calls(jax_sm100.fp8_dot, x, w)
  assert sorted(fwd) == ["1", "128"]          # x in 1x128, w in 128x128
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)
  both = quant_calls(jax.grad(loss, argnums=(0, 1)), x, w)
  # forward: x (1x128), w (128x128); backward: g (1x128), x^T (1x128), g^T (128x128)
  assert sorted(both) == ["1", "1", "1", "128", "128"]


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_emulated_quantize_path_matches_reference(rng, emulated_kernels, block):
  x = random_array(rng, (200, 260), jnp.float32, scale=3.0)
  q, s = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))(x)
  assert any(c[0] == TARGET for c in emulated_kernels)
  from jax_sm100._reference import quantize_blockwise
  q_ref, s_ref = quantize_blockwise(x, block, jnp.float8_e4m3fn)
  np.testing.assert_array_equal(np.asarray(s), np.asarray(s_ref))
  np.testing.assert_array_equal(np.asarray(q.astype(jnp.float32)), np.asarray(q_ref.astype(jnp.float32)))


@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_emulated_quantize_vmap_matches_per_example(rng, emulated_kernels, block):
  # 128x128: 200 rows per example, zero-padded to 256 before the fold
  x = random_array(rng, (3, 200, 256), jnp.bfloat16, scale=3.0)
  q, s = jax.vmap(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))(x)
  for i in range(x.shape[0]):
    qi, si = jax_sm100.quantize_fp8_blockwise(x[i], block=block)
    np.testing.assert_array_equal(np.asarray(s[i]), np.asarray(si))
    np.testing.assert_array_equal(np.asarray(q[i].astype(jnp.float32)), np.asarray(qi.astype(jnp.float32)))


# ---------------------------------------------------------------------------
# jax_sm100_quantize_fp8_dual: x and x^T quantized in one pass (fp8_dot's
# forward for x, its backward for g). JAX_SM100_DISABLE_TARGETS turns it off
# (fp8_dot then runs the two single quantizations).
# ---------------------------------------------------------------------------

DUAL = "jax_sm100_quantize_fp8_dual"


def dual_calls(f, *args):
  """(block_rows, t_block_rows) of every dual quantize launch in f's lowering."""
  text = jax.jit(f).lower(*args).as_text()
  return re.findall(r"stablehlo\.custom_call @" + DUAL + r"\([^{]*\{[^}]*?\bblock_rows = (\d+) : i32"
                    r"[^}]*?t_block_rows = (\d+) : i32", text)


def _fp8_loss(x, w):
  return jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)


def test_disable_targets_turns_the_dual_quantize_off(fake_sm90, monkeypatch):
  from jax_sm100 import _backend
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", DUAL)
  assert DUAL not in _backend.context().targets
  x, w = jnp.ones((64, 256), jnp.bfloat16), jnp.ones((256, 128), jnp.bfloat16)
  assert dual_calls(jax.grad(_fp8_loss, argnums=(0, 1)), x, w) == []
  monkeypatch.delenv("JAX_SM100_DISABLE_TARGETS")
  assert DUAL in _backend.context().targets


def test_disable_targets_rejects_unknown_names(fake_sm90, monkeypatch):
  from jax_sm100 import _backend
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", "jax_sm100_quantize_fp8_duel")
  with pytest.raises(ValueError, match="unknown target"):
    _backend.context()


def test_fp8_dot_grad_uses_the_dual_quantize(fake_sm90, monkeypatch):
  monkeypatch.delenv("JAX_SM100_DISABLE_TARGETS", raising=False)
  x, w = jnp.ones((64, 256), jnp.bfloat16), jnp.ones((256, 128), jnp.bfloat16)
  f = jax.grad(_fp8_loss, argnums=(0, 1))
  # forward: x and x^T (1x128 each) in one launch, w and w^T (128x128 each) in one
  # launch; backward: g (1x128) and g^T (128x128) in one launch.
  assert sorted(dual_calls(f, x, w)) == [("1", "1"), ("1", "128"), ("128", "128")]
  assert quant_calls(f, x, w) == []
  # The primal alone: x (1x128) through the single quantize; w^T from w's dual launch
  # (reading w once beats an XLA transpose of w and then quantizing it).
  assert dual_calls(jax_sm100.fp8_dot, x, w) == [("128", "128")]
  assert quant_calls(jax_sm100.fp8_dot, x, w) == ["1"]


@pytest.mark.parametrize("shape", [(200, 260), (128, 384), (1, 16), (300, 129)])
@pytest.mark.parametrize("t_block", [1, 128])
def test_dual_quantize_equals_two_quantizations(rng, emulated_kernels, monkeypatch, shape, t_block):
  # The op's contract, through the emulated FFI call: bit-identical to
  # quantize(x, 1x128) and quantize(x^T, t_block x 128).
  from jax_sm100 import _backend
  from jax_sm100._launch.quantize import quantize_dual
  from jax_sm100._reference import quantize_blockwise as _quantize
  x = random_array(rng, shape, jnp.bfloat16, scale=5.0)
  ctx = _backend.context()
  (q, s), (qt, st) = jax.jit(lambda x: quantize_dual(ctx, x, t_block))(x)
  assert [c[0] for c in emulated_kernels] == [DUAL]
  bits = lambda a: np.asarray(a).view(np.uint8 if a.dtype.itemsize == 1 else np.uint32)
  rq, rs = _quantize(x, (1, 128), jnp.float8_e4m3fn)
  rqt, rst = _quantize(x.T, (t_block, 128), jnp.float8_e4m3fn)
  for got, want in ((q, rq), (s, rs), (qt, rqt), (st, rst)):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


def test_fp8_dot_grads_identical_with_and_without_dual_quantize(rng, emulated_kernels, monkeypatch):
  x = random_array(rng, (3, 50, 256), jnp.bfloat16)
  w = random_array(rng, (256, 136), jnp.bfloat16)
  f = jax.jit(jax.value_and_grad(_fp8_loss, argnums=(0, 1)))
  monkeypatch.setenv("JAX_SM100_DISABLE_TARGETS", DUAL)
  jax.clear_caches()
  base = f(x, w)
  assert all(c[0] != DUAL for c in emulated_kernels)
  monkeypatch.delenv("JAX_SM100_DISABLE_TARGETS")
  jax.clear_caches()
  dual = f(x, w)
  assert any(c[0] == DUAL for c in emulated_kernels)
  for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(dual)):
    assert_same_product(b, a, "dual quantize")


def test_fp8_dot_grad_vmap_with_dual_quantize(rng, emulated_kernels, monkeypatch):
  x = random_array(rng, (2, 40, 256), jnp.float32)
  w = random_array(rng, (256, 128), jnp.float32)
  g = jax.vmap(jax.grad(_fp8_loss, argnums=(0, 1)), (0, None))(x, w)
  # Batched, the dual op runs the single quantize kernels under vmap (1x128 folds
  # the batch into rows), not the XLA reference.
  assert any(t == TARGET and int(a["block_rows"]) == 1 for t, _, a in emulated_kernels)
  for i in range(x.shape[0]):
    gi = jax.grad(_fp8_loss, argnums=(0, 1))(x[i], w)
    for a, b in zip(g, gi):
      assert_same_product(a[i], b, "vmap of the gradient")


# ---------------------------------------------------------------------------
# Transposed A scales straight from the quantizers (fp8_dot): the fp8 kernel
# reads a's 1x128 scales transposed, (ceil(K/128), round_up(M, 4)), and fp8_dot's
# quantize launches write them so (no XLA transpose in between).
# jax_sm100.tuning.override(fp8_fused_scales=False) turns it off.
# ---------------------------------------------------------------------------

def _gemm_a_scale_producers(f, *args):
  """For every fp8 GEMM launch in f's lowering: the op that produced its a_scale."""
  text = jax.jit(f).lower(*args).as_text()
  producer = {m.group(1): m.group(2) for m in re.finditer(
      r"(%[\w]+)(?::\d+)? = (stablehlo\.custom_call @\w+|[\w.]+)", text)}
  return [producer[m.group(1).split("#")[0]] for m in re.finditer(
      r"custom_call @jax_sm100_fp8_gemm\(%[\w#]+, (%[\w#]+),", text)]


@pytest.mark.parametrize("fused", [True, False])
def test_fp8_dot_gemms_take_a_scales_from_the_quantizers(fake_sm90, monkeypatch, fused):
  monkeypatch.delenv("JAX_SM100_DISABLE_TARGETS", raising=False)
  x, w = jnp.ones((64, 256), jnp.bfloat16), jnp.ones((256, 128), jnp.bfloat16)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w))
  with jax_sm100.tuning.override(fp8_fused_scales=fused):
    primal = _gemm_a_scale_producers(jax_sm100.fp8_dot, x, w)
    grads = _gemm_a_scale_producers(jax.grad(loss, argnums=(0, 1)), x, w)
  assert len(primal) == 1 and len(grads) == 2  # y; dx and dw (y itself is not needed)
  quantizer = re.compile(r"stablehlo\.custom_call @jax_sm100_quantize_fp8(_dual)?$")
  for p in primal + grads:
    assert bool(quantizer.match(p)) == fused, (p, primal, grads)


@pytest.mark.parametrize("x_dtype,w_dtype,out_dtype", [
    (jnp.bfloat16, jnp.bfloat16, None),          # all three products on the kernel
    (jnp.bfloat16, jnp.float32, jnp.bfloat16),   # dw (f32 out) takes the reference
    (jnp.float32, jnp.bfloat16, jnp.float32),    # y and dx (f32 out) take the reference
])
def test_fp8_dot_fused_scales_are_bit_identical(rng, emulated_kernels, monkeypatch,
                                                x_dtype, w_dtype, out_dtype):
  x = random_array(rng, (3, 50, 256), x_dtype)
  w = random_array(rng, (256, 136), w_dtype)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w, out_dtype=out_dtype).astype(jnp.float32) ** 2)
  f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  # vmap over a batch of x (the quantizers' and the GEMM's vmap rules with
  # transposed A scales)
  fv = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1)), (0, None)))
  xb = jnp.stack([x[0], x[1]])
  jax.clear_caches()
  with jax_sm100.tuning.override(fp8_fused_scales=False):
    base, base_v = f(x, w), fv(xb, w)
  jax.clear_caches()
  fused, fused_v = f(x, w), fv(xb, w)
  for a, b in zip(jax.tree.leaves((base, base_v)), jax.tree.leaves((fused, fused_v))):
    assert_same_product(b, a, "fused A scales")


# ---------------------------------------------------------------------------
# Transposed scales in the public API: quantize_fp8_blockwise(scale_transposed=True)
# feeds fp8_blockwise_matmul(a_scale_transposed=True) with nothing in between.
# ---------------------------------------------------------------------------

def _public_chain(transposed, c=None, beta=1.0):
  def f(x, b, sb):
    a, sa = jax_sm100.quantize_fp8_blockwise(x, scale_transposed=transposed)
    return jax_sm100.fp8_blockwise_matmul(a, sa, b, sb, c=c, beta=beta,
                                          a_scale_transposed=transposed)
  return f


def test_transposed_scales_reach_the_gemm_without_a_transpose(fake_sm90):
  x = jnp.ones((64, 256), jnp.bfloat16)
  b, sb = jnp.ones((128, 256), jnp.float8_e4m3fn), jnp.ones((1, 2), jnp.float32)
  default = jax.jit(_public_chain(False)).lower(x, b, sb).as_text()
  assert "stablehlo.transpose" in default  # documented layout: XLA transposes a's scales
  text = jax.jit(_public_chain(True)).lower(x, b, sb).as_text()
  assert "custom_call @jax_sm100_fp8_gemm(" in text
  assert re.search(r"custom_call @" + TARGET + r"\(.*scale_transposed = 1 : i32", text)
  assert "stablehlo.transpose" not in text
  # vmap over a batch of x: still one quantize and one GEMM launch (folded into M)
  fv = jax.jit(jax.vmap(_public_chain(True), in_axes=(0, None, None)))
  text = fv.lower(jnp.ones((3, 64, 256), jnp.bfloat16), b, sb).as_text()
  assert text.count("custom_call @jax_sm100_fp8_gemm(") == 1
  assert text.count("custom_call @" + TARGET + "(") == 1


@pytest.mark.parametrize("m", [50, 64])  # 50: the transposed A scales get pad columns
@pytest.mark.parametrize("with_c", [False, True])
def test_emulated_transposed_scales_give_the_same_product(rng, emulated_kernels, m, with_c):
  x = random_array(rng, (m, 300), jnp.bfloat16, scale=3.0)
  b, sb = jax_sm100.quantize_fp8_blockwise(random_array(rng, (136, 300), jnp.bfloat16),
                                           block=(128, 128))
  kw = dict(c=random_array(rng, (m, 136), jnp.bfloat16), beta=-0.5) if with_c else {}
  want = jax.jit(_public_chain(False, **kw))(x, b, sb)
  got = jax.jit(_public_chain(True, **kw))(x, b, sb)
  gemm = "jax_sm100_fp8_gemm_residual" if with_c else "jax_sm100_fp8_gemm"
  assert any(call[0] == gemm for call in emulated_kernels)
  assert_same_product(got, want, "transposed A scales")
  # vmap over a batch of x
  xb = jnp.stack([x, x[::-1]])
  got_v = jax.jit(jax.vmap(_public_chain(True), in_axes=(0, None, None)))(xb, b, sb)
  for i in range(2):
    assert_same_product(got_v[i], _public_chain(False)(xb[i], b, sb), f"vmap row {i}")
