"""The first-use guard of kernels never run on hardware by this project.

On a backend in _backend.UNPROVEN_BACKENDS (sm100), the first time an op is about to be
traced into a kernel of a family (jax_sm100.selftest.FAMILIES: gemm, gemm_residual,
fp8_gemm, ...), the family's known-answer cases run on the device, eagerly, even under jax.jit / vmap / grad
tracing (jax.ensure_compile_time_eval, concrete arrays). The result is kept for the
process per (device kind, backend, family). A family that fails (a wrong number, a NaN,
an exception such as a kernel trap) warns with jax_sm100.selftest.SelfTestFailure and an
error-level log line, and its ops take the reference path for the rest of the process
(tuning.explain shows why).

Switches (both documented in jax_sm100.selftest):
  JAX_SM100_SELFTEST=0 in the environment, read once when jax_sm100 is imported;
  jax_sm100.selftest.configure(enabled=False) at run time (True turns it back on).

Test hook (private): `_EXTRA_UNPROVEN`, a frozenset of backend names treated as unproven
in addition to UNPROVEN_BACKENDS, e.g. frozenset({"cpu_ffi"}), so that the guard's logic
runs on a CPU against the FFI targets' CPU handlers. Nothing reads it from the
environment.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import warnings

from jax_sm100 import _backend

SELFTEST_ENV = "JAX_SM100_SELFTEST"
_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")

logger = logging.getLogger("jax_sm100.selftest")

# Test hook: backends treated as unproven besides _backend.UNPROVEN_BACKENDS.
_EXTRA_UNPROVEN: frozenset = frozenset()


def _enabled_from_env() -> bool:
  raw = os.environ.get(SELFTEST_ENV, "")
  v = raw.strip().lower()
  if v in _ON:
    return True
  if v in _OFF:
    return False
  warnings.warn(f"jax_sm100: {SELFTEST_ENV}={raw!r} is not 0 or 1; the self-test stays on.",
                RuntimeWarning, stacklevel=2)
  return True


_enabled: bool = _enabled_from_env()
_lock = threading.RLock()
_results: dict = {}          # (device kind, backend, family) -> FamilyResult
_warned_skip: set = set()    # backends whose "self-test is off" note was logged


@dataclasses.dataclass(frozen=True)
class FamilyResult:
  """The self-test of one kernel family on one device kind and backend.

  passed: every case run passed; cases: the CaseResults run (the guard stops at the
  first failure); message: the sentence the ops' reference fallback gives (None when
  passed)."""
  family: str
  backend: str
  device_kind: str
  passed: bool
  cases: tuple
  seed: int
  message: str | None = None


def unproven_backends() -> frozenset:
  """The backends whose kernels self-test on first use."""
  return _backend.UNPROVEN_BACKENDS | _EXTRA_UNPROVEN


def enabled() -> bool:
  return _enabled


def set_enabled(value: bool) -> None:
  global _enabled
  _enabled = bool(value)


def results() -> tuple:
  """The FamilyResults of this process so far."""
  with _lock:
    return tuple(_results.values())


def reset() -> None:
  """Forgets every result (tests; a later first use runs the cases again)."""
  with _lock:
    _results.clear()
    _warned_skip.clear()


def refusal(ctx, target: str) -> str | None:
  """None when `target` may launch on ctx.backend; else why the op takes the reference.

  Called by the launch layer once a call would otherwise run the kernel. On an unproven
  backend with the self-test on, the first call per family runs its cases first.
  """
  if ctx.backend not in unproven_backends():
    return None
  if not _enabled:
    if ctx.backend not in _warned_skip:
      _warned_skip.add(ctx.backend)
      logger.warning("jax_sm100: the known-answer self-test is off (%s=0 or "
                     "jax_sm100.selftest.configure(enabled=False)): the %s kernels, never "
                     "run on hardware by this project, run unchecked.", SELFTEST_ENV,
                     ctx.backend)
    return None
  from jax_sm100 import selftest
  family = selftest.family_of(target)
  if family is None:
    return (f"{target} has no known-answer self-test, and backend {ctx.backend!r} has never "
            "been run on hardware by this project: the reference path")
  result = ensure(family, ctx.backend)
  return None if result.passed else result.message


def ensure(family: str, backend: str) -> FamilyResult:
  """The family's result on the default device, running its cases the first time."""
  dev = _backend._default_device()
  kind = str(getattr(dev, "device_kind", dev.platform))
  key = (kind, backend, family)
  with _lock:
    if key not in _results:
      _results[key] = _run(family, backend, kind)
    return _results[key]


def _run(family: str, backend: str, kind: str) -> FamilyResult:
  from jax_sm100 import selftest
  seed = selftest.current_seed()
  cases = selftest.run_family(family, backend, seed=seed, stop_at_first_failure=True,
                              path="kernel")
  failed = [r for r in cases if not r.passed]
  if not failed:
    logger.info("jax_sm100: the %s %s kernels passed their known-answer self-test on %s "
                "(%d cases, seed %d).", backend, family, kind, len(cases), seed)
    return FamilyResult(family, backend, kind, True, tuple(cases), seed)
  bad = failed[0]
  total = len(selftest.cases(family, backend))
  what = (f"raised {bad.error}" if bad.error else
          f"max abs error {bad.max_abs_err:.4g} > tolerance {bad.tol:.4g}"
          + (" (NaN or Inf in the result)" if bad.nonfinite else ""))
  msg = (f"jax_sm100: the {backend} {family} kernel FAILED its known-answer self-test on "
         f"{kind}: case {bad.case.describe()}: {what}. The {family} ops take the reference "
         f"path for the rest of this process ({total - len(cases)} of {total} cases not "
         f"run; seed {seed}).")
  if bad.error and bad.runtime_error:
    msg += (" A kernel error at run time (e.g. a trap) can leave the GPU context unusable: "
            "restart the process; JAX_SM100_FORCE_REFERENCE=1 keeps every op off the kernels.")
  msg += (" Please report it with the output of `python -m jax_sm100.selftest` "
          f"({SELFTEST_ENV}=0 skips the self-test and runs the kernels unchecked).")
  warnings.warn(msg, selftest.SelfTestFailure, stacklevel=2)
  logger.error(msg)
  return FamilyResult(family, backend, kind, False, tuple(cases), seed,
                      f"the known-answer self-test of the {backend} {family} kernel failed "
                      f"on {kind} (case {bad.case.describe()}: {what})")
