"""Known-answer self-test of the kernels on the device at hand.

The sm_100a (Blackwell) kernels were compiled, SASS-checked and emulated, but never run
on hardware by this project. So on a backend in jax_sm100._backend.UNPROVEN_BACKENDS
(sm100), the first use of each kernel family in a process (an op about to be traced
into one of its FFI targets) first runs the family's fixed set of products on the
device and compares them with float64 NumPy. The families and their cases are in
jax_sm100/_selftest_families.py (FAMILIES, re-exported here); this module runs them.
The bf16/fp16 GEMM families: several shapes with partial tiles, the four transpose
layouts, bf16/fp16 inputs, bf16/fp16/f32 outputs, batched and broadcast operands,
alpha/beta (beta == 0 with NaN in C), and every tiling the family's kernel has (the 2-SM
pair included); the FP8 families: e4m3 products with blockwise scales against float64 of
the dequantized inputs, and the quantizers against the recipe bit for bit; the MXFP8
family: e4m3/e5m2 products with UE8M0 scales per 32 elements against float64 of the
dequantized inputs. A wrong number, a NaN or an exception (a kernel trap reaches Python
as an XLA runtime error) warns with SelfTestFailure and an error-level log line naming
the family, tiling, case and error, and sends that family's ops to the reference path
for the rest of the process (tuning.explain says why). The result is kept per (device
kind, backend, family) for the process.

Switch: JAX_SM100_SELFTEST=0 in the environment (read once, at import) or
configure(enabled=False) skips the self-test; the kernels then run unchecked.

`python -m jax_sm100.selftest` runs every family's cases on the default device through
the path the ops take there (kernel, CPU handlers or reference: the report says which)
and prints a report to paste into an issue; exit status 0 only when every case passed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import secrets
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax_sm100 import _backend, _explain, _ffi_registry, _selftest_guard
from jax_sm100._selftest_families import _SHORT, FAMILIES, Case, Family
from jax_sm100._selftest_families import QuantizeCase  # noqa: F401  (re-exported)

__all__ = ["SelfTestFailure", "Case", "CaseResult", "Family", "FAMILIES", "configure",
           "enabled", "current_seed", "status", "cases", "run_family", "report", "main"]


class SelfTestFailure(RuntimeWarning):
  """A kernel family failed its known-answer self-test; its ops take the reference path."""


@dataclasses.dataclass(frozen=True)
class CaseResult:
  """max_abs_err against float64 and the case's tolerance (for a family whose tolerance
  is per element: the error and tolerance of the element nearest its bound); error: the
  exception (type:
  message) when the launch raised; runtime_error: it was an XLA runtime error (a kernel
  trap or launch failure); path: 'kernel' or 'reference'."""
  case: Case
  path: str
  max_abs_err: float = math.nan
  tol: float = math.nan
  nonfinite: bool = False
  error: str | None = None
  runtime_error: bool = False

  @property
  def passed(self) -> bool:
    return self.error is None and not self.nonfinite and self.max_abs_err <= self.tol


# ---------------------------------------------------------------------------
# Running the cases
# ---------------------------------------------------------------------------

_seed: int | None = None


def configure(*, enabled: bool | None = None, seed: int | None = None) -> None:
  """enabled: False skips the first-use self-test (the unproven kernels then run
  unchecked), True turns it on again (the default, unless JAX_SM100_SELFTEST=0 was set
  at import). seed: the seed of the cases' random data (default: one drawn per process,
  printed with every result). Results already kept stay (a family runs once per process)."""
  global _seed
  if enabled is not None:
    if not isinstance(enabled, (bool, np.bool_)):
      raise ValueError(f"jax_sm100.selftest.configure(enabled=...) takes a bool; got {enabled!r}.")
    _selftest_guard.set_enabled(bool(enabled))
  if seed is not None:
    _seed = int(seed)


def enabled() -> bool:
  """Whether the first-use self-test runs."""
  return _selftest_guard.enabled()


def current_seed() -> int:
  """The seed of the cases' data in this process."""
  global _seed
  if _seed is None:
    _seed = secrets.randbits(31)
  return _seed


def status() -> tuple:
  """The first-use self-test results of this process (_selftest_guard.FamilyResult)."""
  return _selftest_guard.results()


def family_of(target: str) -> str | None:
  """The family whose self-test guards FFI target `target` (None: none does)."""
  for fam in FAMILIES.values():
    if target in fam.targets:
      return fam.name
  return None


def cases(family: str, backend: str | None = None) -> list:
  """The family's cases on `backend` (default: backend())."""
  fam = FAMILIES[family]
  return fam.make_cases(fam.tilings(backend or _backend.backend()))


def _data(case: Case, rng):
  """Normal(0, 1) operands already rounded to their dtypes (exact in float64)."""
  def arr(shape, dtype):
    return (rng.standard_normal(shape).astype(np.float32)).astype(jnp.dtype(dtype))
  a, b = arr(case.a_shape, case.in_dtype), arr(case.b_shape, case.in_dtype)
  c = None
  if case.c_shape is not None:
    c = (np.full(case.c_shape, np.nan, np.float32).astype(jnp.dtype(case.out_dtype))
         if case.c_nan else arr(case.c_shape, case.out_dtype))
  return a, b, c


def launch_kernel(case: Case, a, b, c):
  """Runs `case` on its family's kernel (the one place the self-test launches one; tests
  replace it to plant faults)."""
  return FAMILIES[case.family].kernel(case, a, b, c)


def launch_reference(case: Case, a, b, c):
  """Runs `case` on the reference path (where the ops take it)."""
  return FAMILIES[case.family].reference(case, a, b, c)


def _is_runtime_error(e: BaseException) -> bool:
  return any(t.__name__ in ("XlaRuntimeError", "JaxRuntimeError") for t in type(e).__mro__)


def run_case(case: Case, path: str, rng) -> CaseResult:
  """Runs one case on `path` ('kernel' or 'reference') on the default device, eagerly
  (also while a caller is being traced), and compares with float64."""
  a, b, c = _data(case, rng)
  want, tol = FAMILIES[case.family].expected(case, a, b, c)
  dev = _backend._default_device()
  launch = launch_kernel if path == "kernel" else launch_reference
  token = _explain._RECORDER.set(None)  # the self-test's launches are not the caller's
  try:
    with jax.ensure_compile_time_eval():
      ops = [None if x is None else jax.device_put(x, dev) for x in (a, b, c)]
      got = np.asarray(jax.block_until_ready(launch(case, *ops)))
  except Exception as e:  # a trap or launch failure included: report, never raise
    msg = " ".join(str(e).split())
    return CaseResult(case, path, tol=tol, error=f"{type(e).__name__}: {msg[:400]}",
                      runtime_error=_is_runtime_error(e))
  finally:
    _explain._RECORDER.reset(token)
  if got.shape != want.shape or got.dtype != np.dtype(jnp.dtype(case.out_dtype)):
    return CaseResult(case, path, tol=tol, error=f"result {got.shape} {got.dtype}, expected "
                      f"{want.shape} {case.out_dtype}")
  got64 = got.astype(np.float64)
  finite = bool(np.isfinite(got64).all())
  if not finite:
    return CaseResult(case, path, math.inf, float(np.max(tol)), nonfinite=True)
  diff = np.abs(got64 - want)
  if np.ndim(tol) == 0:
    return CaseResult(case, path, float(np.nanmax(diff)), float(tol))
  worst = np.unravel_index(int(np.nanargmax(diff / tol)), diff.shape)
  return CaseResult(case, path, float(diff[worst]), float(tol[worst]))


def _path(family: str, backend: str) -> tuple[str, str | None]:
  """('kernel', None) when the family's targets launch on `backend`, else
  ('reference', why)."""
  if backend == "reference":
    return "reference", f"backend() is 'reference': {_backend.why_reference()}"
  ctx = _backend.context()
  for t in FAMILIES[family].targets:
    why = ctx.why_not(t)
    if why is not None:
      return "reference", why
  return "kernel", None


def run_family(family: str, backend: str | None = None, *, seed: int | None = None,
               stop_at_first_failure: bool = False, path: str | None = None) -> list:
  """Runs the family's cases through `path` ('kernel' or 'reference'; default: the path
  its ops take on `backend`, default backend()); a list of CaseResult."""
  backend = backend or _backend.backend()
  path = path or _path(family, backend)[0]
  base = current_seed() if seed is None else seed
  out = []
  for i, case in enumerate(cases(family, backend)):
    r = run_case(case, path, np.random.default_rng([base, i]))
    out.append(r)
    if stop_at_first_failure and not r.passed:
      break
  return out


# ---------------------------------------------------------------------------
# The report (python -m jax_sm100.selftest)
# ---------------------------------------------------------------------------

_BACKEND_WORDS = {
    "sm100": "the sm_100a kernels (compiled, SASS-checked, emulated, self-tested on first "
             "use, never run on hardware here)",
    "sm90": "the sm_90a kernels",
    "cpu_ffi": "the FFI targets' CPU handlers (plain C++ on the host; no GPU kernel ran)",
}


def _cuda_versions() -> str | None:
  """CUDA runtime / driver versions as jaxlib's CUDA plugin reports them (None: no plugin)."""
  try:
    from jax._src.lib import cuda_versions as cv
  except ImportError:
    return None
  if cv is None:
    return None
  parts = []
  for label, fn in (("CUDA runtime", "cuda_runtime_get_version"),
                    ("CUDA driver API", "cuda_driver_get_version"),
                    ("cuDNN", "cudnn_get_version")):
    try:
      parts.append(f"{label} {getattr(cv, fn)()}")
    except Exception:  # not in this jaxlib, or no driver
      pass
  return ", ".join(parts) or None


def _nvidia_smi() -> str | None:
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return None
  lines = [l.strip() for l in out.stdout.splitlines() if l.strip()]
  return "; ".join(lines) if out.returncode == 0 and lines else None


def _environment(backend: str) -> list:
  import jax_sm100
  dev = _backend._default_device()
  cc = _backend._compute_capability(dev)
  lines = [f"device:      {getattr(dev, 'device_kind', '?')} ({dev.platform}"
           + (f", compute capability {cc[0]}.{cc[1]}" if cc else "")
           + f"; {jax.device_count()} device(s))"]
  lines.append(f"platform:    {getattr(dev.client, 'platform_version', '?')}")
  cuda = _cuda_versions()
  if cuda:
    lines.append(f"cuda:        {cuda}")
  smi = _nvidia_smi()
  if smi:
    lines.append(f"nvidia-smi:  {smi} (name, driver)")
  try:
    import jaxlib
    jaxlib_version = jaxlib.__version__
  except (ImportError, AttributeError):
    jaxlib_version = "?"
  lines.append(f"versions:    jax {jax.__version__}, jaxlib {jaxlib_version}, jax_sm100 "
               f"{jax_sm100.__version__}, numpy {np.__version__}, python "
               f"{sys.version.split()[0]}")
  if _ffi_registry._ffi is None:
    ext = f"not loaded ({_ffi_registry.load_error})"
  elif _ffi_registry.has_cuda():
    ext = (f"CUDA archs {', '.join(_ffi_registry.cuda_archs()) or 'none'}; sm_100a kernels: "
           f"{', '.join(sorted(_ffi_registry.sm100_targets())) or 'none'}")
  else:
    ext = "built without CUDA kernels"
  lines.append(f"extension:   {ext}")
  words = _BACKEND_WORDS.get(backend) or (
      f"the pure-JAX reference path: no kernel ran ({_backend.why_reference()})")
  lines.append(f"backend:     {backend}: {words}")
  guard = "on" if enabled() else "off"
  lines.append(f"first-use self-test: {guard} (unproven backends: "
               f"{', '.join(sorted(_selftest_guard.unproven_backends()))})")
  return lines


def report(backend: str | None = None, families=None, seed: int | None = None
           ) -> tuple[str, bool]:
  """Runs every case of `families` (default: all) on the default device through the path
  the ops take on `backend` (default: backend()); (report text, all passed)."""
  backend = backend or _backend.backend()
  seed = current_seed() if seed is None else seed
  lines = ["jax_sm100 known-answer self-test", *_environment(backend), f"seed:        {seed}"]
  all_ok = True
  header = (f"{'tiling':12s} {'layout':6s} {'dtypes':10s} {'operands':54s} "
            f"{'max abs err':>11s} {'tolerance':>10s}  result")
  for name in families or FAMILIES:
    path, why = _path(name, backend)
    fam = FAMILIES[name]
    if path == "reference":
      where = f"REFERENCE, no kernel ran: {why}"
    elif backend == "cpu_ffi":
      where = f"the CPU handlers of {', '.join(fam.targets)} (no GPU kernel ran)"
    else:
      where = f"the {backend} kernel ({', '.join(fam.targets)})"
    results = run_family(name, backend, seed=seed)
    passed = sum(r.passed for r in results)
    all_ok &= passed == len(results)
    lines += ["", f"family {name}: path {where}", header]
    for r in results:
      c = r.case
      scal = (f" a={c.alpha:g} b={c.beta:g}" if c.c_shape is not None and getattr(c, "show_scalars", True)
              else "")
      ops = (c.shapes() + scal)
      result = ("pass" if r.passed else f"FAIL: {r.error}" if r.error
                else "FAIL (NaN or Inf)" if r.nonfinite else "FAIL")
      lines.append(f"{'%dx%d c%d' % c.tiling:12s} {c.layout:6s} "
                   f"{_SHORT[c.in_dtype] + '->' + _SHORT[c.out_dtype]:10s} {ops:54s} "
                   f"{r.max_abs_err:11.3e} {r.tol:10.3e}  {result}")
      if r.runtime_error:
        lines.append("  (an XLA runtime error, e.g. a kernel trap: the GPU context may be "
                     "unusable, so the cases after it may fail for that reason alone)")
    lines.append(f"family {name}: {passed} of {len(results)} cases passed")
  lines += ["", "RESULT: " + ("all cases passed" if all_ok else "FAILED")]
  return "\n".join(lines), all_ok


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m jax_sm100.selftest",
      description="Run jax_sm100's known-answer self-test on the default device and print "
                  "a report to paste into an issue. Exit status 0 only if every case passed.")
  parser.add_argument("--seed", type=int, default=None, help="seed of the random data")
  parser.add_argument("--family", action="append", choices=sorted(FAMILIES),
                      help="run only this family (repeatable; default: all)")
  args = parser.parse_args(argv)
  text, ok = report(families=args.family, seed=args.seed)
  print(text, flush=True)
  return 0 if ok else 1


if __name__ == "__main__":
  # Run in the package's own module object (not this __main__ copy).
  from jax_sm100 import selftest as _selftest
  sys.exit(_selftest.main())
