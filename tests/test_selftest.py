"""The known-answer self-test (jax_sm100.selftest) and its first-use guard, on a CPU.

No Blackwell GPU here: the guard's test hook (_selftest_guard._EXTRA_UNPROVEN) treats
'cpu_ffi' as an unproven backend, so the guard runs its cases against the FFI targets'
CPU handlers through the real launch layer; faults are planted by replacing
selftest.launch_kernel, the one function through which the self-test launches a kernel.
"""
import logging
import os
import re
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _selftest_guard, selftest, tuning
from jax_sm100.selftest import SelfTestFailure
from conftest import assert_matmul_close, f64, random_array

BF16 = jnp.bfloat16


@pytest.fixture
def guard_state(monkeypatch):
  """A clean guard (no results kept), on, with this process's switch restored after."""
  monkeypatch.setattr(_selftest_guard, "_enabled", True)
  _selftest_guard.reset()
  yield
  _selftest_guard.reset()


@pytest.fixture
def unproven(cpu_ffi, guard_state, monkeypatch, rng):
  """backend() == 'cpu_ffi' treated as unproven (the test hook); yields the self-test's
  kernel launches [(case, operand types)] made meanwhile."""
  monkeypatch.setattr(_selftest_guard, "_EXTRA_UNPROVEN", frozenset({"cpu_ffi"}))
  monkeypatch.setattr(selftest, "_seed", int(rng.integers(2**31)))
  launches = []
  real = selftest.launch_kernel

  def recording(case, a, b, c):
    launches.append((case, tuple(type(x) for x in (a, b))))
    return real(case, a, b, c)

  monkeypatch.setattr(selftest, "launch_kernel", recording)
  yield launches


def plant(monkeypatch, fault):
  """Replaces the self-test's kernel launch by fault(case, real_result_fn)."""
  real = selftest.launch_kernel
  monkeypatch.setattr(selftest, "launch_kernel",
                      lambda case, a, b, c: fault(case, lambda: real(case, a, b, c)))


def targets_in(f, *args):
  return re.findall(r"custom_call @(\w+)", jax.jit(f).lower(*args).as_text())


def on_reference(monkeypatch, f, *args):
  monkeypatch.setenv(_backend.BACKEND_ENV, "reference")
  jax.clear_caches()
  try:
    return np.asarray(jax.jit(f)(*args))
  finally:
    monkeypatch.setenv(_backend.BACKEND_ENV, "cpu_ffi")
    jax.clear_caches()


def self_test_failures(record):
  return [w for w in record if issubclass(w.category, SelfTestFailure)]


# ---------------------------------------------------------------------------
# The case set
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["gemm", "gemm_residual"])
def test_the_cases_cover_the_contract(family):
  cases = selftest.cases(family, "sm100")
  assert {c.tiling for c in cases} == set(tuning.SM100_GEMM_TILINGS)
  assert (128, 256, 2) in {c.tiling for c in cases}          # the 2-SM pair
  assert {c.layout for c in cases} == {"NN", "NT", "TN", "TT"}
  for tiling in tuning.SM100_GEMM_TILINGS:                   # every layout on every tiling
    assert {c.layout for c in cases if c.tiling == tiling} == {"NN", "NT", "TN", "TT"}
  assert {c.in_dtype for c in cases} == {"bfloat16", "float16"}
  assert {"float32", "bfloat16"} <= {c.out_dtype for c in cases}
  assert any(len(c.a_shape) > 2 or len(c.b_shape) > 2 for c in cases)   # batched
  assert any(len(c.a_shape) != len(c.b_shape) or 1 in c.a_shape[:-2] + c.b_shape[:-2]
             for c in cases)                                           # broadcast
  # partial tiles: an M and an N that no tile size divides, and K not a multiple of 64
  ms = {c.a_shape[-1] if c.trans_a else c.a_shape[-2] for c in cases}
  assert any(m % 128 for m in ms) and any(c.k % 64 for c in cases)
  if family == "gemm_residual":
    assert all(c.c_shape is not None for c in cases)
    assert any(c.beta not in (0.0, 1.0) for c in cases) and any(c.alpha != 1.0 for c in cases)
    assert any(c.beta == 0.0 and c.c_nan for c in cases)
  # on sm90 the cases cover its kernel's tilings instead
  assert {c.tiling for c in selftest.cases(family, "sm90")} == set(tuning.GEMM_TILINGS)


def test_unproven_backends_is_sm100():
  assert _backend.UNPROVEN_BACKENDS == {"sm100"}
  assert _selftest_guard.unproven_backends() == {"sm100"}  # no test hook outside tests
  assert selftest.family_of("jax_sm100_gemm") == "gemm"
  assert selftest.family_of("jax_sm100_gemm_residual") == "gemm_residual"
  assert selftest.family_of("jax_sm100_fp8_gemm") == "fp8_gemm"
  assert selftest.family_of("jax_sm100_fp8_gemm_residual") == "fp8_gemm_residual"
  assert selftest.family_of("jax_sm100_quantize_fp8") == "fp8_quantize"
  assert selftest.family_of("jax_sm100_quantize_fp8_dual") == "fp8_quantize"
  assert selftest.family_of("jax_sm100_quantize_fp8_act_dual") == "fp8_quantize"
  assert selftest.family_of("jax_sm100_quantize_fp8_dact_dual") == "fp8_quantize"
  assert selftest.family_of("jax_sm100_mxfp8_gemm") == "mxfp8"
  assert selftest.family_of("jax_sm100_no_such_target") is None


def _table_sm100_targets() -> set:
  """The targets ffi/src/targets.h marks as having an sm_100a kernel (its 4th column)."""
  path = os.path.join(os.path.dirname(__file__), os.pardir, "ffi", "src", "targets.h")
  with open(path, encoding="utf-8") as f:
    table = f.read().replace("\\\n", " ")
  rows = re.findall(r'X\("(\w+)",\s*\w+,\s*\w+,\s*(true|false)\)', table)
  assert len(rows) == len(_ffi_registry.target_names()), rows   # the parse saw every row
  return {name for name, sm100 in rows if sm100 == "true"}


def test_every_sm100_kernel_has_a_self_test_family():
  # On sm100 the guard refuses a target that no family covers (its ops would never leave
  # the reference path): each target with an sm_100a kernel needs a family, and each
  # family's targets are in the table.
  sm100 = _table_sm100_targets() | set(_ffi_registry.sm100_targets())
  assert {"jax_sm100_fp8_gemm", "jax_sm100_mxfp8_gemm"} <= sm100
  assert not [t for t in sorted(sm100) if selftest.family_of(t) is None]
  for fam in selftest.FAMILIES.values():
    assert set(fam.targets) <= set(_ffi_registry.target_names()), fam.name


def test_the_tolerance_is_far_below_a_layout_error(rng):
  # On N(0, 1) data an element of op(a) @ op(b) has standard deviation sqrt(K): a
  # misplaced element or a dropped K block moves it by a fair fraction of that. The
  # tolerance (per element where a family gives one) stays below a tenth of it on every
  # case (bf16 output, K = 1000 included).
  for family in selftest.FAMILIES:
    for case in selftest.cases(family, "sm100"):
      a, b, c = selftest._data(case, rng)
      want, tol = selftest.FAMILIES[family].expected(case, a, b, c)
      scale = max(abs(case.alpha), abs(case.beta), 1.0) * np.sqrt(case.k)
      assert np.shape(tol) in ((), want.shape), (case.describe(), np.shape(tol))
      assert 0 < np.min(tol) and np.max(tol) < 0.1 * scale, (case.describe(), tol, scale)
      assert np.isfinite(want).all()


# ---------------------------------------------------------------------------
# (a) a correct kernel: the cases pass, the op takes the kernel
# ---------------------------------------------------------------------------

def test_a_correct_kernel_passes_and_the_op_runs_it(unproven, rng, caplog):
  a, b = random_array(rng, (72, 40), BF16), random_array(rng, (40, 24), BF16)
  with warnings.catch_warnings():
    warnings.simplefilter("error", SelfTestFailure)
    with caplog.at_level(logging.INFO, logger="jax_sm100.selftest"):
      got = jax.jit(jax_sm100.matmul)(a, b)
  n_gemm = len(selftest.cases("gemm", "cpu_ffi"))
  assert [c.family for c, _ in unproven] == ["gemm"] * n_gemm   # the family's cases, once
  assert all(not issubclass(t, jax.core.Tracer) for _, ts in unproven for t in ts)
  (res,) = selftest.status()
  assert res.passed and res.family == "gemm" and res.backend == "cpu_ffi"
  assert len(res.cases) == n_gemm and all(r.passed and r.path == "kernel" for r in res.cases)
  assert "passed their known-answer self-test" in caplog.text
  assert targets_in(jax_sm100.matmul, a, b) == ["jax_sm100_gemm"]
  assert_matmul_close(got, f64(a) @ f64(b), np.abs(f64(a)) @ np.abs(f64(b)), 40, BF16)
  # kept for the process: later uses (and new traces) do not run the cases again
  jax.clear_caches()
  jax.jit(jax_sm100.matmul)(a, b)
  assert len(unproven) == n_gemm
  # the residual family runs its own cases on its own first use
  c = random_array(rng, (72, 24), BF16)
  jax_sm100.matmul_residual(a, b, c, beta=0.5)
  assert [c.family for c, _ in unproven[n_gemm:]] == ["gemm_residual"] * len(
      selftest.cases("gemm_residual", "cpu_ffi"))
  assert {r.family for r in selftest.status()} == {"gemm", "gemm_residual"}


@pytest.mark.parametrize("transform", ["jit", "vmap", "grad", "jit_vmap_grad"])
def test_the_cases_run_eagerly_inside_traces(unproven, rng, transform):
  a, b = random_array(rng, (3, 24, 40), BF16), random_array(rng, (40, 16), BF16)
  mm = lambda a, b: jnp.sum(jax_sm100.matmul(a, b).astype(jnp.float32))
  f = {"jit": jax.jit(lambda a, b: jax_sm100.matmul(a, b)),
       "vmap": jax.vmap(jax_sm100.matmul, (0, None)),
       "grad": jax.grad(mm, (0, 1)),
       "jit_vmap_grad": jax.jit(jax.vmap(jax.grad(mm, (0, 1)), (0, None)))}[transform]
  with warnings.catch_warnings():
    warnings.simplefilter("error", SelfTestFailure)
    out = f(a, b)
  assert unproven and all(not issubclass(t, jax.core.Tracer) for _, ts in unproven for t in ts)
  assert all(r.passed for r in selftest.status())
  if transform == "vmap":
    ref = f64(a) @ f64(b)
    assert_matmul_close(out, ref, np.abs(f64(a)) @ np.abs(f64(b)), 40, BF16)


# ---------------------------------------------------------------------------
# (b), (c) a wrong number or an exception: warn, name the case, take the reference
# ---------------------------------------------------------------------------

def test_a_wrong_number_warns_and_sends_the_family_to_the_reference(unproven, monkeypatch,
                                                                    rng, caplog):
  def one_wrong_element(case, run):
    d = run()
    if case.family == "gemm" and case.tiling == (128, 256, 2):
      d = d.at[(0,) * d.ndim].add(100.0)
    return d
  plant(monkeypatch, one_wrong_element)
  a, b = random_array(rng, (72, 40), BF16), random_array(rng, (40, 24), BF16)
  with pytest.warns(SelfTestFailure) as record:
    got = np.asarray(jax.jit(jax_sm100.matmul)(a, b))
  (w,) = self_test_failures(record)
  msg = str(w.message)
  assert "gemm kernel FAILED its known-answer self-test" in msg
  assert "case gemm 128x256 cluster 2" in msg
  num = r"([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)"
  m = re.search(rf"max abs error {num} > tolerance {num}", msg)
  assert m and 99 < float(m.group(1)) < 101 and float(m.group(2)) < 1
  assert "reference path for the rest of this process" in msg
  assert any(r.levelno == logging.ERROR and "FAILED" in r.getMessage() for r in caplog.records)
  # the op took the reference path: no custom call, the reference's bits
  assert targets_in(jax_sm100.matmul, a, b) == []
  np.testing.assert_array_equal(got, on_reference(monkeypatch, jax_sm100.matmul, a, b))
  (d,) = tuning.explain(jax_sm100.matmul, a, b)
  assert d.path == "reference" and "self-test of the cpu_ffi gemm kernel failed" in d.why
  assert "128x256 cluster 2" in d.why
  (res,) = selftest.status()
  assert not res.passed and not res.cases[-1].passed and all(r.passed for r in res.cases[:-1])
  # for the rest of the process, and the other family is unaffected
  with warnings.catch_warnings():
    warnings.simplefilter("error", SelfTestFailure)
    jax.clear_caches()
    jax.jit(jax.grad(lambda a: jnp.sum(jax_sm100.matmul(a, b).astype(jnp.float32))))(a)
    assert targets_in(jax_sm100.matmul, a, b) == []
    c = random_array(rng, (72, 24), BF16)
    assert targets_in(lambda a, b, c: jax_sm100.matmul_residual(a, b, c), a, b, c) == [
        "jax_sm100_gemm_residual"]


def test_a_nan_fails_the_case(unproven, monkeypatch, rng):
  def nan_result(case, run):
    d = run()
    return d.at[(-1,) * d.ndim].set(jnp.nan) if case.family == "gemm_residual" else d
  plant(monkeypatch, nan_result)
  a, b = random_array(rng, (16, 40), BF16), random_array(rng, (40, 24), BF16)
  c = random_array(rng, (16, 24), BF16)
  with pytest.warns(SelfTestFailure, match=r"gemm_residual kernel FAILED.*NaN or Inf"):
    jax_sm100.matmul_residual(a, b, c)
  (res,) = selftest.status()
  assert not res.passed and len(res.cases) == 1 and res.cases[0].nonfinite
  assert targets_in(lambda a, b, c: jax_sm100.matmul_residual(a, b, c), a, b, c) == []


def test_an_exception_warns_and_sends_the_family_to_the_reference(unproven, monkeypatch, rng):
  def raises(case, run):
    if case.layout == "TN":
      raise RuntimeError("planted failure")
    return run()
  plant(monkeypatch, raises)
  a, b = random_array(rng, (24, 40), BF16), random_array(rng, (40, 24), BF16)
  with pytest.warns(SelfTestFailure) as record:
    got = np.asarray(jax_sm100.matmul(a, b))
  (w,) = self_test_failures(record)
  assert re.search(r"case gemm 128x256 cluster 1, TN, .* raised RuntimeError: planted failure",
                   str(w.message))
  assert "restart the process" not in str(w.message)   # not an XLA runtime error
  np.testing.assert_array_equal(got, on_reference(monkeypatch, jax_sm100.matmul, a, b))
  assert targets_in(jax_sm100.matmul, a, b) == []


def test_an_xla_runtime_error_says_the_context_may_be_unusable(unproven, monkeypatch, rng):
  # A handler that fails at run time, as a kernel trap would: the CPU handler rejects a
  # tiling it does not have (the attribute bypasses GemmConfig's check).
  def handler_error(case, run):
    del run
    x = jnp.zeros((128, 64), BF16)                 # (M, K) and (K, N) = (64, 64)
    out = jax.ShapeDtypeStruct((128, 64), BF16)
    return jax.jit(lambda x, y: jax.ffi.ffi_call("jax_sm100_gemm", out)(
        x, y, trans_a=False, trans_b=False, block_m=np.int32(96), block_n=np.int32(128),
        cluster_m=np.int32(1), group_m=np.int32(8), split_k=np.int32(1)))(x, x[:64])
  plant(monkeypatch, handler_error)
  a = random_array(rng, (24, 40), BF16)
  with pytest.warns(SelfTestFailure, match=r"restart the process") as record:
    jax_sm100.matmul(a, a.T)
  (res,) = selftest.status()
  assert res.cases[0].runtime_error and "96" in res.cases[0].error
  assert "raised" in str(self_test_failures(record)[0].message)


# ---------------------------------------------------------------------------
# (d) the switch
# ---------------------------------------------------------------------------

def test_the_switch_off_runs_no_case(unproven, rng, caplog):
  selftest.configure(enabled=False)
  try:
    assert not selftest.enabled()
    a, b = random_array(rng, (24, 40), BF16), random_array(rng, (40, 24), BF16)
    with caplog.at_level(logging.WARNING, logger="jax_sm100.selftest"):
      jax_sm100.matmul(a, b)
    assert unproven == [] and selftest.status() == ()
    assert targets_in(jax_sm100.matmul, a, b) == ["jax_sm100_gemm"]   # unchecked kernel
    assert "self-test is off" in caplog.text
    selftest.configure(enabled=True)
    jax.clear_caches()
    jax_sm100.matmul(a, b)
    assert unproven and selftest.status()[0].passed
  finally:
    selftest.configure(enabled=True)
  with pytest.raises(ValueError, match=r"configure\(enabled=...\) takes a bool"):
    selftest.configure(enabled="no")


def test_a_proven_backend_runs_no_case(cpu_ffi, guard_state, monkeypatch, rng):
  # Without the test hook, cpu_ffi (like sm90) is not unproven: no case runs.
  monkeypatch.setattr(selftest, "launch_kernel", lambda *a: pytest.fail("self-test ran"))
  a, b = random_array(rng, (24, 40), BF16), random_array(rng, (40, 24), BF16)
  jax_sm100.matmul(a, b)
  assert selftest.status() == ()


def test_an_unguarded_target_on_an_unproven_backend_is_refused(guard_state, monkeypatch):
  target = "jax_sm100_no_such_target"  # a target no family covers
  ctx = _backend.Context("sm100", frozenset({target}))
  why = _selftest_guard.refusal(ctx, target)
  assert "no known-answer self-test" in why and "reference path" in why
  assert _selftest_guard.refusal(ctx._replace(backend="sm90"), target) is None


def _run_python(cwd, code, **env_extra):
  """A fresh interpreter (outside the checkout) importing this jax_sm100."""
  env = dict(os.environ, **env_extra)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  for k in ("JAX_SM100_FORCE_REFERENCE", "JAX_SM100_DISABLE_TARGETS"):
    env.pop(k, None)
  return subprocess.run([sys.executable, *code], env=env, capture_output=True, text=True,
                        timeout=300, cwd=cwd)


@pytest.mark.parametrize("value,want,warns", [("0", False, False), ("off", False, False),
                                              ("1", True, False), ("", True, False),
                                              ("maybe", True, True)])
def test_the_environment_switch_is_read_at_import(tmp_path, value, want, warns):
  out = _run_python(tmp_path, ["-W", "always", "-c",
                               "import jax_sm100.selftest as s; print(s.enabled())"],
                    JAX_SM100_SELFTEST=value)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.strip() == str(want)
  assert ("JAX_SM100_SELFTEST='maybe' is not 0 or 1" in out.stderr) == warns


# ---------------------------------------------------------------------------
# (e) python -m jax_sm100.selftest
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["auto", "cpu_ffi"])
def test_the_command_prints_a_report_and_exits_0(tmp_path, backend):
  if backend == "cpu_ffi" and not _ffi_registry.registered_cpu_targets():
    pytest.skip("needs the extension's CPU handlers")
  out = _run_python(tmp_path, ["-m", "jax_sm100.selftest", "--seed", "7"],
                    JAX_SM100_BACKEND=backend)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  text = out.stdout
  for line in ("jax_sm100 known-answer self-test", "device:", "versions:", "jax_sm100 0.1.0",
               "seed:        7", "RESULT: all cases passed"):
    assert line in text, line
  n = {f: len(selftest.cases(f, "cpu_ffi")) for f in selftest.FAMILIES}
  for family, count in n.items():
    assert f"family {family}: {count} of {count} cases passed" in text
  assert len(re.findall(r"^128x256 c2 .* pass$", text, re.M)) >= 2 * 4   # the 2-SM pair
  if backend == "cpu_ffi":
    assert "backend:     cpu_ffi" in text and "the CPU handlers of jax_sm100_gemm" in text
  else:  # a CPU: the report says that no kernel ran
    assert "backend:     reference" in text and "REFERENCE, no kernel ran" in text


def test_the_command_fails_when_a_case_fails(tmp_path):
  if not _ffi_registry.registered_cpu_targets():
    pytest.skip("needs the extension's CPU handlers")
  code = """
import sys
from jax_sm100 import selftest
real = selftest.launch_kernel
def wrong(case, a, b, c):
  d = real(case, a, b, c)
  return d.at[(0,) * d.ndim].add(50.0) if case.layout == "NT" else d
selftest.launch_kernel = wrong
sys.exit(selftest.main(["--family", "gemm"]))
"""
  out = _run_python(tmp_path, ["-c", code], JAX_SM100_BACKEND="cpu_ffi")
  assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
  fails = [l for l in out.stdout.splitlines() if l.endswith("  FAIL")]
  assert len(fails) == len(tuning.SM100_GEMM_TILINGS)     # each tiling's NT case
  assert all(" NT " in l for l in fails)
  assert "RESULT: FAILED" in out.stdout and "family gemm_residual" not in out.stdout
