"""The MXFP8 kernel's known-answer self-test (jax_sm100.selftest family "mxfp8") and its
first-use guard, on a CPU.

No Blackwell GPU here: as in tests/test_selftest.py, the guard's test hook treats
'cpu_ffi' as unproven, so the family's cases run against jax_sm100_mxfp8_gemm's CPU
handler through the real launch layer (scale tiling, padding, the custom call); a fault
is planted by replacing selftest.launch_kernel.
"""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _mxfp8, selftest, tuning
from jax_sm100.selftest import SelfTestFailure
from conftest import assert_matmul_close
from test_selftest import guard_state, self_test_failures, targets_in, unproven  # noqa: F401 (fixtures)

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"


def _operands(rng, m, n, k):
  a, a_s = jax_sm100.quantize_mxfp8(jnp.asarray(rng.standard_normal((m, k)), jnp.float32))
  b, b_s = jax_sm100.quantize_mxfp8(jnp.asarray(rng.standard_normal((n, k)), jnp.float32),
                                    dtype=jnp.float8_e5m2)
  return a, a_s, b, b_s


def _f64_product(a, a_s, b, b_s):
  def deq(q, s):
    codes = np.repeat(np.asarray(s).view(np.uint8).astype(np.float64), 32, axis=1)[:, :q.shape[1]]
    return np.asarray(q).astype(np.float64) * 2.0 ** (codes - 127.0)
  a64, b64 = deq(a, a_s), deq(b, b_s)
  return a64 @ b64.T, np.abs(a64) @ np.abs(b64).T


def test_the_cases_cover_the_kernel():
  assert selftest.family_of(_mxfp8.TARGET) == "mxfp8"
  cases = selftest.cases("mxfp8", "sm100")
  tilings = {c.tiling for c in cases}
  assert tilings == set(_mxfp8.SELFTEST_TILINGS) == {(128, 128, 1), (128, 256, 1)}
  for t in tilings:  # every element-format mix on every tiling
    assert {(c.in_dtype, c.b_dtype) for c in cases if c.tiling == t} == {
        (E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2), (E5M2, E5M2)}
  assert {c.out_dtype for c in cases} == {"bfloat16", "float16", "float32"}
  ms, ns, ks = ({c.a_shape[0] for c in cases}, {c.b_shape[0] for c in cases},
                {c.a_shape[1] for c in cases})
  assert any(m % 128 for m in ms) and any(n % 128 for n in ns)     # partial tiles
  assert any(k % 128 for k in ks) and any(k % 32 for k in ks)      # partial K stage / block
  assert min(ks) < 128 and max(ks) > 4 * 128                       # one stage; the ring wraps
  assert all(c.layout == "NT" for c in cases)
  assert "e4m3 x e5m2" in " ".join(c.describe() for c in cases)
  assert selftest.cases("mxfp8", "sm90") == cases                 # one kernel, one set


def test_a_correct_kernel_passes_and_the_op_runs_it(unproven, rng):
  a, a_s, b, b_s = _operands(rng, 72, 40, 96)
  with warnings.catch_warnings():
    warnings.simplefilter("error", SelfTestFailure)
    assert targets_in(lambda *o: jax_sm100.mxfp8_matmul(*o), a, a_s, b, b_s) == [_mxfp8.TARGET]
  (result,) = [r for r in selftest.status() if r.family == "mxfp8"]
  assert result.passed and len(result.cases) == len(selftest.cases("mxfp8", "cpu_ffi"))
  ran = [case for case, _ in unproven if case.family == "mxfp8"]
  assert len(ran) == len(result.cases)
  got = jax_sm100.mxfp8_matmul(a, a_s, b, b_s, out_dtype=jnp.float32)
  ref, absp = _f64_product(a, a_s, b, b_s)
  assert_matmul_close(got, ref, absp, 96, jnp.float32)


def test_a_misaligned_scale_fails_and_sends_the_family_to_the_reference(unproven, monkeypatch,
                                                                         rng):
  # The planted fault: the kernel reads b's scales one 32-element block off.
  real = selftest.launch_kernel

  def misaligned(case, a, b, c):
    if case.family != "mxfp8":
      return real(case, a, b, c)
    a, a_s, b, b_s = _mxfp8._selftest_operands(case, a, b)
    b_s = np.roll(b_s.view(np.uint8), 1, axis=1).view(b_s.dtype)
    out = np.dtype(jnp.dtype(case.out_dtype))
    return jax.jit(_mxfp8.kernel(out, case.tiling[1]))(a, a_s, b, b_s)

  monkeypatch.setattr(selftest, "launch_kernel", misaligned)
  a, a_s, b, b_s = _operands(rng, 72, 40, 96)
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    targets = targets_in(lambda *o: jax_sm100.mxfp8_matmul(*o), a, a_s, b, b_s)
  assert targets == []
  failures = self_test_failures(record)
  assert len(failures) == 1 and "mxfp8" in str(failures[0].message)
  assert "FAILED its known-answer self-test" in str(failures[0].message)
  (result,) = [r for r in selftest.status() if r.family == "mxfp8"]
  assert not result.passed and len(result.cases) == 1          # stopped at the first case
  text = str(tuning.explain(lambda *o: jax_sm100.mxfp8_matmul(*o), a, a_s, b, b_s))
  assert "reference" in text and "self-test" in text
  got = jax_sm100.mxfp8_matmul(a, a_s, b, b_s, out_dtype=jnp.float32)   # the reference path
  ref, absp = _f64_product(a, a_s, b, b_s)
  assert_matmul_close(got, ref, absp, 96, jnp.float32)


def test_the_report_lists_the_mxfp8_cases(unproven):
  text, ok = selftest.report(families=["mxfp8"], seed=11)
  assert ok, text
  rows = [l for l in text.splitlines() if re.match(r"^128x(128|256) c1 +NT ", l)]
  assert len(rows) == len(selftest.cases("mxfp8", "cpu_ffi")) and all(l.endswith("pass") for l in rows)
  assert "the CPU handlers of jax_sm100_mxfp8_gemm" in text
