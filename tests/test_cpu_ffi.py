"""JAX_SM100_BACKEND=cpu_ffi: the FFI targets' CPU handlers, run through the real launch
layer on a CPU (custom calls in the HLO, padding, batching rules, custom_vjp).

The handlers implement the kernels' contract in plain C++ (ffi/src/cpu/): quantization
bit-identical with the reference recipe, GEMMs with fp32 accumulation, the FP8 GEMM with
the kernel's per-128-K-block promotion; tile attributes validated as on the GPU.
"""
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _reference
from jax_sm100._launch import quantize as qlaunch
from conftest import (assert_matmul_close, calc_diff, f64, np_dequantize, random_array)

BF16, F16, F32, E4M3 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.float8_e4m3fn
# The registration table's targets, written out here so that a target lost from (or
# added to) ffi/src/targets.h without its CPU handler and a test shows.
TARGETS = ("jax_sm100_gemm", "jax_sm100_gemm_residual", "jax_sm100_fp8_gemm",
           "jax_sm100_fp8_gemm_residual", "jax_sm100_quantize_fp8", "jax_sm100_quantize_fp8_dual",
           "jax_sm100_mxfp8_gemm", "jax_sm100_grouped_gemm", "jax_sm100_kgrouped_gemm",
           "jax_sm100_fp8_grouped_gemm", "jax_sm100_gemm_bias", "jax_sm100_fp8_gemm_bias",
           "jax_sm100_gemm_dact", "jax_sm100_quantize_fp8_act_dual",
           "jax_sm100_quantize_fp8_dact_dual")
needs_cpu_handlers = pytest.mark.skipif(
    not _ffi_registry.registered_cpu_targets() or jax.devices()[0].platform != "cpu",
    reason="needs the extension's CPU handlers and a CPU default device")


def bits_equal(x, y):
  """Same bits, any NaN equal to any NaN (the recipe keeps NaN visible, not its sign)."""
  x, y = np.asarray(x), np.asarray(y)
  assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
  xf, yf = x.astype(np.float32), y.astype(np.float32)
  view = np.uint32 if x.dtype == np.float32 else np.uint8
  return bool(np.all((x.view(view) == y.view(view)) | (np.isnan(xf) & np.isnan(yf))))


def hlo(f, *args):
  return jax.jit(f).lower(*args).as_text()


def on_reference(monkeypatch, f, *args):
  """f(*args) on the reference path (then back to cpu_ffi)."""
  monkeypatch.setenv(_backend.BACKEND_ENV, "reference")
  jax.clear_caches()
  try:
    return jax.jit(f)(*args)
  finally:
    monkeypatch.setenv(_backend.BACKEND_ENV, "cpu_ffi")
    jax.clear_caches()


# --------------------------------------------------------------------------
# Backend selection
# --------------------------------------------------------------------------

def test_every_build_has_every_cpu_handler():
  assert sorted(jax_sm100._ffi.cpu_registrations()) == sorted(jax_sm100._ffi.target_names())
  assert set(TARGETS) == set(jax_sm100._ffi.target_names())
  assert _ffi_registry.registered_cpu_targets() == set(TARGETS)


@needs_cpu_handlers
def test_backend_env_values(monkeypatch):
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.delenv(_backend.BACKEND_ENV, raising=False)
  assert jax_sm100.backend() == "reference"  # auto on a CPU
  for value, want in [("auto", "reference"), ("reference", "reference"), ("cpu_ffi", "cpu_ffi"),
                      ("", "reference"), (" CPU_FFI ", "cpu_ffi")]:
    monkeypatch.setenv(_backend.BACKEND_ENV, value)
    assert jax_sm100.backend() == want, value
  ctx = _backend.context()
  assert ctx.backend == "cpu_ffi" and ctx.targets == set(TARGETS)
  assert all(ctx.can_call(t) for t in TARGETS)
  monkeypatch.setenv(_ffi_registry.DISABLE_TARGETS_ENV, "jax_sm100_gemm")
  assert not _backend.context().can_call("jax_sm100_gemm")
  assert "disabled" in _backend.context().why_not("jax_sm100_gemm")
  monkeypatch.delenv(_ffi_registry.DISABLE_TARGETS_ENV)
  monkeypatch.setenv(_backend.FORCE_REFERENCE_ENV, "1")  # keeps working, and wins
  assert jax_sm100.backend() == "reference"
  assert _backend.FORCE_REFERENCE_ENV in _backend.why_reference()
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV)
  monkeypatch.setenv(_backend.BACKEND_ENV, "reference")
  assert "JAX_SM100_BACKEND=reference" in _backend.why_reference()


@pytest.mark.parametrize("value", ["cuda", "cpu-ffi", "1"])
def test_unknown_backend_value_raises_at_trace_time(monkeypatch, value):
  monkeypatch.setenv(_backend.BACKEND_ENV, value)
  jax.clear_caches()
  with pytest.raises(ValueError, match="auto, reference, cpu_ffi"):
    jax_sm100.backend()
  with pytest.raises(ValueError, match="JAX_SM100_BACKEND"):
    jax.jit(jax_sm100.matmul)(jnp.ones((2, 2), BF16), jnp.ones((2, 2), BF16))
  monkeypatch.setenv(_backend.FORCE_REFERENCE_ENV, "1")  # validated even then
  with pytest.raises(ValueError, match="JAX_SM100_BACKEND"):
    jax_sm100.backend()
  jax.clear_caches()


# --------------------------------------------------------------------------
# Every op emits its custom call
# --------------------------------------------------------------------------

def test_every_op_launches_its_target(cpu_ffi):
  a, b, c = jnp.ones((5, 40), BF16), jnp.ones((40, 9), BF16), jnp.ones((5, 9), BF16)
  x, w = jnp.ones((6, 200), F32), jnp.ones((200, 24), F32)
  q, s = jax_sm100.quantize_fp8_blockwise(x)
  wq, ws = jax_sm100.quantize_fp8_blockwise(w.T, block=(128, 128))
  gw, sizes = jnp.ones((2, 200, 24), BF16), jnp.array([4, 2], jnp.int32)  # two experts
  fp8_mlp_grad = (jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_mlp(
      x, [w, jnp.ones((24, 8), BF16)], activation="gelu").astype(F32) ** 2), argnums=1),
      x.astype(BF16), w.astype(BF16))
  cases = {
      "jax_sm100_gemm": (jax_sm100.matmul, a, b),
      "jax_sm100_gemm_residual": (lambda a, b, c: jax_sm100.matmul_residual(a, b, c, beta=0.5),
                                  a, b, c),
      "jax_sm100_quantize_fp8": (jax_sm100.quantize_fp8_blockwise, x),
      "jax_sm100_fp8_gemm": (jax_sm100.fp8_blockwise_matmul, q, s, wq, ws),
      "jax_sm100_fp8_gemm_residual": (
          lambda *o: jax_sm100.fp8_blockwise_matmul(*o, c=jnp.ones((6, 24), BF16)), q, s, wq, ws),
      "jax_sm100_quantize_fp8_dual": (jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w))),
                                      x, w),
      "jax_sm100_mxfp8_gemm": (lambda x, w: jax_sm100.mxfp8_matmul(
          *jax_sm100.quantize_mxfp8(x), *jax_sm100.quantize_mxfp8(w.T)), x, w),
      "jax_sm100_grouped_gemm": (jax_sm100.ragged_dot, x.astype(BF16), gw, sizes),
      "jax_sm100_kgrouped_gemm": (jax.grad(lambda x, w, s: jnp.sum(
          jax_sm100.ragged_dot(x, w, s).astype(F32)), argnums=1), x.astype(BF16), gw, sizes),
      "jax_sm100_fp8_grouped_gemm": (jax_sm100.fp8_ragged_dot, x.astype(BF16), gw, sizes),
      "jax_sm100_gemm_bias": (lambda a, b: jax_sm100.matmul_bias(a, b, jnp.ones(9),
                                                                 activation="gelu"), a, b),
      "jax_sm100_fp8_gemm_bias": (lambda x, w: jax_sm100.fp8_dot(
          x.astype(BF16), w.astype(BF16), bias=jnp.ones(24), activation="silu"), x, w),
      "jax_sm100_gemm_dact": (jax.grad(lambda a, b: jnp.sum(jax_sm100.mlp(
          a, [b, jnp.ones((9, 3), BF16)]).astype(F32) ** 2), argnums=1), a, b),
      "jax_sm100_quantize_fp8_act_dual": fp8_mlp_grad,
      "jax_sm100_quantize_fp8_dact_dual": fp8_mlp_grad,
  }
  for target, (f, *args) in cases.items():
    assert f"custom_call @{target}(" in hlo(f, *args), target
  assert {t for t, _, _ in cpu_ffi} == set(TARGETS)


# --------------------------------------------------------------------------
# float -> e4m3fn and the quantize targets: bit-exact
# --------------------------------------------------------------------------

def _check_e4m3(u32):
  x = np.asarray(u32, np.uint32).view(np.float32)
  got = np.frombuffer(jax_sm100._ffi.cpu_f32_to_e4m3fn(x.tobytes()), np.uint8)
  with np.errstate(invalid="ignore", over="ignore"):
    want = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
  ok = np.where(np.isnan(x), got == 0x7F, got == want)
  assert ok.all(), [(float(v), hex(g), hex(w)) for v, g, w in
                    zip(x[~ok][:8], got[~ok][:8], want[~ok][:8])]


def test_e4m3_conversion_against_ml_dtypes():
  # Every sign/exponent/top-7-mantissa-bit pattern, with low halves that hit each rounding
  # boundary: exact ties (0x0000 with the tie bit above), one ulp either side, and more.
  low = np.array([0x0000, 0x0001, 0x0002, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF, 0x4000,
                  0xC000, 0x1234, 0xABCD], np.uint32)
  high = np.arange(1 << 16, dtype=np.uint32)
  _check_e4m3((high[:, None] << 16 | low[None, :]).ravel())
  rng = np.random.default_rng(0)
  _check_e4m3(rng.integers(0, 1 << 32, size=1 << 22, dtype=np.uint64).astype(np.uint32))


@pytest.mark.skipif(os.environ.get("JAX_SM100_TEST_EXHAUSTIVE") != "1",
                    reason="all 2^32 float32 values: about 2 minutes; JAX_SM100_TEST_EXHAUSTIVE=1")
def test_e4m3_conversion_exhaustive():
  for hi in range(0, 1 << 16, 1 << 10):
    _check_e4m3((np.arange(hi, hi + (1 << 10), dtype=np.uint32)[:, None] << 16
                 | np.arange(1 << 16, dtype=np.uint32)[None, :]).ravel())


def _hard_input(rng, shape, dtype):
  """Blocks over 12 decades, zero blocks, a tiny (subnormal-scale) row, +-inf and a NaN."""
  r, c = shape
  x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 6, size=(r, 1))
  if dtype == F16:
    x = np.clip(x, -6e4, 6e4)
  x[:, :min(c, 7)] = 0.0
  if r > 3:
    x[3] = 0.0
    x[2] *= 1e-38 if dtype != F16 else 1e-4
  if r > 5 and c > 130:
    x[4, 130] = np.inf
    x[5, 129] = -np.inf
    x[min(r - 1, 200), 3] = np.nan
  return jnp.asarray(x.astype(np.float32)).astype(dtype)


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (6, 131), (257, 300), (130, 128)])
@pytest.mark.parametrize("block", [(1, 128), (128, 128)])
def test_quantize_bit_exact(cpu_ffi, rng, dtype, shape, block):
  x = _hard_input(rng, shape, dtype)
  q, s = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))(x)
  assert cpu_ffi and cpu_ffi[-1][0] == "jax_sm100_quantize_fp8"
  rq, rs = jax.jit(lambda x: _reference.quantize_blockwise(x, block, E4M3))(x)
  assert bits_equal(s, rs) and bits_equal(q, rq)
  if block == (1, 128):  # the transposed layout, written by the handler
    qt, st = jax.jit(lambda x: jax_sm100.quantize_fp8_blockwise(x, scale_transposed=True))(x)
    assert bits_equal(qt, rq) and bits_equal(st, np.asarray(rs).T)


@pytest.mark.parametrize("block_rows,t_block_rows,st,stt", [
    (1, 1, False, False), (1, 1, True, True), (1, 128, True, False), (1, 128, False, False),
    (128, 128, False, False)])
def test_quantize_dual_bit_exact_with_layouts(cpu_ffi, rng, block_rows, t_block_rows, st, stt):
  x = _hard_input(rng, (261, 203), BF16)
  ctx = _backend.context()
  (q, s), (qt, sct) = jax.jit(lambda x: qlaunch.quantize_dual(
      ctx, x, t_block_rows, st, stt, block_rows))(x)
  assert cpu_ffi[-1][0] == "jax_sm100_quantize_fp8_dual"
  rq, rs = _reference.quantize_blockwise(x, (block_rows, 128), E4M3)
  rqt, rst = _reference.quantize_blockwise(x.T, (t_block_rows, 128), E4M3)
  pad = lambda s: np.pad(np.asarray(s).T, ((0, 0), (0, -s.shape[0] % 4)), constant_values=1)
  assert bits_equal(q, rq) and bits_equal(s, pad(rs) if st else rs)
  assert bits_equal(qt, rqt) and bits_equal(sct, pad(rst) if stt else rst)


def test_quantize_vmap_folds_into_one_launch(cpu_ffi, rng):
  x = jnp.stack([_hard_input(rng, (130, 260), F32) for _ in range(3)])
  for block in [(1, 128), (128, 128)]:
    f = jax.vmap(lambda x: jax_sm100.quantize_fp8_blockwise(x, block=block))
    assert hlo(f, x).count("custom_call @") == 1
    q, s = jax.jit(f)(x)
    for i in range(3):
      rq, rs = _reference.quantize_blockwise(x[i], block, E4M3)
      assert bits_equal(q[i], rq) and bits_equal(s[i], rs)


# --------------------------------------------------------------------------
# bf16/fp16 GEMMs against float64
# --------------------------------------------------------------------------

def _np_matmul(a, b):
  return np.matmul(f64(a), f64(b)), np.matmul(np.abs(f64(a)), np.abs(f64(b)))


@pytest.mark.parametrize("in_dtype,out_dtype", [(BF16, BF16), (F16, F16), (BF16, F32),
                                                (F16, BF16)])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((37, 100), (100, 53)), ((1, 7), (7, 1)), ((2, 3, 17, 33), (33, 9)),
    ((4, 9, 24), (4, 24, 40)), ((1, 5, 8), (3, 8, 16)), ((129, 260), (260, 131))])
def test_matmul(cpu_ffi, rng, in_dtype, out_dtype, a_shape, b_shape):
  a, b = random_array(rng, a_shape, in_dtype), random_array(rng, b_shape, in_dtype)
  d = jax.jit(lambda a, b: jax_sm100.matmul(a, b, out_dtype=out_dtype))(a, b)
  assert d.dtype == out_dtype and cpu_ffi[-1][0] == "jax_sm100_gemm"
  ref, absprod = _np_matmul(a, b)
  assert_matmul_close(d, ref, absprod, a_shape[-1], out_dtype, what="matmul")


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0)])
def test_matmul_residual(cpu_ffi, rng, alpha, beta):
  a, b = random_array(rng, (2, 45, 70), BF16), random_array(rng, (70, 30), BF16)
  c = random_array(rng, (45, 30), BF16)
  if beta == 0.0:
    c = c.at[0, 0].set(jnp.nan)  # beta == 0: c is never read
  d = jax.jit(lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=alpha, beta=beta))(a, b, c)
  assert cpu_ffi[-1][0] == "jax_sm100_gemm_residual"
  ref, absprod = _np_matmul(a, b)
  ref = alpha * ref + (beta * f64(c) if beta else 0.0)
  assert_matmul_close(d, ref, abs(alpha) * absprod, 70, BF16, extra=2.0**-24 * np.abs(ref),
                      what="matmul_residual")


def test_matmul_vmap_is_one_launch(cpu_ffi, rng):
  a, b = random_array(rng, (5, 12, 20), BF16), random_array(rng, (20, 16), BF16)
  f = jax.vmap(jax_sm100.matmul, in_axes=(0, None))
  assert hlo(f, a, b).count("custom_call @jax_sm100_gemm(") == 1
  d = jax.jit(f)(a, b)
  ref, absprod = _np_matmul(a, b)
  assert_matmul_close(d, ref, absprod, 20, BF16, what="vmap")


def _close_to(got, want, rel):
  got, want = f64(got), f64(want)
  assert np.all(np.abs(got - want) <= rel * np.abs(want) + 1e-6 * np.abs(want).max()), \
      np.abs(got - want).max()


def test_matmul_grads(cpu_ffi, monkeypatch, rng):
  a, b = random_array(rng, (3, 19, 41), BF16), random_array(rng, (41, 27), BF16)
  c = random_array(rng, (19, 27), BF16)
  loss = lambda a, b, c: (jnp.sum(jax_sm100.matmul(a, b).astype(F32) ** 2) +
                          jnp.sum(jax_sm100.matmul_residual(a, b, c, alpha=0.5,
                                                            beta=2.0).astype(F32) ** 2))
  grad = jax.grad(loss, argnums=(0, 1, 2))
  text = hlo(grad, a, b, c)
  assert "custom_call @jax_sm100_gemm(" in text and "custom_call @jax_sm100_gemm_residual(" in text
  got = jax.jit(grad)(a, b, c)
  want = on_reference(monkeypatch, grad, a, b, c)
  for g, w in zip(got, want):  # both fp32-accumulated, bf16 outputs: a few ulps apart
    _close_to(g, w, 2.0**-6)


# --------------------------------------------------------------------------
# FP8 GEMM against the dequantized float64 product
# --------------------------------------------------------------------------

def _fp8_operands(rng, m, n, k):
  x = random_array(rng, (m, k), F32) * 10.0 ** rng.uniform(-2, 2, size=(m, 1))
  w = random_array(rng, (n, k), F32)
  aq, a_s = _reference.quantize_blockwise(x, (1, 128), E4M3)
  bq, b_s = _reference.quantize_blockwise(w, (128, 128), E4M3)
  return aq, a_s, bq, b_s


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (37, 53, 300), (128, 256, 512), (130, 200, 129)])
@pytest.mark.parametrize("residual", [False, True])
def test_fp8_blockwise_matmul(cpu_ffi, rng, m, n, k, residual):
  aq, a_s, bq, b_s = _fp8_operands(rng, m, n, k)
  c = random_array(rng, (m, n), BF16) if residual else None
  d = jax.jit(lambda *o: jax_sm100.fp8_blockwise_matmul(*o, c=c, beta=-1.5))(aq, a_s, bq, b_s)
  assert cpu_ffi[-1][0] == ("jax_sm100_fp8_gemm_residual" if residual else "jax_sm100_fp8_gemm")
  da, db = np_dequantize(aq, a_s, (1, 128)), np_dequantize(bq, b_s, (128, 128))
  ref = da @ db.T + (-1.5 * f64(c) if residual else 0.0)
  assert calc_diff(f64(d), ref) < 1e-3
  assert_matmul_close(d, ref, np.abs(da) @ np.abs(db).T, k, BF16,
                      extra=2.0**-23 * np.abs(ref), what="fp8")


def test_fp8_vmap_folds_a_side_into_m(cpu_ffi, rng):
  aq, a_s, bq, b_s = _fp8_operands(rng, 3 * 20, 48, 256)
  aq, a_s = aq.reshape(3, 20, 256), a_s.reshape(3, 20, 2)
  f = jax.vmap(jax_sm100.fp8_blockwise_matmul, in_axes=(0, 0, None, None))
  text = hlo(f, aq, a_s, bq, b_s)
  assert text.count("custom_call @") == 1 and "(tensor<60x256xf8E4M3FN>" in text  # M = 3 * 20
  d = jax.jit(f)(aq, a_s, bq, b_s)
  for i in range(3):
    ref = np_dequantize(aq[i], a_s[i], (1, 128)) @ np_dequantize(bq, b_s, (128, 128)).T
    assert calc_diff(f64(d[i]), ref) < 1e-3


def test_fp8_dot_and_grads(cpu_ffi, monkeypatch, rng):
  x, w = random_array(rng, (2, 33, 300), BF16), random_array(rng, (300, 72), BF16)
  f = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(F32) ** 2)
  vg = jax.value_and_grad(f, argnums=(0, 1))
  (val, (gx, gw)) = jax.jit(vg)(x, w)
  targets = {t for t, _, _ in cpu_ffi}
  assert {"jax_sm100_fp8_gemm", "jax_sm100_quantize_fp8_dual"} <= targets, targets
  rval, (rgx, rgw) = on_reference(monkeypatch, vg, x, w)
  # The quantizations are bit-identical; the GEMMs differ in accumulation order only.
  assert abs(float(val) - float(rval)) <= 1e-4 * abs(float(rval))
  assert calc_diff(f64(gx), f64(rgx)) < 1e-5 and calc_diff(f64(gw), f64(rgw)) < 1e-5
  ref = f64(x).reshape(-1, 300) @ f64(w)
  got = jax.jit(jax_sm100.fp8_dot)(x, w)
  assert calc_diff(f64(got).reshape(-1, 72), ref) < 1e-3


# --------------------------------------------------------------------------
# The handlers' contract, called directly
# --------------------------------------------------------------------------

GEMM_ATTRS = dict(trans_a=False, trans_b=False, block_m=np.int32(128), block_n=np.int32(128),
                  cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1))
FP8_ATTRS = dict(block_m=np.int32(128), block_n=np.int32(128), cluster=np.int32(1),
                 pair_along_n=False, group_m=np.int32(8))


def _gemm(a, b, c=None, out=BF16, **attrs):
  target = "jax_sm100_gemm" if c is None else "jax_sm100_gemm_residual"
  shape = a.shape[:-1] + b.shape[-1:]
  ops = (a, b) if c is None else (a, b, c)
  return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(shape, out))(*ops, **{**GEMM_ATTRS, **attrs})


def _fp8(m, n, k, c=None, **attrs):
  kb = -(-k // 128)
  ops = [jnp.ones((m, k), E4M3), jnp.ones((kb, -(-m // 4) * 4), F32), jnp.ones((n, k), E4M3),
         jnp.ones((-(-n // 128), kb), F32)]
  target = "jax_sm100_fp8_gemm" if c is None else "jax_sm100_fp8_gemm_residual"
  if c is not None:
    ops.append(c)
  return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((m, n), BF16))(*ops, **{**FP8_ATTRS, **attrs})


@needs_cpu_handlers
@pytest.mark.parametrize("attrs,match", [
    (dict(block_m=np.int32(96)), r"no kernel for \(block_m, block_n, cluster_m\) = \(96, 128, 1\)"),
    (dict(cluster_m=np.int32(4)), "the valid combinations are"),
    (dict(group_m=np.int32(0)), r"group_m must be in \[1, 64\]"),
    (dict(group_m=np.int32(65)), r"group_m must be in \[1, 64\]"),
    (dict(split_k=np.int32(9)), r"split_k must be in \[1, 8\] \(got 9\)"),
    (dict(split_k=np.int32(0)), r"split_k must be in \[1, 8\]"),
    (dict(split_k=np.int32(2)), r"split_k > 1 needs one of the split-K tilings \(64, 64, 1\), "
                                r"\(64, 128, 1\); got \(128, 128, 1\)")])
def test_gemm_rejects_bad_tuning_attributes(attrs, match):
  a, b = jnp.ones((8, 16), BF16), jnp.ones((16, 8), BF16)
  with pytest.raises(Exception, match=match):
    jax.block_until_ready(_gemm(a, b, **attrs))
  with pytest.raises(Exception, match=match):
    jax.block_until_ready(_gemm(a, b, jnp.ones((8, 8), BF16), alpha=np.float32(1),
                                beta=np.float32(1), **attrs))


@needs_cpu_handlers
def test_gemm_split_k_attribute_is_accepted_and_changes_nothing_on_cpu():
  # A split-K configuration is valid on every platform (the CPU handler computes the same
  # product); the bias target takes the attribute too.
  rng = np.random.default_rng(7)
  a = jnp.asarray(rng.standard_normal((24, 200)), BF16)
  b = jnp.asarray(rng.standard_normal((200, 40)), BF16)
  split = dict(block_m=np.int32(64), block_n=np.int32(64), split_k=np.int32(8))
  np.testing.assert_array_equal(np.asarray(_gemm(a, b, **split)), np.asarray(_gemm(a, b)))
  bias = jnp.asarray(rng.standard_normal((40,)), F32)
  call = jax.ffi.ffi_call("jax_sm100_gemm_bias", (jax.ShapeDtypeStruct((24, 40), BF16),
                                                  jax.ShapeDtypeStruct((0,), BF16)))
  attrs = {**GEMM_ATTRS, "activation": np.int32(1)}
  d0, _ = call(a, b, bias, **attrs)
  d1, _ = call(a, b, bias, **{**attrs, **split})
  np.testing.assert_array_equal(np.asarray(d0), np.asarray(d1))


@needs_cpu_handlers
def test_fp8_rejects_bad_tuning_attributes():
  with pytest.raises(Exception, match=r"no kernel for \(block_m, block_n, cluster, pair_along_n\)"):
    jax.block_until_ready(_fp8(8, 8, 16, block_n=np.int32(192)))
  with pytest.raises(Exception, match="group_m must be"):
    jax.block_until_ready(_fp8(8, 8, 16, group_m=np.int32(100)))
  c = jnp.ones((8, 8), BF16)
  big = dict(block_m=np.int32(256), block_n=np.int32(128), cluster=np.int32(2), pair_along_n=True)
  with pytest.raises(Exception, match=r"with a residual term \(beta != 0\)"):
    jax.block_until_ready(_fp8(8, 8, 16, c, beta=np.float32(1), **big))
  # beta == 0 runs the plain product: every form is valid, c unread.
  d = _fp8(8, 8, 16, c.at[0, 0].set(jnp.nan), beta=np.float32(0), **big)
  np.testing.assert_array_equal(f64(d), 16.0)
  d = _fp8(8, 8, 16, c, beta=np.float32(0.5), block_m=np.int32(128))
  np.testing.assert_array_equal(f64(d), 16.5)
  with pytest.raises(Exception, match="K must be a multiple of 16"):
    jax.block_until_ready(_fp8(8, 8, 24))


def _fp8_bias(m, n, k, bias, activation):
  kb = -(-k // 128)
  ops = [jnp.ones((m, k), E4M3), jnp.ones((kb, -(-m // 4) * 4), F32), jnp.ones((n, k), E4M3),
         jnp.ones((-(-n // 128), kb), F32), bias]
  return jax.ffi.ffi_call("jax_sm100_fp8_gemm_bias", jax.ShapeDtypeStruct((m, n), BF16))(
      *ops, **FP8_ATTRS, activation=np.int32(activation))


@needs_cpu_handlers
def test_fp8_bias_handler_contract():
  """d = bf16(act(acc + bias)): all-ones operands give acc = K exactly."""
  bias = jnp.asarray(np.arange(-36.0, 12.0, 6.0), F32)   # 32 + bias exact in bf16
  np.testing.assert_array_equal(f64(_fp8_bias(4, 8, 32, bias, 1)),
                                np.maximum(32 + f64(bias), 0)[None, :].repeat(4, 0))
  np.testing.assert_array_equal(f64(_fp8_bias(4, 8, 32, jnp.zeros((0,), F32), 0)), 32.0)
  with pytest.raises(Exception, match=r"activation must be one of 0 none, 1 relu"):
    jax.block_until_ready(_fp8_bias(4, 8, 32, bias, 5))
  with pytest.raises(Exception, match=r"bias must be float32 of shape \(N,\) = \(8,\)"):
    jax.block_until_ready(_fp8_bias(4, 8, 32, jnp.ones((7,), F32), 0))
  with pytest.raises(Exception, match="bias must be float32"):
    jax.block_until_ready(_fp8_bias(4, 8, 32, jnp.ones((8,), BF16), 0))
  with pytest.raises(Exception, match="K must be positive"):
    jax.block_until_ready(_fp8_bias(4, 8, 0, bias, 0))
  with pytest.raises(Exception, match="K must be a multiple of 16"):
    jax.block_until_ready(_fp8_bias(4, 8, 24, bias, 0))


@needs_cpu_handlers
def test_handler_shape_contract_and_empty_contraction():
  with pytest.raises(Exception, match="multiple of 16 bytes"):
    jax.block_until_ready(_gemm(jnp.ones((8, 12), BF16), jnp.ones((12, 8), BF16)))
  with pytest.raises(Exception, match="batch count"):
    jax.block_until_ready(_gemm(jnp.ones((2, 8, 16), BF16), jnp.ones((3, 16, 8), BF16)))
  # K == 0: zeros, or beta * c with a residual term (alpha unused).
  a, b = jnp.ones((8, 0), F16), jnp.ones((0, 8), F16)
  np.testing.assert_array_equal(f64(_gemm(a, b, out=F32)), 0.0)
  c = jnp.full((8, 8), 3.0, F32)
  np.testing.assert_array_equal(
      f64(_gemm(a, b, c, out=F32, alpha=np.float32(5), beta=np.float32(-2))), -6.0)
  with pytest.raises(Exception, match="block_rows must be 1"):
    jax.block_until_ready(jax.ffi.ffi_call("jax_sm100_quantize_fp8", (
        jax.ShapeDtypeStruct((4, 4), E4M3), jax.ShapeDtypeStruct((1, 1), F32)))(
            jnp.ones((4, 4), F32), block_rows=np.int32(64), scale_transposed=np.int32(0)))
