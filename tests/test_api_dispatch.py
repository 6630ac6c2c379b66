"""The kernel dispatch, checked without a GPU.

`fake_sm90` makes the ops believe they run on an sm_90a GPU with the FFI targets
registered; lowering (not running) then shows exactly which custom calls, with
which transpose attributes, operand shapes and padding, the ops emit.
`emulated_kernels` runs that same kernel path with a pure-JAX stand-in for the
kernels that asserts the FFI contract, so padding/slicing/batching are checked
numerically too.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry
from conftest import assert_matmul_close, f64, random_array

BF16 = jnp.bfloat16
CALL_RE = re.compile(
    r"stablehlo\.custom_call @(\w+)\((.*?)\)\s*\{(.*?)\}\s*:\s*\((.*?)\)\s*->\s*(tensor<[^>]*>)")


def custom_calls(f, *args):
  """[(target, attrs, operand types, result type)] of jit(f) lowered for args."""
  text = jax.jit(f).lower(*args).as_text()
  out = []
  for target, _, attrs, operands, result in CALL_RE.findall(text):
    cfg = re.search(r"mhlo\.backend_config = \{(.*?)\}", attrs)
    kv = dict(re.findall(r"(\w+) = ([^,]+)", cfg.group(1))) if cfg else {}
    out.append((target, kv, [o.strip() for o in operands.split(", tensor")], result))
  return out, text


def flags(calls):
  return sorted((kv["trans_a"], kv["trans_b"]) for _, kv, _, _ in calls)


def sq_loss(f):
  """A loss whose gradient needs the forward value (so no call is DCE'd)."""
  return lambda *a: jnp.sum(f(*a).astype(jnp.float32) ** 2)


# --------------------------------------------------------------------------
# Lowering: which custom calls, transpose flags, padding
# --------------------------------------------------------------------------

def test_forward_pads_misaligned_and_slices(fake_sm90):
  a, b = jnp.ones((3, 5), BF16), jnp.ones((5, 7), BF16)
  calls, text = custom_calls(jax_sm100.matmul, a, b)
  assert len(calls) == 1
  target, kv, operands, result = calls[0]
  assert target == "jax_sm100_gemm"
  assert kv["trans_a"] == "false" and kv["trans_b"] == "false"
  # the tile configuration travels as attributes (the default for a 3x8 output)
  assert (kv["block_m"], kv["block_n"], kv["cluster_m"], kv["group_m"]) == (
      "64 : i32", "64 : i32", "1 : i32", "8 : i32")
  # K=5 -> 8 (a's rows, b's cols are 16 bytes), N=7 -> 8; M is not a last dim.
  assert operands[0].endswith("3x8xbf16>") and operands[1].endswith("8x8xbf16>")
  assert result == "tensor<3x8xbf16>"
  assert "stablehlo.pad" in text
  assert re.search(r"stablehlo\.slice .*\[0:3, 0:7\]", text)


def test_aligned_shapes_are_not_padded(fake_sm90):
  a, b = jnp.ones((64, 32), BF16), jnp.ones((32, 16), BF16)
  calls, text = custom_calls(sq_loss(jax_sm100.matmul), a, b)
  calls, text = custom_calls(jax.grad(sq_loss(jax_sm100.matmul), (0, 1)), a, b)
  assert len(calls) == 3
  assert "stablehlo.pad" not in text and "stablehlo.slice" not in text
  assert "stablehlo.transpose" not in text   # transposes are kernel flags


def test_grad_uses_transpose_flags(fake_sm90):
  a, b = jnp.ones((3, 5), BF16), jnp.ones((5, 7), BF16)
  calls, text = custom_calls(jax.grad(sq_loss(jax_sm100.matmul), (0, 1)), a, b)
  assert [c[0] for c in calls] == ["jax_sm100_gemm"] * 3
  # forward a@b; dA = g @ b^T (b read as (N, K)); dB = a^T @ g (a read as (K, M))
  assert flags(calls) == [("false", "false"), ("false", "true"), ("true", "false")]
  by_flags = {(kv["trans_a"], kv["trans_b"]): (ops, res) for _, kv, ops, res in calls}
  ops, res = by_flags[("true", "false")]
  # dB: a (M=3, K=5) is the transposed left operand: its last dim 5 (dB's M)
  # is padded to 8; the contraction (3) is not a last dim of a, but it is
  # g's leading dim, so it stays 3; dB (5, 7) -> padded result (8, 8).
  assert ops[0].endswith("3x8xbf16>") and ops[1].endswith("3x8xbf16>")
  assert res == "tensor<8x8xbf16>"
  assert "stablehlo.transpose" not in text


def test_batched_a_with_2d_b_is_one_folded_gemm(fake_sm90):
  a, b = jnp.ones((2, 3, 16, 32), BF16), jnp.ones((32, 8), BF16)
  calls, _ = custom_calls(jax.grad(sq_loss(jax_sm100.matmul), (0, 1)), a, b)
  assert len(calls) == 3
  for _, kv, ops, res in calls:   # batch folded into M = 2*3*16 = 96 everywhere
    assert "96x" in ops[0] or "96x" in ops[1]
  by_flags = {(kv["trans_a"], kv["trans_b"]): res for _, kv, _, res in calls}
  assert by_flags[("true", "false")] == "tensor<32x8xbf16>"   # dB: one (K, N)


def test_batched_operands_and_broadcast(fake_sm90):
  a, b = jnp.ones((4, 16, 32), BF16), jnp.ones((1, 32, 8), BF16)
  calls, _ = custom_calls(jax.grad(sq_loss(jax_sm100.matmul), (0, 1)), a, b)
  assert len(calls) == 3
  fwd = [c for c in calls if flags([c]) == [("false", "false")]][0]
  assert fwd[2][1].endswith("1x32x8xbf16>")        # b not broadcast in memory
  db = [c for c in calls if flags([c]) == [("true", "false")]][0]
  assert db[3] == "tensor<4x32x8xf32>"             # summed over the batch after


def test_vmap_is_one_launch(fake_sm90):
  a, b = jnp.ones((5, 16, 32), BF16), jnp.ones((5, 32, 8), BF16)
  calls, _ = custom_calls(jax.vmap(jax_sm100.matmul), a, b)
  assert len(calls) == 1 and calls[0][3] == "tensor<5x16x8xbf16>"
  calls, _ = custom_calls(jax.vmap(jax.grad(sq_loss(jax_sm100.matmul), (0, 1))), a, b)
  assert len(calls) == 3 and all(c[3].startswith("tensor<5x") for c in calls)
  # grad of vmap (b shared): still three launches
  loss = lambda a, b: jnp.sum(jax.vmap(jax_sm100.matmul, (0, None))(a, b[0])
                              .astype(jnp.float32) ** 2)
  calls, _ = custom_calls(jax.grad(loss, (0, 1)), a, b)
  assert len(calls) == 3 and flags(calls) == [("false", "false"), ("false", "true"),
                                              ("true", "false")]
  # nested vmap with an unbatched operand: still one launch, b not broadcast
  calls, _ = custom_calls(jax.vmap(jax.vmap(jax_sm100.matmul, (0, None)), (0, None)),
                          jnp.ones((3, 5, 16, 32), BF16), jnp.ones((32, 8), BF16))
  assert len(calls) == 1 and calls[0][2][1].endswith("1x1x32x8xbf16>")


def test_unsupported_dtypes_take_the_reference(fake_sm90):
  f32 = jnp.ones((8, 8), jnp.float32)
  assert custom_calls(jax.grad(sq_loss(jax_sm100.matmul)), f32, f32)[0] == []
  # bf16 inputs with an f32 output: the forward is a kernel; the backward's
  # cotangent is f32, so its products take the reference (no silent downcast).
  b = jnp.ones((8, 8), BF16)
  f = lambda a, b: jax_sm100.matmul(a, b, out_dtype=jnp.float32)
  calls, _ = custom_calls(jax.grad(sq_loss(f), (0, 1)), b, b)
  assert len(calls) == 1 and calls[0][3] == "tensor<8x8xf32>"


def test_residual_lowering_attributes(fake_sm90):
  a, b, c = jnp.ones((4, 16, 32), BF16), jnp.ones((32, 24), BF16), jnp.ones((16, 24), BF16)
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=-2)
  calls, _ = custom_calls(f, a, b, c)
  assert len(calls) == 1
  target, kv, ops, res = calls[0]
  assert target == "jax_sm100_gemm_residual"
  assert kv["alpha"] == "5.000000e-01 : f32" and kv["beta"] == "-2.000000e+00 : f32"
  assert kv["trans_a"] == "false" and kv["trans_b"] == "false"
  assert ops[2].endswith("16x24xbf16>") and res == "tensor<4x16x24xbf16>"
  calls, _ = custom_calls(jax.grad(sq_loss(f), (0, 1, 2)), a, b, c)
  assert sorted(c[0] for c in calls) == ["jax_sm100_gemm", "jax_sm100_gemm",
                                         "jax_sm100_gemm_residual"]


def test_fp8_lowering(fake_sm90):
  x, w = jnp.ones((40, 200), BF16), jnp.ones((200, 72), BF16)
  calls, _ = custom_calls(jax_sm100.fp8_dot, x, w)
  assert [c[0] for c in calls] == ["jax_sm100_fp8_gemm"]
  ops = calls[0][2]
  # a (M, K) e4m3 with K padded 200 -> 208, a_scale transposed (2, round_up(M, 4)),
  # b (N, K), b_scale (1, 2)
  assert ops[0].endswith("40x208xf8E4M3FN>") and ops[1].endswith("2x40xf32>")
  assert ops[2].endswith("72x208xf8E4M3FN>") and ops[3].endswith("1x2xf32>")
  calls, _ = custom_calls(jax.grad(sq_loss(jax_sm100.fp8_dot), (0, 1)), x, w)
  assert [c[0] for c in calls] == ["jax_sm100_fp8_gemm"] * 3
  # the kernel only writes bf16: an f32 output takes the reference
  x32 = jnp.ones((40, 200), jnp.float32)
  assert custom_calls(jax_sm100.fp8_dot, x32, x32.T)[0] == []
  # Inputs from the reference quantizer: under fake_sm90 the public one would
  # launch the (absent) quantize kernel eagerly.
  from jax_sm100._reference import quantize_blockwise
  q, s = quantize_blockwise(x, (1, 128), jnp.float8_e4m3fn)
  qb, sb = quantize_blockwise(w.T, (128, 128), jnp.float8_e4m3fn)
  f = lambda *o: jax_sm100.fp8_blockwise_matmul(*o, c=jnp.ones((40, 72), BF16), beta=0.5)
  calls, _ = custom_calls(f, q, s, qb, sb)
  assert [c[0] for c in calls] == ["jax_sm100_fp8_gemm_residual"]
  assert calls[0][1]["beta"] == "5.000000e-01 : f32"


def test_fp8_vmap_folds_into_m(fake_sm90):
  x, w = jnp.ones((3, 40, 256), BF16), jnp.ones((256, 64), BF16)
  calls, _ = custom_calls(jax.vmap(jax_sm100.fp8_dot, (0, None)), x, w)
  assert len(calls) == 1 and calls[0][3] == "tensor<120x64xbf16>"


def test_reference_when_forced_or_unregistered(fake_sm90, monkeypatch):
  a = jnp.ones((16, 16), BF16)
  assert len(custom_calls(jax_sm100.matmul, a, a)[0]) == 1
  monkeypatch.setenv(_backend.FORCE_REFERENCE_ENV, "1")
  jax.clear_caches()
  assert jax_sm100.backend() == "reference"
  assert custom_calls(jax_sm100.matmul, a, a)[0] == []
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV)
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset({"jax_sm100_gemm_residual"}))
  jax.clear_caches()
  assert custom_calls(jax_sm100.matmul, a, a)[0] == []
  # sm100: only targets with an sm100 kernel may be called
  monkeypatch.setattr(_backend, "_device_backend", lambda: "sm100")
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset())
  jax.clear_caches()
  assert custom_calls(jax_sm100.matmul, a, a)[0] == []
  # ... and with a GEMM kernel (its first-use self-test stubbed to pass), only that one.
  from jax_sm100 import _selftest_guard
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset({"jax_sm100_gemm"}))
  monkeypatch.setattr(_selftest_guard, "refusal", lambda ctx, target: None)
  jax.clear_caches()
  assert [c[0] for c in custom_calls(jax_sm100.matmul, a, a)[0]] == ["jax_sm100_gemm"]
  w = jnp.ones((256, 64), BF16)
  assert custom_calls(jax_sm100.fp8_dot, jnp.ones((16, 256), BF16), w)[0] == []


def test_dot_general_routes_to_the_kernel(fake_sm90):
  x, w = jnp.ones((8, 16, 32), BF16), jnp.ones((32, 24), BF16)
  dn = (((2,), (0,)), ((), ()))
  calls, _ = custom_calls(lambda x, w: jax_sm100.dot_general(x, w, dn), x, w)
  assert len(calls) == 1 and calls[0][3] == "tensor<128x24xbf16>"
  # not our pattern (contracts lhs dim 1): plain dot_general, no custom call
  dn2 = (((1,), (1,)), ((0,), (0,)))
  y = jnp.ones((8, 16, 32), BF16)
  assert custom_calls(lambda x, y: jax_sm100.dot_general(x, y, dn2), x, y)[0] == []
  calls, _ = custom_calls(lambda x, w: jax_sm100.fp8_dot_general(x, w, dn), x, w)
  assert [c[0] for c in calls] == ["jax_sm100_fp8_gemm"]


# --------------------------------------------------------------------------
# Emulated kernels: the kernel path's padding/batching runs and is checked
# --------------------------------------------------------------------------

EMU_SHAPES = [
    ((1, 1), (1, 1)),
    ((3, 5), (5, 7)),
    ((257, 65), (65, 129)),
    ((2, 3, 33, 17), (17, 9)),
    ((4, 19, 24), (4, 24, 40)),
    ((5, 1, 6, 7), (3, 7, 10)),
    ((12, 40), (3, 40, 8)),
]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("sa,sb", EMU_SHAPES)
def test_emulated_kernel_path_forward_and_grad(rng, emulated_kernels, dtype, sa, sb):
  a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
  out, vjp = jax.vjp(jax_sm100.matmul, a, b)
  g = random_array(rng, out.shape, dtype)
  da, db = vjp(g)
  assert {c[0] for c in emulated_kernels} == {"jax_sm100_gemm"}
  assert len(emulated_kernels) == 3
  a64, b64, g64 = f64(a), f64(b), f64(g)
  assert_matmul_close(out, a64 @ b64, np.abs(a64) @ np.abs(b64), sa[-1], dtype)
  # reference gradients by the reference path (already checked against f64)
  jax.clear_caches()
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv(_backend.FORCE_REFERENCE_ENV, "1")
    _, vjp_ref = jax.vjp(jax_sm100.matmul, a, b)
    da_ref, db_ref = vjp_ref(g)
  for got, want in ((da, da_ref), (db, db_ref)):
    np.testing.assert_allclose(f64(got), f64(want), rtol=2 ** -7,
                               atol=2 ** -7 * np.abs(f64(want)).max())


def test_emulated_vmap_and_residual(rng, emulated_kernels):
  a = random_array(rng, (3, 4, 10, 24), BF16)
  b = random_array(rng, (4, 24, 12), BF16)
  c = random_array(rng, (10, 12), BF16)
  f = lambda a, b: jax_sm100.matmul_residual(a, b, c, alpha=2.0, beta=-1.0)
  got = jax.jit(jax.vmap(jax.vmap(f, (0, 0)), (0, None)))(a, b)
  # (calls are recorded per trace: the launch that runs is the last, batched one)
  assert emulated_kernels[-1][1][0][:2] == (3, 4)
  a64, b64 = f64(a), f64(b)
  ref = 2 * (a64 @ b64) - f64(c)
  assert_matmul_close(got, ref, 2 * np.abs(a64) @ np.abs(b64) + np.abs(f64(c)), 24, BF16)
  # beta == 0: NaN in c must not reach the result on the kernel path either
  nan_c = jnp.full((10, 12), jnp.nan, BF16)
  got = jax_sm100.matmul_residual(a[0], b, nan_c, beta=0.0)
  assert np.isfinite(f64(got)).all()


def test_emulated_fp8_path_matches_reference(rng, emulated_kernels):
  x = random_array(rng, (3, 37, 200), BF16)
  w = random_array(rng, (200, 50), BF16, scale=0.1)
  ws = random_array(rng, (3, 200, 50), BF16, scale=0.1)
  loss = lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32) ** 2)
  y = jax.vmap(jax_sm100.fp8_dot, (0, None))(x, w)
  yw = jax.vmap(jax_sm100.fp8_dot)(x, ws)
  gx, gw = jax.grad(loss, (0, 1))(x, w)
  assert {c[0] for c in emulated_kernels} == {"jax_sm100_fp8_gemm", "jax_sm100_quantize_fp8",
                                              "jax_sm100_quantize_fp8_dual"}
  jax.clear_caches()
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv(_backend.FORCE_REFERENCE_ENV, "1")
    y_ref = jax_sm100.fp8_dot(x, w)
    yw_ref = jnp.stack([jax_sm100.fp8_dot(x[i], ws[i]) for i in range(3)])
    gx_ref, gw_ref = jax.grad(loss, (0, 1))(x, w)
  for got, want in ((y, y_ref), (yw, yw_ref), (gx, gx_ref), (gw, gw_ref)):
    np.testing.assert_allclose(f64(got), f64(want), rtol=2 ** -7,
                               atol=2 ** -7 * np.abs(f64(want)).max())
