"""The measured dispatch (jax_sm100._dispatch_table), checked on CPU.

The shipped table is valid for every GPU kind it names; boundary shapes fall in the
classes their buckets say; overrides are honoured; an autotune cache's exact hit wins over
the class table; an "xla" choice computes the kernel's numerics contract with no custom
call in the program, a "kernel" choice launches the custom call. The ops run on `cpu_ffi`
(the FFI targets' CPU handlers) with the device's GPU kind stood in by monkeypatching
(`gpu_kind`), so the tables of H100/H200 decide on a CPU. Nothing is timed here.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _dispatch_table as dt
from jax_sm100 import tuning
from jax_sm100.tuning import GemmConfig
from conftest import GEMM_TILINGS, SPLIT_K_TILINGS, assert_matmul_close, f64, random_array

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMS = 132


def gpu(kind="NVIDIA H200", sms=SMS, cc="9.0"):
  return types.SimpleNamespace(platform="gpu", device_kind=kind, core_count=sms,
                               compute_capability=cc,
                               client=types.SimpleNamespace(platform_version="cuda 13000"))


def hlo(f, *args):
  """The lowered program of a fresh trace (the dispatch is read at trace time)."""
  return jax.jit(lambda *a: f(*a)).lower(*args).as_text()


def run(f, *args):
  return jax.jit(lambda *a: f(*a))(*args)


def gemm_calls(text):
  return text.count("custom_call @jax_sm100_gemm(") + text.count(
      "custom_call @jax_sm100_gemm_residual(")


# The dispatch tests below run the ops against this fixed table (an earlier shipped one:
# H200 matmul entries converted from the legacy suite, the H100's from its suite runs), so
# that their shapes' classes and sentences stay put when the shipped table is re-measured;
# the shipped table's own tests use table().
FIXTURE_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                             "dispatch_table_fixture.json")


@pytest.fixture
def kind(cpu_ffi, monkeypatch, tmp_path):
  """cpu_ffi, the GPU kind stood in (default H200; set kind.value), HOME in tmp_path (so
  no autotune cache of this machine is read), and the table FIXTURE_TABLE in place of the
  shipped one. Yields a namespace with the launches."""
  state = types.SimpleNamespace(value="H200", calls=cpu_ffi, home=tmp_path)
  monkeypatch.setattr(dt, "gpu_kind", lambda device: state.value)
  monkeypatch.setattr(dt, "DATA_FILE", FIXTURE_TABLE)
  monkeypatch.setattr(dt, "_shipped", {})
  monkeypatch.setenv("HOME", str(tmp_path))
  jax.clear_caches()
  yield state
  jax.clear_caches()


def table():
  return dt.shipped_table()


def boundary_values(bounds):
  return sorted({1, *bounds, *(b + 1 for b in bounds)})


# ---------------------------------------------------------------------------
# The shipped table
# ---------------------------------------------------------------------------

def test_shipped_table_is_valid_for_h100_and_h200():
  t = table()
  assert dt.check_table(t) == []
  assert {"H100", "H200"} <= set(t["kinds"])
  for kind, kt in t["kinds"].items():
    assert kt["source"] and kt["measured_on"], kind
    for op, by_dtype in kt["entries"].items():
      assert op in dt.OPS
      for dtype, entries in by_dtype.items():
        for key, e in entries.items():
          assert e["path"] in ("kernel", "xla"), (kind, op, dtype, key)
          t = e["tiling"]
          assert t is None or tuple(t[:3]) in GEMM_TILINGS
          # a fourth entry: split-K (0: split_k_for the shape), on a split-K tiling only
          assert t is None or len(t) == 3 or (tuple(t[:3]) in SPLIT_K_TILINGS and 0 <= t[3] <= 8)
          # the key is one the classes produce
          assert key.count(",") == 3 and key.split(",")[0].find("M") >= 0


def test_a_broken_table_is_reported():
  bad = json.loads(json.dumps(table()))
  entries = bad["kinds"]["H200"]["entries"]["matmul"]["bfloat16"]
  key = next(iter(entries))
  entries[key] = dict(entries[key], path="fast", tiling=[128, 192, 1])
  bad["classes"]["M"] = [128, 16]
  problems = dt.check_table(bad)
  assert any("path 'fast'" in p for p in problems)
  assert any("[128, 192, 1] is not compiled" in p for p in problems)
  assert any("classes['M']" in p for p in problems)


@pytest.mark.parametrize("kind_name", ["H100", "H200"])
@pytest.mark.parametrize("op", dt.OPS)
@pytest.mark.parametrize("dtype", [BF16, F16])
def test_every_shape_class_maps_to_a_valid_path(kind_name, op, dtype):
  """Every class (boundary shapes of every bucket, batch 1 and more) gets kernel or xla,
  the one its entry says (kernel where it has none), with a tiling the device's kernel
  is compiled for."""
  t = table()
  cls = t["classes"]
  entries = t["kinds"][kind_name]["entries"].get(op, {}).get(np.dtype(dtype).name, {})
  dev = gpu({"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}[kind_name])
  assert dt.gpu_kind(dev) == kind_name
  seen = set()
  ms, ns, ks = (boundary_values(cls[d]) for d in "MNK")
  for m, n, k, batch in itertools.product(ms, ns, ks, [1, 3, 200]):
    c = dt.decide(tuning.Settings(), op, dtype, m, n, k, batch, device=dev)
    key = dt.shape_class(m, n, k, batch, SMS, cls)
    seen.add(key)
    want = entries.get(key, {"path": "kernel"})["path"]
    assert c.path == want, (m, n, k, batch, key, c)
    if c.config is not None:
      assert (c.config.block_m, c.config.block_n, c.config.cluster_m) in GEMM_TILINGS
      tiling = entries[key]["tiling"]
      if len(tiling) > 3:  # split-K: the split the shape gets
        assert c.config.split_k == tuning.split_k_for(m, n, k, batch, *tiling[:2], SMS)
    assert kind_name in c.why, c.why
  assert set(entries) <= seen          # every measured class is reached by the grid
  n_classes = math.prod(len(cls[d]) + 1 for d in ("M", "N", "K", "waves"))
  assert len(seen) >= n_classes // 2, len(seen)


@pytest.mark.parametrize("value,label", [
    (1, "M<=16"), (16, "M<=16"), (17, "16<M<=64"), (64, "16<M<=64"), (65, "64<M<=128"),
    (128, "64<M<=128"), (129, "128<M<=2048"),
    (2048, "128<M<=2048"), (2049, "M>2048")])
def test_m_buckets(value, label):
  assert dt.shape_class(value, 256, 256, 1, SMS, dt.DEFAULT_CLASSES).split(",")[0] == label


@pytest.mark.parametrize("n,k,label", [
    (2048, 3072, "N<=2048,K<=3072"), (2049, 3072, "2048<N<=8192,K<=3072"),
    (8192, 3073, "2048<N<=8192,K>3072"), (8193, 3072, "N>8192,K<=3072"),
    (2048, 3073, "N<=2048,K>3072"), (1, 1, "N<=2048,K<=3072")])
def test_n_and_k_buckets(n, k, label):
  assert ",".join(dt.shape_class(64, n, k, 1, SMS, dt.DEFAULT_CLASSES).split(",")[1:3]) == label


@pytest.mark.parametrize("m,n,batch,sms,label", [
    (128 * SMS, 256, 1, SMS, "waves<=1"),          # exactly one tile per SM
    (128 * SMS + 1, 256, 1, SMS, "1<waves<=2"),     # one more row: a second wave
    (128, 256, SMS, SMS, "waves<=1"),               # the batch counts tiles too
    (128, 256, SMS + 1, SMS, "1<waves<=2"),
    (128, 256 * 4 * SMS, 1, SMS, "2<waves<=4"),
    (128, 256 * 4 * SMS + 1, 1, SMS, "waves>4"),
    (128 * 114, 256, 1, 114, "waves<=1"),           # the device's SM count
    (128 * 114, 256, 1, 100, "1<waves<=2"),
])
def test_wave_buckets(m, n, batch, sms, label):
  assert dt.shape_class(m, n, 64, batch, sms, dt.DEFAULT_CLASSES).split(",")[3] == label


@pytest.mark.parametrize("device_kind,want", [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200"), ("NVIDIA H100 PCIe",
                                                                   "NVIDIA_H100_PCIe"),
    ("NVIDIA B200", "NVIDIA_B200")])
def test_gpu_kinds(device_kind, want):
  assert dt.gpu_kind(gpu(device_kind)) == want
  assert dt.gpu_kind(jax.devices("cpu")[0]) == "cpu"


def test_unknown_kinds_take_the_heuristic():
  for dev in (gpu("NVIDIA B200", 148, "10.0"), gpu("NVIDIA H100 PCIe", 114)):
    c = dt.decide(tuning.Settings(), "matmul", BF16, 4096, 7168, 4096, device=dev)
    assert c.path == "kernel" and c.config is None and "no dispatch table" in c.why
  # sm90 kinds: the heuristic has split-K and small-M tiles for few-tile products
  c = dt.decide(tuning.Settings(), "matmul", BF16, 16, 7168, 4096,
                device=gpu("NVIDIA H100 PCIe", 114))
  assert c.path == "kernel" and "no dispatch table" in c.why


@pytest.mark.parametrize("op", dt.OPS)
def test_sm100_without_a_table_sends_few_tile_products_to_xla(op):
  """The sm100 GEMM has no split-K or small-M kernel: on a Blackwell kind without a table
  a product whose heuristic tiling would fill under half the SMs goes to XLA's dot (the
  rule HEURISTICS['sm100']['gemm']['few_tiles']), the rest to the kernel; an override
  forcing the kernel is honoured."""
  b200 = gpu("NVIDIA B200", 148, "10.0")
  share = tuning.HEURISTICS["sm100"]["gemm"]["few_tiles"]["max_sm_share"]
  for m, n, k, batch, want in ((1, 4096, 7168, 1, "xla"), (16, 7168, 4096, 1, "xla"),
                               (128, 7168, 16384, 1, "xla"), (256, 2048, 7168, 1, "xla"),
                               (64, 28672, 4096, 1, "kernel"), (512, 4096, 7168, 1, "kernel"),
                               (64, 2048, 2048, 4, "xla"), (64, 2048, 2048, 16, "kernel"),
                               (8192, 8192, 8192, 1, "kernel")):
    cfg = tuning.gemm_config(m, n, k, batch=batch, device=b200)
    ctas = batch * -(-(-(-m // cfg.block_m)) // cfg.cluster_m) * cfg.cluster_m * -(-n // cfg.block_n)
    assert (ctas < share * 148) == (want == "xla"), (m, n, k, batch, ctas)
    c = dt.decide(tuning.Settings(), op, BF16, m, n, k, batch, device=b200)
    assert c.path == want, (m, n, k, batch, c)
    if want == "xla":
      assert f"would run {ctas} CTAs on 148 SMs" in c.why and "not a measurement" in c.why
      forced = dt.decide(tuning.Settings(dispatch="kernel"), op, BF16, m, n, k, batch, device=b200)
      assert forced.path == "kernel"


def test_the_shipped_entries_come_from_the_published_measurements():
  """Each GPU kind's table is what --emit-table makes of its published measurements (no
  entry typed by hand): H200 from the suite's runs (docs/results_raw/suite_h200.json with
  suite_h200_bias.json for matmul_bias; suite_h200_check.json, the check of the table the
  first made; suite_h200_matmul_3.json, matmul's check of the table those two made; a
  class keeps the kernel only where it held in every run) with the sharded example's
  products (suite_example_h200.json), H100 from the suite runs in
  docs/results_raw/suite_h100*.json."""
  sys.path.insert(0, os.path.join(REPO, "benchmarks"))
  try:
    import bench_suite
  finally:
    sys.path.pop(0)
  raw = lambda name: os.path.join(REPO, "docs", "results_raw", name)  # noqa: E731
  load = lambda names: [json.load(open(raw(n))) for n in names]  # noqa: E731
  h200_runs = ["suite_h200.json", "suite_h200_bias.json", "suite_h200_check.json",
               "suite_h200_matmul_3.json", "suite_example_h200.json"]
  suite = bench_suite.merge_suites(load(h200_runs), [raw(n) for n in h200_runs])
  kt = table()["kinds"]["H200"]
  assert kt["measured_on"] == "H200"
  assert kt["source"].startswith(suite["meta"]["legacy"] + " on NVIDIA H200")
  assert dt.build_entries(suite["rows"], sms=132, classes=table()["classes"],
                          threshold=kt["threshold"]) == kt["entries"]
  assert {(op, d) for op in kt["entries"] for d in kt["entries"][op]} == {
      (op, d) for op in dt.OPS for d in dt.DTYPES}
  # H100: three runs (every class holds in all of them), the small-M shapes re-measured
  # in three more after the kernel's A box changed (those rows replace the older ones).
  older = ["suite_h100.json", "suite_h100_bf16_2.json", "suite_h100_all.json"]
  newer = [f"suite_h100_smallm_{i}.json" for i in (1, 2, 3)]
  h100 = bench_suite.supersede(bench_suite.merge_suites(load(older), [raw(n) for n in older]),
                               load(newer), [raw(n) for n in newer])
  assert {tuple(r["shape"][:3]) for r in load(newer)[0]["rows"]} == {
      (m, n, k) for m in (1, 16, 64) for n, k in bench_suite.LLM_NK}
  k100 = table()["kinds"]["H100"]
  assert k100["measured_on"] == "H100"
  assert k100["source"].startswith(h100["meta"]["legacy"] + " on NVIDIA H100")
  assert dt.build_entries(h100["rows"], sms=132, classes=table()["classes"],
                          threshold=k100["threshold"]) == k100["entries"]
  # the regimes docs/results.md names (H200): 1000^3 and the small MLP's narrow products
  # go to XLA, the M = 16 and M = 128 projections keep the kernel
  h200 = gpu()
  for shape, want in [((1000, 1000, 1000), "xla"), ((8192, 4096, 64), "xla"),
                      ((8192, 10, 4096), "xla"), ((4096, 10, 8192), "xla"),
                      ((16, 7168, 4096), "kernel"), ((128, 7168, 4096), "kernel")]:
    assert dt.decide(tuning.Settings(), "matmul", BF16, *shape, device=h200).path == want


# ---------------------------------------------------------------------------
# The ops on cpu_ffi: custom call or not, values, explain
# ---------------------------------------------------------------------------

XLA_SHAPE = (200, 64, 96)        # M, K, N: class 128<M<=2048, N<=2048, K<=3072: "xla"
KERNEL_SHAPE = (64, 3080, 2056)  # class 16<M<=64, 2048<N<=8192, K>3072: "kernel"


def operands(rng, m, k, n, dtype=BF16, batch=()):
  return random_array(rng, batch + (m, k), dtype), random_array(rng, batch + (k, n), dtype)


def test_xla_choice_has_no_custom_call_and_the_reference_numerics(kind, rng):
  a, b = operands(rng, *XLA_SHAPE)
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0
  got = run(jax_sm100.matmul, a, b)
  ref = f64(a) @ f64(b)
  assert_matmul_close(got, ref, np.abs(f64(a)) @ np.abs(f64(b)), a.shape[1], BF16, what="xla")
  # the same as the kernel's CPU handler within the contract, and f32 output exactly the
  # reference formula's
  with tuning.override(dispatch="kernel"):
    assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 1
    kern = run(jax_sm100.matmul, a, b)
  assert_matmul_close(kern, ref, np.abs(f64(a)) @ np.abs(f64(b)), a.shape[1], BF16, what="k")
  got32 = run(lambda a, b: jax_sm100.matmul(a, b, out_dtype=F32), a, b)
  assert_matmul_close(got32, ref, np.abs(f64(a)) @ np.abs(f64(b)), a.shape[1], F32, what="f32")
  (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert d.path == "xla" and d.target == "jax_sm100_gemm" and d.config is None
  assert d.why.startswith("dispatch table H200 class (128<M<=2048, N<=2048, K<=3072, "
                          "waves<=1; waves of 128x256 tiles on 132 SMs): measured xla ")
  assert "measured xla up to 1.33x faster than the kernel (2048x2048x2048, 1000x1000x1000)" \
      in d.why


def test_residual_xla_path_is_the_reference_formula(kind, rng, monkeypatch):
  a, b = operands(rng, *XLA_SHAPE)
  c = random_array(rng, (XLA_SHAPE[0], XLA_SHAPE[2]), BF16)
  f = lambda a, b, c: jax_sm100.matmul_residual(a, b, c, alpha=0.5, beta=-2.0)
  with tuning.override(dispatch="xla"):
    assert gemm_calls(hlo(f, a, b, c)) == 0
    got = run(f, a, b, c)
    (d,) = tuning.explain(f, a, b, c)
  assert d.path == "xla" and d.target == "jax_sm100_gemm_residual"
  assert d.why == "override(dispatch='xla')"
  from jax_sm100 import _reference
  want = jax.jit(lambda a, b, c: _reference.gemm(a, b, False, False, BF16, c=c, alpha=0.5,
                                                 beta=-2.0))(a, b, c)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  # no residual entries shipped: the kernel by default
  assert gemm_calls(hlo(f, a, b, c)) == 1


def test_kernel_choice_launches_the_custom_call(kind, rng):
  m, k, n = KERNEL_SHAPE
  a, b = jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16)
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 1
  (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert d.path == "kernel" and d.config is not None
  assert "dispatch table H200 class (16<M<=64, 2048<N<=8192, K>3072, waves<=1" in d.why
  assert "measured the kernel 1.08x XLA (64x7168x4096)" in d.why
  # the tiling is the heuristic's where the table has none
  assert d.config == tuning.gemm_config(m, n, k)
  kind.value = "NVIDIA_B200"   # a kind without a table: the kernel, the heuristic
  (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert d.path == "kernel" and "no dispatch table for GPU kind 'NVIDIA_B200'" in d.why


def test_gradients_dispatch_each_product(kind, rng):
  """dA = g b^T and dB = a^T g are products of their own shapes and classes."""
  loss = lambda a, b: jnp.sum(jax_sm100.matmul(a, b).astype(F32) ** 2)
  # x (4096, 64) @ w (64, 3000): the forward (M>2048, 2048<N<=8192, K<=3072, 3 waves) goes to
  # XLA; dA = g w^T (4096x64x3000: no entry) and dB = x^T g (64x3000x4096: 16<M<=64,
  # 2048<N<=8192, K>3072) stay on the kernel
  x, w = jax.ShapeDtypeStruct((4096, 64), BF16), jax.ShapeDtypeStruct((64, 3000), BF16)
  rep = tuning.explain(jax.grad(loss, (0, 1)), x, w)
  assert sorted(d.path for d in rep) == ["kernel", "kernel", "xla"], str(rep)
  (fwd,) = [d for d in rep if d.path == "xla"]
  assert fwd.shapes == ((4096, 64), (64, 3000))
  # forced onto XLA, every product leaves the kernel, with the right values
  a, b = operands(rng, 16, 64, 96)
  with tuning.override(dispatch="xla"):
    rep = tuning.explain(jax.grad(loss, (0, 1)), a, b)
    assert [d.path for d in rep] == ["xla"] * 3
    assert gemm_calls(hlo(jax.grad(loss, (0, 1)), a, b)) == 0
    ga, gb = run(jax.grad(loss, (0, 1)), a, b)
  with tuning.override(dispatch="kernel"):
    assert gemm_calls(hlo(jax.grad(loss, (0, 1)), a, b)) == 3
  # the cotangent is 2 y with y rounded to bf16
  g = 2 * f64(jnp.asarray(f64(a) @ f64(b), F32).astype(BF16))
  for got, want, absprod, k in ((ga, g @ f64(b).T, np.abs(g) @ np.abs(f64(b)).T, 96),
                                (gb, f64(a).T @ g, np.abs(f64(a)).T @ np.abs(g), 16)):
    assert_matmul_close(got, want, absprod, k, BF16, extra=2.0**-8 * absprod, what="grad")


def test_batched_and_vmapped_products_on_xla(kind, rng):
  a, b = operands(rng, *XLA_SHAPE, batch=(3,))
  want = np.einsum("bmk,bkn->bmn", f64(a), f64(b))
  got = run(jax_sm100.matmul, a, b)
  assert_matmul_close(got, want, np.abs(want) + 1, XLA_SHAPE[1], BF16, what="batched")
  got = run(jax.vmap(jax_sm100.matmul), a, b)
  assert_matmul_close(got, want, np.abs(want) + 1, XLA_SHAPE[1], BF16, what="vmap")
  assert gemm_calls(hlo(jax.vmap(jax_sm100.matmul), a, b)) == 0


def test_dot_general_takes_the_same_dispatch(kind, rng):
  a, b = operands(rng, *XLA_SHAPE)
  dg = lambda a, b: jax_sm100.dot_general(a, b, (((1,), (0,)), ((), ())))
  assert gemm_calls(hlo(dg, a, b)) == 0
  with tuning.override(dispatch="kernel"):
    assert gemm_calls(hlo(dg, a, b)) == 1
  m, k, n = KERNEL_SHAPE
  s = (jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16))
  assert gemm_calls(hlo(dg, *s)) == 1


# ---------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------

def _tiling(calls):
  (_, _, attrs), = [c for c in calls if c[0] == "jax_sm100_gemm"][-1:]
  return tuple(int(attrs[k]) for k in ("block_m", "block_n", "cluster_m", "group_m"))


def test_overrides_are_honoured(kind, rng):
  a, b = jax.ShapeDtypeStruct(XLA_SHAPE[:2], BF16), jax.ShapeDtypeStruct(XLA_SHAPE[1:], BF16)
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0                 # the table: xla
  with tuning.override(dispatch="kernel"):
    assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 1
    (d,) = tuning.explain(jax_sm100.matmul, a, b)
    assert d.why.startswith(f"{XLA_SHAPE[0]}x{XLA_SHAPE[2]}x{XLA_SHAPE[1]}, batch 1: "
                            "override(dispatch='kernel'); dispatch table H200 class")
    with tuning.override(dispatch="auto"):                              # nested: back
      assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0
  with tuning.override(gemm=GemmConfig(64, 128, 1, 4)):                  # a config: kernel
    hlo(jax_sm100.matmul, a, b)
    assert _tiling(kind.calls) == (64, 128, 1, 4)
    (d,) = tuning.explain(jax_sm100.matmul, a, b)
    assert d.path == "kernel" and "override(gemm=" in d.why
  with tuning.override(gemm={"group_m": 5}):                             # partial: no force
    assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0
  with tuning.override(dispatch="heuristic"):
    hlo(jax_sm100.matmul, a, b)
    want = tuning.gemm_config(XLA_SHAPE[0], XLA_SHAPE[2], XLA_SHAPE[1])
    assert _tiling(kind.calls) == (want.block_m, want.block_n, want.cluster_m, want.group_m)
  m, k, n = KERNEL_SHAPE
  s = (jax.ShapeDtypeStruct((m, k), BF16), jax.ShapeDtypeStruct((k, n), BF16))
  with tuning.override(dispatch="xla"):                                 # table: kernel
    assert gemm_calls(hlo(jax_sm100.matmul, *s)) == 0
  assert tuning.current() == tuning.Settings()


@pytest.mark.parametrize("kw,match", [
    (dict(dispatch="fastest"), r"dispatch=...\) takes one of 'auto', 'kernel', 'xla', "
                               r"'heuristic'; got 'fastest'"),
    (dict(dispatch=1), r"takes one of"),
    (dict(autotune_cache=""), r"autotune_cache=...\) takes a path, True"),
    (dict(autotune_cache=3), r"autotune_cache=...\) takes a path"),
])
def test_invalid_dispatch_overrides_raise(kw, match):
  with pytest.raises(ValueError, match=match):
    with tuning.override(**kw):
      pass


def test_reference_backend_is_not_changed_by_the_dispatch(monkeypatch):
  monkeypatch.setenv("JAX_SM100_FORCE_REFERENCE", "1")
  monkeypatch.setattr(dt, "gpu_kind", lambda d: "H200")
  a = jax.ShapeDtypeStruct((16, 4096), BF16)
  b = jax.ShapeDtypeStruct((4096, 7168), BF16)
  for mode in dt.DISPATCH_MODES:
    with tuning.override(dispatch=mode):
      (d,) = tuning.explain(jax_sm100.matmul, a, b)
    assert d.path == "reference" and "JAX_SM100_FORCE_REFERENCE" in d.why


# ---------------------------------------------------------------------------
# Measurements -> table -> dispatch
# ---------------------------------------------------------------------------

def test_emitted_entries_choose_per_class_and_drive_the_ops(kind, rng, tmp_path, monkeypatch):
  def row(shape, xla, **tilings):
    return dict(op="matmul", dtype="bfloat16", shape=list(shape) + [1],
                wall_us=dict(xla=xla, **{k.replace("t", ""): v for k, v in tilings.items()}))
  rows = [
      # class A (both shapes 128<M<=2048, N<=2048, K<=3072, waves<=1): 128x128c2 is the
      # only tiling that is never below 0.98 of XLA
      row((200, 96, 64), 10.0, t128x128c2=10.1, t64x64c1=8.0),
      row((1000, 1000, 1000), 10.0, t128x128c2=9.9, t64x64c1=12.0),
      # class B (M<=16, ...): every tiling loses somewhere -> xla, best tiling kept
      row((16, 7168, 4096), 10.0, t128x128c2=11.0, t64x64c1=10.5),
      row((1, 7168, 4096), 10.0, t128x128c2=12.0, t64x64c1=9.0),
  ]
  entries = dt.build_entries(rows, sms=SMS)
  ea = entries["matmul"]["bfloat16"]["128<M<=2048,N<=2048,K<=3072,waves<=1"]
  eb = entries["matmul"]["bfloat16"]["M<=16,2048<N<=8192,K>3072,waves<=1"]
  assert ea["path"] == "kernel" and ea["tiling"] == [128, 128, 2] and ea["worst"] == 0.99
  assert eb["path"] == "xla" and eb["tiling"] == [64, 64, 1]
  assert eb["speedup"] == round(10.5 / 10.0, 3)    # xla over 64x64c1 on its worst shape
  # residual rows without the xla path are left out
  assert dt.build_entries([dict(row((200, 96, 64), 1.0, t64x64c1=2.0), op="matmul_residual")],
                          sms=SMS) == {}
  # written as a table, it drives the ops
  data = dict(format=dt.FORMAT, classes=dt.DEFAULT_CLASSES,
              kinds={"H200": dict(measured_on="H200", source="test", entries=entries)})
  path = tmp_path / "table.json"
  path.write_text(json.dumps(data))
  monkeypatch.setattr(dt, "DATA_FILE", str(path))
  monkeypatch.setattr(dt, "_shipped", {})
  a, b = operands(rng, 200, 64, 96)
  hlo(jax_sm100.matmul, a, b)
  assert _tiling(kind.calls) == (128, 128, 2, 8)
  (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert "measured 128x128c2 1.00x XLA (200x96x64, 1000x1000x1000)" in d.why


# ---------------------------------------------------------------------------
# Under jax.jit over a mesh
# ---------------------------------------------------------------------------

SHARDED = r"""
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
import jax_sm100
from jax_sm100 import _dispatch_table as dt, tuning
dt.gpu_kind = lambda d: "H200"
mesh = jax.make_mesh((4,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
rng = np.random.default_rng(int(SEED))
a = jnp.asarray(rng.standard_normal((800, 64)), jnp.bfloat16)
b = jnp.asarray(rng.standard_normal((64, 96)), jnp.bfloat16)
A = jax.device_put(a, NamedSharding(mesh, P("x", None)))
B = jax.device_put(b, NamedSharding(mesh, P(None, "x")))
ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
for mode, calls in (("auto", 0), ("kernel", 1)):
  with tuning.override(dispatch=mode):
    f = jax.jit(lambda a, b: jax_sm100.matmul(a, b))  # a fresh trace per mode
    text = f.lower(A, B).compile().as_text()   # the partitioned program
    assert text.count('custom_call_target="jax_sm100_gemm"') == calls, (mode, text)
    out = np.asarray(f(A, B), np.float64)
  assert np.abs(out - ref).max() <= 2**-7 * np.abs(ref).max(), mode
print("ok")
"""


def test_xla_choice_under_a_mesh(tmp_path):
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
             JAX_PLATFORMS="cpu", JAX_SM100_BACKEND="cpu_ffi", HOME=str(tmp_path))
  seed = np.random.default_rng().integers(1 << 30)
  r = subprocess.run([sys.executable, "-c", SHARDED.replace("SEED", str(seed))], env=env,
                     capture_output=True, text=True, timeout=600, cwd=tmp_path)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_the_suite_splits_gpu_events_at_its_markers():
  sys.path.insert(0, os.path.join(REPO, "benchmarks"))
  try:
    import bench_suite
  finally:
    sys.path.pop(0)
  ev = lambda ts, dur, name: dict(ts=ts, dur=dur, name=name)  # noqa: E731
  events = [ev(5, 1, "void at::native::vectorized_elementwise_kernel<FillFunctor>"),
            ev(1, 2, "gemm_fusion_dot"), ev(2, 1.5, "loop_convert_fusion"),
            ev(6, 7, "jax_sm100::gemm"), ev(9, 1, "at::native::fill")]
  assert bench_suite.split_at_markers(events, 2) == [3.5, 7.0]
  assert bench_suite.split_at_markers(events, 3) is None   # a missing marker: no numbers
