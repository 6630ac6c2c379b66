"""jax_sm100.tuning on CPU: configs validate, overrides reach the lowered HLO, explain()
tells the path, sm100 takes its own tilings. The default choices' rules:
test_api_tuning_rules.py.
"""
import re
import threading
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _dispatch_table as dt
from jax_sm100 import tuning
from jax_sm100.tuning import Fp8Config, GemmConfig
from conftest import FP8_TILINGS, GEMM_TILINGS
from test_api_tuning_rules import B200, SM100_TILINGS, gpu


@pytest.fixture(autouse=True)
def _rules_not_measurements(monkeypatch):
  """These tests check the heuristic rules, the overrides and the attributes they give:
  no GPU kind's measured table (on an H100 or H200 the shipped one sends some of these
  products to XLA's dot, and a partial override then has nothing to edit). Tests that
  need a kind patch it again."""
  monkeypatch.setattr(dt, "gpu_kind", lambda device: "cpu")


BF16 = jnp.bfloat16


# ---------------------------------------------------------------------------
# Config validation
# ---------------------------------------------------------------------------

def test_config_tables_match_the_ffi_contract():
  assert set(tuning.GEMM_TILINGS) == GEMM_TILINGS
  assert set(tuning.FP8_TILINGS) == FP8_TILINGS
  for t in GEMM_TILINGS:
    assert GemmConfig(*t).attributes() == dict(
        block_m=np.int32(t[0]), block_n=np.int32(t[1]), cluster_m=np.int32(t[2]),
        group_m=np.int32(8), split_k=np.int32(1))
  for t in FP8_TILINGS:
    attrs = Fp8Config(*t, group_m=3).attributes()
    assert isinstance(attrs["pair_along_n"], bool) and attrs["group_m"] == np.int32(3)
    assert Fp8Config(*t).supports_residual == (t[0] == 128)


@pytest.mark.parametrize("args,match", [
    ((128, 64), r"\(block_m, block_n, cluster_m\) = \(128, 64, 1\) is not compiled; valid: "
                r"\(128, 256, 1\)"),
    ((64, 128, 2), r"is not compiled"),
    ((128, 256, 1, 0), r"group_m must be in \[1, 64\]; got 0"),
    ((128, 256, 1, 65), r"group_m must be in \[1, 64\]"),
    ((128.0, 256), r"block_m must be an int"),
    ((True, 256), r"block_m must be an int"),
    ((64, 64, 1, 8, 9), r"split_k must be in \[1, 8\]; got 9"),
    ((64, 64, 1, 8, 0), r"split_k must be in \[1, 8\]"),
    ((128, 256, 1, 8, 2), r"split_k > 1 needs a split-K tiling \(\(64, 64, 1\), \(64, 128, 1\)\)"),
])
def test_gemm_config_rejects_what_is_not_compiled(args, match):
  with pytest.raises(ValueError, match=match):
    GemmConfig(*args)


@pytest.mark.parametrize("kw,match", [
    (dict(block_m=128, block_n=192), r"\(128, 192, 1, False\) is not compiled; valid: "
                                     r"\(128, 64, 1, False\)"),
    (dict(block_m=128, block_n=128, cluster=4), r"is not compiled"),
    (dict(block_m=256, block_n=128, cluster=2), r"\(256, 128, 2, False\) is not compiled"),
    (dict(block_m=128, block_n=128, pair_along_n=1), r"pair_along_n must be a bool"),
    (dict(block_m=128, block_n=128, group_m=100), r"group_m must be in \[1, 64\]"),
])
def test_fp8_config_rejects_what_is_not_compiled(kw, match):
  with pytest.raises(ValueError, match=match):
    Fp8Config(**kw)


def test_configs_are_frozen_and_hashable():
  c = GemmConfig(128, 128, 2, 4)
  with pytest.raises(Exception):
    c.block_m = 64
  assert {c: 1}[GemmConfig(np.int64(128), 128, 2, 4)] == 1


# ---------------------------------------------------------------------------
# Overrides: visible in the lowered HLO
# ---------------------------------------------------------------------------

CALL_RE = re.compile(r"stablehlo\.custom_call @(\w+)\(.*?mhlo\.backend_config = \{(.*?)\}")


def configs(f, *args):
  """[(target, {attr: value})] of jit(f) lowered for args (a fresh trace)."""
  text = jax.jit(lambda *a: f(*a)).lower(*args).as_text()
  return [(t, {k: v.split(" : ")[0] for k, v in re.findall(r"(\w+) = ([^,]+)", kv)})
          for t, kv in CALL_RE.findall(text)]


def gemm_tiling(attrs):
  return tuple(int(attrs[k]) for k in ("block_m", "block_n", "cluster_m", "group_m"))


def fp8_tiling(attrs):
  return (int(attrs["block_m"]), int(attrs["block_n"]), int(attrs["cluster"]),
          attrs["pair_along_n"] == "true", int(attrs["group_m"]))


def test_default_attributes_follow_the_padded_kernel_shape(fake_sm90):
  # N = 1001 is padded to 1008 for the kernel; the choice is made on (4096, 1008).
  a, b = jnp.ones((4096, 512), BF16), jnp.ones((512, 1001), BF16)
  (target, attrs), = configs(jax_sm100.matmul, a, b)
  want = tuning.gemm_config(4096, 1008, 512)
  assert target == "jax_sm100_gemm"
  assert gemm_tiling(attrs) == (want.block_m, want.block_n, want.cluster_m, want.group_m)
  # batched: the output's batch count enters the choice
  a3 = jnp.ones((6, 512, 512), BF16)
  (_, attrs), = configs(jax_sm100.matmul, a3, jnp.ones((6, 512, 512), BF16))
  want = tuning.gemm_config(512, 512, 512, batch=6)
  assert gemm_tiling(attrs) == (want.block_m, want.block_n, want.cluster_m, want.group_m)


def test_gemm_override_changes_the_attributes(fake_sm90):
  a, b = jnp.ones((256, 512), BF16), jnp.ones((512, 384), BF16)
  (_, default), = configs(jax_sm100.matmul, a, b)
  with tuning.override(gemm=GemmConfig(128, 128, 2, 16)):
    (_, forced), = configs(jax_sm100.matmul, a, b)
    (_, residual), = configs(lambda a, b: jax_sm100.matmul_residual(a, b, a @ b), a, b)
    with tuning.override(gemm={"group_m": 3}):  # nested: partial, on the default choice
      (_, partial), = configs(jax_sm100.matmul, a, b)
  assert gemm_tiling(forced) == gemm_tiling(residual) == (128, 128, 2, 16)
  assert gemm_tiling(partial) == gemm_tiling(default)[:3] + (3,)
  (_, after), = configs(jax_sm100.matmul, a, b)
  assert after == default


def test_fp8_override_changes_the_attributes(fake_sm90):
  x, w = jnp.ones((512, 256), BF16), jnp.ones((256, 640), BF16)
  gemm = lambda calls: [a for t, a in calls if t == "jax_sm100_fp8_gemm"]
  default, = gemm(configs(jax_sm100.fp8_dot, x, w))
  with tuning.override(fp8=Fp8Config(256, 128, 2, True, group_m=4)):
    calls = configs(jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w)), (0, 1)), x, w)
  gemms = [fp8_tiling(a) for t, a in calls if t == "jax_sm100_fp8_gemm"]
  assert gemms == [(256, 128, 2, True, 4)] * 2  # dx and dw
  with tuning.override(fp8={"cluster": 1, "block_n": 64}):
    partial, = gemm(configs(jax_sm100.fp8_dot, x, w))
  assert fp8_tiling(partial) == (fp8_tiling(default)[0], 64, 1, False, 8)


def test_fp8_residual_takes_128_row_tiles_only(fake_sm90):
  from jax_sm100._reference import quantize_blockwise
  a, sa = quantize_blockwise(jnp.ones((512, 256)), (1, 128), jnp.float8_e4m3fn)
  b, sb = quantize_blockwise(jnp.ones((640, 256)), (128, 128), jnp.float8_e4m3fn)
  c = jnp.ones((512, 640), BF16)
  f = lambda *o: jax_sm100.fp8_blockwise_matmul(*o, c=c, beta=0.5)
  (target, attrs), = configs(f, a, sa, b, sb)
  assert target == "jax_sm100_fp8_gemm_residual" and int(attrs["block_m"]) == 128
  with tuning.override(fp8=Fp8Config(128, 64, 1)):
    (_, attrs), = configs(f, a, sa, b, sb)
  assert fp8_tiling(attrs) == (128, 64, 1, False, 8)
  with tuning.override(fp8=Fp8Config(256, 128, 1)):
    with pytest.raises(ValueError, match="residual FP8 GEMM runs 128-row tiles only"):
      configs(f, a, sa, b, sb)
    # the plain product takes it
    (_, attrs), = configs(lambda *o: jax_sm100.fp8_blockwise_matmul(*o), a, sa, b, sb)
    assert fp8_tiling(attrs) == (256, 128, 1, False, 8)


@pytest.mark.parametrize("kw,match", [
    (dict(gemm={"block_k": 64}), r"unknown field 'block_k'; GemmConfig has block_m"),
    (dict(gemm={"block_n": 192}), r"block_n must be one of \[64, 128, 256\]; got 192"),
    (dict(gemm={"group_m": 0}), r"group_m must be in \[1, 64\]"),
    (dict(fp8={"cluster": 4}), r"cluster must be one of \[1, 2\]; got 4"),
    (dict(fp8={"pair_along_n": "yes"}), r"pair_along_n must be a bool"),
    (dict(fp8=GemmConfig(128, 128)), r"override\(fp8=...\) takes a Fp8Config"),
    (dict(gemm=(128, 128)), r"override\(gemm=...\) takes a GemmConfig"),
    (dict(fp8_fused_scales=0), r"fp8_fused_scales=...\) takes a bool"),
])
def test_invalid_overrides_raise(kw, match):
  with pytest.raises(ValueError, match=match):
    with tuning.override(**kw):
      pass


def test_partial_override_that_is_not_compiled_raises_at_trace_time(fake_sm90):
  a = jnp.ones((256, 256), BF16)
  with tuning.override(gemm={"block_m": 64, "cluster_m": 2}):  # each valid, not together
    with pytest.raises(ValueError, match=r"override\(gemm=.*is not compiled"):
      configs(jax_sm100.matmul, a, a)


def test_override_is_context_local():
  seen = {}
  with tuning.override(gemm=GemmConfig(64, 64), fp8_fused_scales=False):
    t = threading.Thread(target=lambda: seen.update(s=tuning.current()))
    t.start()
    t.join()
    assert tuning.current().gemm == GemmConfig(64, 64) and not tuning.fp8_fused_scales()
  assert seen["s"] == tuning.Settings() and tuning.fp8_fused_scales()
  assert tuning.current() == tuning.Settings()


@pytest.mark.parametrize("cfg", [GemmConfig(*t) for t in sorted(GEMM_TILINGS)])
def test_every_gemm_config_computes_the_same_product(rng, emulated_kernels, cfg):
  # The emulation checks each launch's attributes; the math must not depend on them.
  from conftest import random_array
  a, b = random_array(rng, (3, 40, 24), BF16), random_array(rng, (24, 17), BF16)
  want = jax_sm100.matmul(a, b)
  jax.clear_caches()
  with tuning.override(gemm=cfg):
    got = jax.jit(jax_sm100.matmul)(a, b)
  assert gemm_tiling({k: str(v) for k, v in emulated_kernels[-1][2].items()}) == (
      cfg.block_m, cfg.block_n, cfg.cluster_m, cfg.group_m)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


# ---------------------------------------------------------------------------
# explain()
# ---------------------------------------------------------------------------

def test_explain_on_the_kernel_path(fake_sm90):
  a, b = jnp.ones((4096, 512), BF16), jnp.ones((512, 1001), BF16)
  rep = tuning.explain(jax_sm100.matmul, a, b)
  (d,) = rep
  assert d.path == "kernel" and d.target == "jax_sm100_gemm"
  assert d.config == tuning.gemm_config(4096, 1008, 512)
  assert d.shapes == ((4096, 512), (512, 1008))
  assert "4096x1008x512" in d.why and "tiles" in d.why
  with tuning.override(gemm=GemmConfig(64, 128)):
    (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert d.config == GemmConfig(64, 128) and "override(gemm=" in d.why
  # f32 inputs take the reference, and say why
  f32 = jax.ShapeDtypeStruct((8, 8), jnp.float32)
  (d,) = tuning.explain(jax_sm100.matmul, f32, f32)
  assert d.path == "reference" and "float32" in d.why


def test_explain_reports_the_launches_of_the_final_program(fake_sm90):
  x = jax.ShapeDtypeStruct((3, 40, 256), BF16)
  w = jax.ShapeDtypeStruct((256, 64), BF16)
  rep = tuning.explain(jax.vmap(jax_sm100.fp8_dot, (0, None)), x, w)
  gemms = [d for d in rep if d.target == "jax_sm100_fp8_gemm"]
  assert len(gemms) == 1 and gemms[0].shapes[0] == (120, 256)  # folded into M, once
  assert gemms[0].config == tuning.fp8_config(120, 64, 256)
  assert {d.target for d in rep} == {"jax_sm100_fp8_gemm", "jax_sm100_quantize_fp8",
                                     "jax_sm100_quantize_fp8_dual"}
  assert "jax_sm100_fp8_gemm" in str(rep)


def test_explain_sees_launches_traced_before(fake_sm90):
  # jax (0.11 and later) reuses a function's trace by the function object and its input
  # types: explain() must not get the launch layer's cached functions, whose earlier trace
  # would skip the launch code that records each launch's reason.
  a, b = jax.ShapeDtypeStruct((512, 256), BF16), jax.ShapeDtypeStruct((256, 384), BF16)
  jax.jit(jax_sm100.matmul).lower(a, b)  # a trace of this product exists
  for _ in range(2):
    (d,) = tuning.explain(jax_sm100.matmul, a, b)
    assert "512x384x256" in d.why and "not through an op" not in d.why
  from jax_sm100 import _explain
  made = []

  @_explain.launch_builder
  def build(x):
    made.append(x)
    return object()
  assert build(1) is build(1) and len(made) == 1  # cached outside explain()
  token = _explain._RECORDER.set(_explain._Recorder())
  try:
    assert build(1) is not build(1) and len(made) == 3  # fresh while it records
  finally:
    _explain._RECORDER.reset(token)


def test_explain_on_the_reference_path(monkeypatch):
  monkeypatch.setenv("JAX_SM100_FORCE_REFERENCE", "1")
  rep = tuning.explain(jax_sm100.matmul, jnp.ones((4, 8), BF16), jnp.ones((8, 4), BF16))
  (d,) = rep
  assert d.path == "reference" and d.target == "jax_sm100_gemm" and d.config is None
  assert d.why == "backend() is 'reference': JAX_SM100_FORCE_REFERENCE is set"
  assert str(tuning.explain(lambda x: x + 1, jnp.ones(3))) == "(no jax_sm100 products)"


# ---------------------------------------------------------------------------
# sm100 (Blackwell): its own table, its own tiling set; FP8 and quantize take the
# reference. No B200 here: a stand-in device of compute capability 10.0 and a build
# that says it holds sm_100a GEMM kernels (lowering only).
# ---------------------------------------------------------------------------


def test_sm100_tables_and_tilings():
  assert set(tuning.SM100_GEMM_TILINGS) == SM100_TILINGS
  assert SM100_TILINGS <= GEMM_TILINGS        # one FFI attribute contract
  assert set(tuning.gemm_tilings(gpu(148, **B200))) == SM100_TILINGS
  assert set(tuning.gemm_tilings(gpu(132))) == GEMM_TILINGS
  assert set(tuning.gemm_tilings(jax.devices("cpu")[0])) == GEMM_TILINGS
  # the sm100 FP8 kernel has one form: every choice is it, with or without the residual
  b200 = gpu(148, **B200)
  assert tuning.SM100_FP8_TILINGS == ((128, 128, 1, False),)
  assert set(tuning.SM100_FP8_TILINGS) <= set(tuning.FP8_TILINGS)  # one FFI contract
  for m, n, residual in ((4096, 7168, False), (64, 2112, True), (1, 8, False)):
    assert tuning.fp8_config(m, n, 1024, residual=residual, device=b200) == tuning.Fp8Config(
        128, 128, 1, False, 8)
  assert tuning.fp8_config(4096, 7168, 16384, device=gpu(148)).block_m != 128  # sm90 table


@pytest.fixture
def fake_sm100(monkeypatch):
  """backend() == 'sm100' on a stand-in B200 whose build has sm_100a GEMM kernels only;
  every target 'registered' (lowering only). The self-test guard is stubbed: it records
  the families it is asked about and answers `verdict` (passed by default)."""
  from jax_sm100 import _backend, _ffi_registry, _selftest_guard
  for var in (_backend.FORCE_REFERENCE_ENV, _backend.BACKEND_ENV,
              _ffi_registry.DISABLE_TARGETS_ENV):
    monkeypatch.delenv(var, raising=False)
  dev = gpu(148, **B200)
  monkeypatch.setattr(_backend, "_default_device", lambda: dev)
  monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: True)
  monkeypatch.setattr(_ffi_registry, "cuda_archs", lambda: ("sm_90a", "sm_100a"))
  monkeypatch.setattr(_ffi_registry, "sm100_targets",
                      lambda: frozenset({"jax_sm100_gemm", "jax_sm100_gemm_residual"}))
  monkeypatch.setattr(_ffi_registry, "_registered", frozenset(_ffi_registry.target_names()))
  # A driver that can run the kernels, whatever this machine's driver is.
  monkeypatch.setattr(_backend, "cuda_driver_version", lambda: 13000, raising=False)
  monkeypatch.setattr(_backend, "cuda_runtime_version", lambda: 13000, raising=False)
  state = types.SimpleNamespace(asked=[], passed=True)

  def ensure(family, backend):
    state.asked.append((family, backend))
    return _selftest_guard.FamilyResult(family, backend, dev.device_kind, state.passed, (), 0,
                                        None if state.passed else f"{family} failed (stub)")
  monkeypatch.setattr(_selftest_guard, "ensure", ensure)
  monkeypatch.setattr(_selftest_guard, "_enabled", True)
  jax.clear_caches()
  assert jax_sm100.backend() == "sm100"
  yield state
  jax.clear_caches()


def test_sm100_gemm_launches_its_own_tilings(fake_sm100):
  a, b = jnp.ones((4096, 512), BF16), jnp.ones((512, 4096), BF16)
  (target, attrs), = configs(jax_sm100.matmul, a, b)
  assert target == "jax_sm100_gemm"
  assert gemm_tiling(attrs) == (128, 256, 2, 8) == astuple(tuning.gemm_config(
      4096, 4096, 512, device=gpu(148, **B200)))
  assert ("gemm", "sm100") in fake_sm100.asked        # the first-use guard was consulted
  c = jnp.ones((4096, 4096), BF16)
  (target, attrs), = configs(lambda a, b, c: jax_sm100.matmul_residual(a, b, c), a, b, c)
  assert target == "jax_sm100_gemm_residual" and ("gemm_residual", "sm100") in fake_sm100.asked
  with tuning.override(gemm=GemmConfig(128, 128, 1, 4)):
    (_, attrs), = configs(jax_sm100.matmul, a, b)
  assert gemm_tiling(attrs) == (128, 128, 1, 4)


@pytest.mark.parametrize("override", [GemmConfig(64, 128, 1), GemmConfig(128, 128, 2),
                                      {"block_m": 64, "block_n": 64},
                                      {"block_n": 128, "cluster_m": 2}])
def test_sm100_override_outside_its_set_raises_at_trace_time(fake_sm100, override):
  # one M tile and 80 of 128x256 along N: the kernel without a pair (fewer tiles go to
  # XLA's dot on sm100 without a table, where a partial override has no tiling to check)
  a, b = jnp.ones((128, 512), BF16), jnp.ones((512, 20480), BF16)
  with tuning.override(gemm=override):   # a valid GemmConfig: the check is at trace time
    with pytest.raises(ValueError, match=r"has no sm100 GEMM kernel; the sm100 GEMM has "
                                         r"\(128, 256, 1\), \(128, 128, 1\), \(128, 256, 2\)"):
      configs(jax_sm100.matmul, a, b)


def test_sm90_keeps_every_tiling(fake_sm90):
  a = jnp.ones((512, 512), BF16)
  for t in sorted(GEMM_TILINGS - SM100_TILINGS):
    with tuning.override(gemm=GemmConfig(*t)):
      (_, attrs), = configs(jax_sm100.matmul, a, a)
    assert gemm_tiling(attrs)[:3] == t


def test_sm100_fp8_and_quantize_take_the_reference_and_say_why(fake_sm100):
  x, w = jax.ShapeDtypeStruct((256, 512), BF16), jax.ShapeDtypeStruct((512, 384), BF16)
  for f in (jax_sm100.fp8_dot,
            jax.grad(lambda x, w: jnp.sum(jax_sm100.fp8_dot(x, w).astype(jnp.float32)), (0, 1)),
            lambda x, w: jax_sm100.quantize_fp8_blockwise(x)):
    rep = tuning.explain(f, x, w)
    assert rep and all(d.path == "reference" for d in rep), str(rep)
    for d in rep:
      assert f"{d.target} has no sm_100a kernel: on this Blackwell GPU it takes the " \
             "reference path" in d.why, d.why
      assert "jax_sm100_gemm, jax_sm100_gemm_residual" in d.why
  assert configs(jax_sm100.fp8_dot, jnp.ones((256, 512), BF16), jnp.ones((512, 384), BF16)) == []


def test_sm100_failed_self_test_shows_in_explain(fake_sm100):
  fake_sm100.passed = False
  a = jax.ShapeDtypeStruct((256, 512), BF16)
  (d,) = tuning.explain(jax_sm100.matmul, a, jax.ShapeDtypeStruct((512, 256), BF16))
  assert d.path == "reference" and d.why == "gemm failed (stub)"


def test_why_reference_on_blackwell_without_kernels(monkeypatch):
  from jax_sm100 import _backend, _ffi_registry
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.delenv(_backend.BACKEND_ENV, raising=False)
  monkeypatch.setattr(_ffi_registry, "has_cuda", lambda: True)
  monkeypatch.setattr(_ffi_registry, "_ffi", types.SimpleNamespace())
  monkeypatch.setattr(_ffi_registry, "sm100_targets", lambda: frozenset())
  for cc, archs, want in [
      ("10.0", ("sm_90a", "sm_100a"), "this build has sm_100a code but no sm_100a kernel"),
      ("10.0", ("sm_90a",), "no kernels for compute capability 10.0 in this build (compiled: "
                            "sm_90a)"),
      ("10.3", ("sm_90a", "sm_100a"), "sm_100a code runs on compute capability 10.0 only")]:
    monkeypatch.setattr(_ffi_registry, "cuda_archs", lambda archs=archs: archs)
    monkeypatch.setattr(_backend, "_default_device", lambda cc=cc: gpu(148, cc=cc))
    assert jax_sm100.backend() == "reference"
    assert want in _backend.why_reference(), (cc, archs, _backend.why_reference())


def astuple(cfg):
  return (cfg.block_m, cfg.block_n, cfg.cluster_m, cfg.group_m)


# ---------------------------------------------------------------------------
# Split-K
# ---------------------------------------------------------------------------

def test_split_k_tilings_match_the_ffi_contract():
  from conftest import SPLIT_K_TILINGS
  assert set(tuning.SPLIT_K_TILINGS) == SPLIT_K_TILINGS and tuning.MAX_SPLIT_K == 8
  assert GemmConfig(64, 128, 1, 8, 4).attributes()["split_k"] == np.int32(4)


@pytest.mark.parametrize("m,n,k", [(1, 1536, 7168), (16, 2048, 7168), (128, 4096, 4096),
                                   (64, 24576, 1536), (2048, 2048, 2048), (1, 4096, 64)])
@pytest.mark.parametrize("tile", [(64, 64), (64, 128)])
def test_split_k_for_fills_the_sms_within_its_bounds(m, n, k, tile):
  sms = 132
  per_sm = tuning.HEURISTICS["sm90"]["gemm"]["split_k"]["ctas_per_sm"]
  s = tuning.split_k_for(m, n, k, 1, *tile, sms)
  tiles = -(-m // tile[0]) * -(-n // tile[1])
  assert 1 <= s <= tuning.MAX_SPLIT_K
  assert s == 1 or s * tiles <= per_sm * sms     # the clusters fit ctas_per_sm CTAs per SM
  assert s == 1 or -(-k // 64) // s >= 4         # at least 4 K blocks per slice
  # the largest such split: one more would break a bound
  more = s + 1
  assert (more > tuning.MAX_SPLIT_K or more * tiles > per_sm * sms or -(-k // 64) // more < 4)


def test_split_candidates_name_and_resolve_per_shape():
  cands = tuning.gemm_candidates(gpu(132))
  assert (64, 64, 1, 0) in cands and (64, 128, 1, 0) in cands
  assert dt.tiling_name((64, 64, 1, 0)) == "64x64c1k" and dt.parse_tiling("64x64c1k") == (64, 64, 1, 0)
  assert dt.tiling_name((64, 128, 1, 4)) == "64x128c1k4"
  assert dt.parse_tiling("64x128c1k4") == (64, 128, 1, 4)
  assert dt.parse_tiling("128x256c2") == (128, 256, 2)
  cfg = tuning.candidate_config((64, 64, 1, 0), 16, 1536, 7168, device=gpu(132))
  assert cfg == GemmConfig(64, 64, 1, 8, tuning.split_k_for(16, 1536, 7168, 1, 64, 64, 132))
  assert cfg.split_k > 1
  # where splitting does not pay (many tiles), the candidate is the plain tiling
  assert tuning.candidate_config((64, 64, 1, 0), 4096, 4096, 4096, device=gpu(132)).split_k == 1


def test_split_k_override_and_sm100_refusal():
  with tuning.override(gemm={"block_m": 64, "block_n": 64, "cluster_m": 1, "split_k": 3}):
    cfg, why = tuning.resolve_gemm(tuning.current(), 16, 1536, 7168, 1, False)
  assert cfg.split_k == 3 and "override" in why
  with pytest.raises(ValueError, match=r"split_k must be in \[1, 8\]"):
    with tuning.override(gemm={"split_k": 12}):
      pass
  with pytest.raises(ValueError, match="has no sm100 kernel"):
    tuning._check_arch_tiling(GemmConfig(64, 64, 1, 8, 2), "sm100", "override(gemm=...)")
