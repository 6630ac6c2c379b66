"""The FP8 GEMM's measured dispatch (jax_sm100._dispatch_fp8) on CPU: the shipped table's
FP8 entries come from the published suite runs; an entry or an autotune cache hit gives
the launch its measured form, visible in the FFI attributes and in explain(); the
override, dispatch='heuristic', the residual kernel's 128-row tiles and an architecture
without the form each keep or restore the right choice; the launches run on cpu_ffi
against float64. The GPU kind is stood in; nothing is timed here.
"""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _dispatch_fp8 as d8
from jax_sm100 import _dispatch_table as dt
from jax_sm100 import tuning
from jax_sm100.tuning import Fp8Config
from test_api_tuning import configs, fp8_tiling

BF16 = jnp.bfloat16
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW = os.path.join(REPO, "docs", "results_raw")
# The shipped FP8 entries and the suite runs they are built from, per GPU kind.
SOURCES = {"H200": ["fp8_suite_h200.json"], "H100": ["fp8_suite_h100_check.json"]}

# A stand-in table: one FP8 class entry, 192x128 tiles, for this class of products:
SHAPE = (2304, 512, 3200)          # M, N, K: M>2048, N<=2048, K>3072, waves<=1 (132 SMs)
KEY = "M>2048,N<=2048,K>3072,waves<=1"


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
  """The GPU kind 'H200', HOME in tmp_path (no autotune cache of this machine), and a
  dispatch table with one FP8 entry (KEY -> 192x128c1) in place of the shipped one."""
  table = json.load(open(dt.DATA_FILE))
  table["kinds"]["H200"]["fp8"] = {"measured_on": "H200", "entries": {KEY: {
      "path": "kernel", "form": [192, 128, 1, False], "speedup": 1.05, "worst": 1.04,
      "shapes": ["2304x512x3200"]}}}
  path = tmp_path / "table.json"
  path.write_text(json.dumps(table))
  monkeypatch.setattr(dt, "gpu_kind", lambda device: "H200")
  monkeypatch.setattr(dt, "DATA_FILE", str(path))
  monkeypatch.setattr(dt, "_shipped", {})
  monkeypatch.setenv("HOME", str(tmp_path))
  jax.clear_caches()
  yield tmp_path
  jax.clear_caches()


def quantized(m, n, k, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((m, k)), BF16)
  w = jnp.asarray(rng.standard_normal((n, k)), BF16)
  return (*jax_sm100.quantize_fp8_blockwise(x, block=(1, 128)),
          *jax_sm100.quantize_fp8_blockwise(w, block=(128, 128)))


def structs(m, n, k):
  """fp8_blockwise_matmul's operands for an m x n x k product, as shapes only."""
  f8, f32 = jnp.float8_e4m3fn, jnp.float32
  return (jax.ShapeDtypeStruct((m, k), f8), jax.ShapeDtypeStruct((m, -(-k // 128)), f32),
          jax.ShapeDtypeStruct((n, k), f8),
          jax.ShapeDtypeStruct((-(-n // 128), -(-k // 128)), f32))


def residual(a, sa, b, sb, c):
  return jax_sm100.fp8_blockwise_matmul(a, sa, b, sb, c=c, beta=0.5)


def the_launch(*ops, f=jax_sm100.fp8_blockwise_matmul):
  (target, attrs), = configs(f, *ops)
  return target, fp8_tiling(attrs)


def heuristic(m, n, k, residual=False):
  c = tuning.fp8_config(m, n, k, residual=residual)
  return (c.block_m, c.block_n, c.cluster, c.pair_along_n, c.group_m)


def cache(path, m, n, k, form, kind_name="H200", version=None):
  with open(path, "w") as f:
    json.dump({"format": dt.FORMAT, "entries": [{
        "op": d8.OP, "dtype": d8.DTYPE, "shape": [m, n, k, 1], "path": "kernel",
        "form": list(form), "speedup": 1.11, "gpu_kind": kind_name,
        "jax_sm100_version": version or jax_sm100.__version__}]}, f)


# ---------------------------------------------------------------------------
# The shipped entries
# ---------------------------------------------------------------------------

def test_shipped_fp8_entries_come_from_the_published_runs():
  table = dt.shipped_table()
  assert d8.check_table(table) == []
  for kind_name, files in SOURCES.items():
    rows = [r for f in files for r in json.load(open(os.path.join(RAW, f)))["rows"]]
    want = d8.build_entries(rows, sms=132, classes=table["classes"])
    assert table["kinds"][kind_name]["fp8"]["entries"] == want
    for key, e in want.items():   # each entry beat the heuristic on every shape of its class
      assert e["worst"] >= 1.0 and e["speedup"] >= d8.MARGIN, key
  # H200: 7168x2048x4096 takes 192x128 tiles (1.035x the heuristic's 128x128 pair)
  assert table["kinds"]["H200"]["fp8"]["entries"]["M>2048,N<=2048,K>3072,2<waves<=4"][
      "form"] == [192, 128, 1, False]


def test_a_table_with_an_uncompiled_fp8_form_is_reported():
  table = {"kinds": {"H200": {"fp8": {"entries": {KEY: {"form": [96, 128, 1, False]}}}}}}
  (problem,) = d8.check_table(table)
  assert "H200/fp8/" + KEY in problem and "not compiled" in problem


def test_build_entries_keeps_only_consistent_winners():
  def row(shape, default, **forms):
    return {"shape": list(shape), "us": dict(default=default, cublas_block=default, **forms)}
  rows = [
      # class A (two shapes): 192x128c1 wins both by >= 4% -> entry; 256x128c1 loses one
      row((4096, 1024, 4096), 100.0, **{"192x128c1": 95.0, "256x128c1": 90.0}),
      row((3072, 1024, 4096), 100.0, **{"192x128c1": 96.0, "256x128c1": 101.0}),
      # class B: the best form is 1% faster (under MARGIN) -> no entry
      row((64, 4096, 7168), 50.0, **{"128x64c1": 49.5}),
      # class C: a form 10% faster on one shape, 2% slower on the other -> no entry
      row((8192, 8192, 8192), 1000.0, **{"256x128c1": 900.0}),
      row((8192, 7168, 7168), 800.0, **{"256x128c1": 816.0}),
  ]
  entries = d8.build_entries(rows, sms=132)
  key_a = dt.shape_class(4096, 1024, 4096, 1, 132, dt.DEFAULT_CLASSES)
  assert key_a == dt.shape_class(3072, 1024, 4096, 1, 132, dt.DEFAULT_CLASSES)
  assert list(entries) == [key_a]
  e = entries[key_a]
  assert e["form"] == [192, 128, 1, False] and e["worst"] == round(100 / 96, 3)
  assert e["speedup"] == round(float(np.sqrt(100 / 95 * 100 / 96)), 3)
  assert e["shapes"] == ["3072x1024x4096", "4096x1024x4096"]
  # runs made with a table name the rule's time "heuristic" ("default": the dispatched form)
  again = [dict(r, us=dict(r["us"], heuristic=r["us"]["default"], default=1.0)) for r in rows]
  assert d8.build_entries(again, sms=132) == entries


# ---------------------------------------------------------------------------
# The launches
# ---------------------------------------------------------------------------

def test_table_entry_gives_the_measured_form(stand_in, fake_sm90):
  m, n, k = SHAPE
  target, tiling = the_launch(*structs(m, n, k))
  assert target == "jax_sm100_fp8_gemm"
  assert tiling == (192, 128, 1, False, heuristic(m, n, k)[4]) != heuristic(m, n, k)
  (d,) = tuning.explain(jax_sm100.fp8_blockwise_matmul, *structs(m, n, k))
  assert d.config == Fp8Config(192, 128, 1, False, heuristic(m, n, k)[4])
  assert (f"FP8 dispatch table H200 class ({KEY.replace(',', ', ')}): measured 192x128c1 "
          "1.050x the heuristic's choice on 2304x512x3200") in d.why
  # another class: the heuristic; another GPU kind: the heuristic
  assert the_launch(*structs(512, 512, 1024))[1] == heuristic(512, 512, 1024)
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(dt, "gpu_kind", lambda device: "NVIDIA_B200")
    jax.clear_caches()
    assert the_launch(*structs(m, n, k))[1] == heuristic(m, n, k)


def test_overrides_and_the_heuristic_mode_win_over_the_measurement(stand_in, fake_sm90):
  m, n, k = SHAPE
  ops = structs(m, n, k)
  with tuning.override(fp8=Fp8Config(128, 64, 2)):
    assert the_launch(*ops)[1] == (128, 64, 2, False, 8)
  with tuning.override(fp8={"group_m": 3}):        # a partial override edits the measured form
    assert the_launch(*ops)[1] == (192, 128, 1, False, 3)
  with tuning.override(dispatch="heuristic"):
    assert the_launch(*ops)[1] == heuristic(m, n, k)
    (d,) = tuning.explain(jax_sm100.fp8_blockwise_matmul, *ops)
    assert "FP8 dispatch table" not in d.why
  with tuning.override(dispatch="xla"):            # no XLA path for FP8: still measured
    assert the_launch(*ops)[1][:4] == (192, 128, 1, False)


def test_forms_the_launch_cannot_take_are_passed_over(stand_in, fake_sm90, monkeypatch):
  m, n, k = SHAPE
  ops = structs(m, n, k) + (jax.ShapeDtypeStruct((m, n), BF16),)
  target, tiling = the_launch(*ops, f=residual)
  assert target == "jax_sm100_fp8_gemm_residual" and tiling == heuristic(m, n, k, residual=True)
  (d,) = tuning.explain(residual, *ops)
  assert ("measured 192x128c1, passed over (192x128c1: the residual FP8 kernel has 128-row "
          "tiles only)") in d.why
  # an architecture whose FP8 kernel lacks the form (sm100: 128x128 on one SM only)
  monkeypatch.setattr(tuning, "_arch", lambda device: "sm100")
  jax.clear_caches()
  assert the_launch(*structs(m, n, k))[1] == (128, 128, 1, False, 8)
  (d,) = tuning.explain(jax_sm100.fp8_blockwise_matmul, *structs(m, n, k))
  assert "passed over (192x128c1 has no sm100 FP8 kernel)" in d.why


def test_autotune_cache_hit_wins_and_runs(stand_in, cpu_ffi):
  m, n, k = 200, 136, 272                     # padded N 136, K 272: the kernel's shape
  ops = quantized(m, n, k)
  path = str(stand_in / "fp8.json")
  cache(path, m, n, k, (256, 128, 2, True))
  with tuning.override(autotune_cache=path):
    assert the_launch(*ops)[1] == (256, 128, 2, True, heuristic(m, n, k)[4])
    (d,) = tuning.explain(jax_sm100.fp8_blockwise_matmul, *ops)
    assert (f"autotune cache {path} ({m}x{n}x{k}): measured 256x128c2n 1.110x the "
            "heuristic's choice") in d.why
    got = np.asarray(jax.jit(jax_sm100.fp8_blockwise_matmul)(*ops), np.float64)
  # the same product on the heuristic's form: the same float64-checked numbers
  want = np.asarray(jax.jit(jax_sm100.fp8_blockwise_matmul)(*ops), np.float64)
  a, sa, b, sb = (np.asarray(o, np.float64) for o in ops)
  ref = (a * np.repeat(sa, 128, axis=1)[:, :k]) @ (
      b * np.repeat(np.repeat(sb, 128, axis=0), 128, axis=1)[:n, :k]).T
  np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())
  np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(ref).max())
  # entries of another GPU kind or another version are not used; nor with the cache off
  for kw in (dict(kind_name="H100"), dict(version="0.0.0")):
    cache(path, m, n, k, (256, 128, 2, True), **kw)
    with tuning.override(autotune_cache=path):
      assert the_launch(*ops)[1] == heuristic(m, n, k)
  cache(path, m, n, k, (256, 128, 2, True))
  with tuning.override(autotune_cache=False):
    assert the_launch(*ops)[1] == heuristic(m, n, k)


@pytest.mark.parametrize("kw,match", [
    (dict(shapes=[(64, 128, 256, 2)], ops=("fp8",)), "the FP8 GEMM is 2-D"),
    (dict(shapes=[(64, 128, 256)], ops=("fp16",)), "ops are matmul, .*fp8; got 'fp16'"),
])
def test_autotune_fp8_arguments_are_checked_first(kw, match):
  with pytest.raises(ValueError, match=match):
    jax_sm100.autotune(**kw)


def test_autotune_fp8_needs_a_gpu():
  if jax_sm100.backend() in ("sm90", "sm100"):
    pytest.skip("a GPU that runs the kernels is present")
  with pytest.raises(RuntimeError, match="nothing to time"):
    jax_sm100.autotune([(64, 128, 256)], ops=("fp8",))


def test_the_two_table_emitters_keep_each_others_entries(tmp_path):
  import sys
  sys.path.insert(0, os.path.join(REPO, "benchmarks"))
  try:
    import bench_fp8_suite
    import bench_suite
  finally:
    sys.path.pop(0)
  path = tmp_path / "table.json"
  path.write_text(open(dt.DATA_FILE).read())
  fp8_run = tmp_path / "fp8.json"
  fp8_run.write_text(json.dumps({"device": "NVIDIA H200", "commit": "test", "rows": [
      {"shape": [4096, 1024, 4096], "us": {"default": 100.0, "192x128c1": 90.0}}]}))
  assert bench_fp8_suite.emit_table([str(fp8_run)], str(path)) == 0
  key = dt.shape_class(4096, 1024, 4096, 1, 132, dt.DEFAULT_CLASSES)
  fp8 = json.loads(path.read_text())["kinds"]["H200"]["fp8"]
  assert fp8["entries"] == {key: {"path": "kernel", "form": [192, 128, 1, False],
                                  "speedup": 1.111, "worst": 1.111, "vs_cublas": None,
                                  "shapes": ["4096x1024x4096"]}}
  h100 = json.loads(path.read_text())["kinds"]["H100"]
  # the bf16 emitter rewrites H200's GEMM entries and keeps its FP8 ones
  suite = {"meta": {"sms": 132, "device": "NVIDIA H200", "gpu_kind": "H200"}, "rows": [
      dict(op="matmul", dtype="bfloat16", shape=[200, 96, 64, 1],
           wall_us={"xla": 10.0, "128x128c2": 9.0})]}
  bench_suite.emit_table(suite, str(path), [], 0.98, "wall_us", log=lambda s: None)
  table = json.loads(path.read_text())
  assert table["kinds"]["H200"]["fp8"] == fp8 and table["kinds"]["H100"] == h100
  assert list(table["kinds"]["H200"]["entries"]["matmul"]["bfloat16"]) == [
      "128<M<=2048,N<=2048,K<=3072,waves<=1"]
  assert dt.check_table(table) == []
