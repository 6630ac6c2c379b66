"""What this install of jax_sm100 is, and what it would do on this machine.

`python -m jax_sm100.info` prints (and `report()` returns) the package, jax and jaxlib
versions, the compiled extension (its file, CUDA or not, the architectures with machine
code, the targets with an sm_100a kernel), the CUDA driver next to the CUDA runtime the
kernels were built with, the default device, jax_sm100.backend() and why, and for each
op the path it would take on the default device and why: each op is traced (not run) on
an example shape by jax_sm100.tuning.explain, so the answer is the ops' own dispatch
decision: 'kernel', 'xla' (XLA's own dot, where the measured dispatch prefers it) or
'reference'. On a backend never run on hardware by this project (sm100), tracing an op
the first time runs its kernel family's known-answer self-test on the device, as any
first use does, so the report shows the path the self-test leaves it on.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys

import jax
import jax.numpy as jnp

import jax_sm100
from jax_sm100 import _backend, _ffi_registry, _selftest_guard, tuning
from jax_sm100._util import cdiv

__all__ = ["OPS", "op_examples", "op_paths", "report", "main"]

# The public ops whose path the report gives (dot_general / fp8_dot_general dispatch
# to matmul / fp8_dot; mxfp8_dot and mxfp8_dot_general run mxfp8_matmul's GEMM).
OPS = ("matmul", "matmul_residual", "fp8_blockwise_matmul", "quantize_fp8_blockwise",
       "fp8_dot", "mxfp8_matmul")
# Summary order of the paths a product can take (jax_sm100._explain.Decision.path).
_PATHS = ("kernel", "xla", "reference")
DEFAULT_SHAPE = (4096, 4096, 4096)
# Distributions that give jaxlib its CUDA support (their major version is the CUDA
# runtime XLA itself uses, independent of the one the kernels were built with).
_CUDA_PLUGINS = ("jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin",
                 "jax-cuda12-pjrt")
_W = 16  # label width


def _line(label: str, value: str) -> str:
  return f"{label + ':':{_W}s} {value}"


def _call(fn):
  """fn(), or 'error: ...' where it raises (a report never fails for one item)."""
  try:
    return fn()
  except Exception as e:  # noqa: BLE001  (shown, not hidden)
    return f"error: {type(e).__name__}: {e}"


def _quiet(fn):
  """fn(), or None where it raises (optional items)."""
  try:
    return fn()
  except Exception:  # noqa: BLE001
    return None


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------

def _versions() -> list:
  try:
    import jaxlib
    jaxlib_version = jaxlib.__version__
  except (ImportError, AttributeError):
    jaxlib_version = "?"
  plugins = []
  for dist in _CUDA_PLUGINS:
    try:
      plugins.append(f"{dist} {importlib.metadata.version(dist)}")
    except importlib.metadata.PackageNotFoundError:
      pass
  return [
      _line("jax_sm100", f"{jax_sm100.__version__} "
            f"({os.path.dirname(os.path.abspath(jax_sm100.__file__))})"),
      _line("jax", f"{jax.__version__}, jaxlib {jaxlib_version}"),
      _line("jax CUDA", ", ".join(plugins) or "no jax CUDA plugin installed"),
      _line("python", f"{sys.version.split()[0]} ({sys.executable})"),
  ]


def _library_path() -> str:
  ffi = _ffi_registry._ffi
  fn = getattr(ffi, "library_path", None)
  if fn is not None:
    path = _call(lambda: str(fn()))
    if path:
      return path
  return str(getattr(ffi, "__file__", "?"))


def _extension() -> list:
  if _ffi_registry._ffi is None:
    return [_line("extension", f"NOT LOADED ({_ffi_registry.load_error}): every op "
                  "takes the reference path")]
  lines = [_line("extension", _library_path())]
  if _ffi_registry.has_cuda():
    lines.append(_line("CUDA kernels", "yes, machine code for "
                       + (", ".join(_ffi_registry.cuda_archs()) or "no architecture")))
    lines.append(_line("sm_100a kernels", ", ".join(sorted(_ffi_registry.sm100_targets()))
                       or "no sm_100a kernel"))
  else:
    lines.append(_line("CUDA kernels", "no (built without CUDA: the reference path, "
                       "and the CPU handlers for JAX_SM100_BACKEND=cpu_ffi)"))
  lines.append(_line("FFI targets", ", ".join(_ffi_registry.target_names()) or "none"))
  return lines


def _cuda() -> list:
  driver, runtime = _backend.cuda_driver_version(), _backend.cuda_runtime_version()
  if driver is None:
    have = "unknown (this build of the extension cannot query it)"
  elif driver > 0:
    have = f"supports CUDA {_backend.cuda_version_str(driver)} ({driver})"
  elif not _ffi_registry.has_cuda():
    have = "not queried (the extension was built without CUDA)"
  else:
    have = "none found (cudaDriverGetVersion: 0)"
  if runtime is None:
    need = "unknown (this build of the extension cannot say)"
  elif runtime <= 0:
    need = "none (built without CUDA)"
  else:
    major = runtime // 1000
    floor = _backend.DRIVER_FLOOR.get(major)
    need = (f"built with CUDA {_backend.cuda_version_str(runtime)}: need a driver for "
            f"CUDA {major}.0 or newer" + (f" (>= {floor})" if floor else ""))
  old = _backend.driver_too_old()
  check = ("not needed (no CUDA kernels)" if not _ffi_registry.has_cuda()
           else "not checked (this build cannot say)" if runtime is None or driver is None
           else "not checked (no driver answered: no CUDA device can use the kernels)"
           if driver <= 0
           else "ok" if old is None else f"TOO OLD: {old}")
  lines = [_line("CUDA driver", have), _line("kernels", need), _line("driver check", check)]
  # What the CUDA stack of jaxlib and nvidia-smi say (the self-test report's sources).
  from jax_sm100 import selftest
  cuda = _quiet(selftest._cuda_versions)
  if cuda:
    lines.append(_line("jaxlib CUDA", cuda))
  smi = _quiet(selftest._nvidia_smi)
  if smi:
    lines.append(_line("nvidia-smi", f"{smi} (name, driver)"))
  return lines


def _device() -> list:
  try:
    dev = _backend._default_device()
  except Exception as e:  # noqa: BLE001  (no usable jax backend)
    return [_line("device", f"error: {type(e).__name__}: {e}")]
  cc = _quiet(lambda: _backend._compute_capability(dev))
  kind = getattr(dev, "device_kind", "?")
  desc = f"{kind} ({dev.platform}"
  desc += f", compute capability {cc[0]}.{cc[1]})" if cc else ", not a CUDA GPU)"
  count = _call(lambda: f"{jax.device_count()} device(s)")
  lines = [_line("device", f"{desc}; {count}")]
  version = getattr(getattr(dev, "client", None), "platform_version", None)
  if version:
    lines.append(_line("platform", str(version)))
  return lines


def _backend_lines() -> list:
  try:
    name = jax_sm100.backend()
  except ValueError as e:  # an invalid switch: every op raises the same when traced
    name, why = "error", str(e)
  if name == "reference":
    why = _call(_backend.why_reference)
  elif name == "cpu_ffi":
    why = "JAX_SM100_BACKEND=cpu_ffi: the FFI targets' CPU handlers (no GPU kernel)"
  elif name in _selftest_guard.unproven_backends():
    why = ("kernels compiled, SASS-checked, emulated, self-tested on first use (each kernel "
           "family's known-answer self-test), never run on hardware here")
  elif name != "error":
    why = "the compiled kernels for this GPU"
  lines = [_line("backend", f"{name}: {why}")]
  switches = [f"{v}={os.environ[v]}" for v in
              (_backend.FORCE_REFERENCE_ENV, _backend.BACKEND_ENV,
               _ffi_registry.DISABLE_TARGETS_ENV, _selftest_guard.SELFTEST_ENV)
              if os.environ.get(v)]
  lines.append(_line("switches", ", ".join(switches) or "none set"))
  lines.append(_line("self-test", f"{'on' if _selftest_guard.enabled() else 'off'} "
                     "(first use on unproven backends: "
                     f"{', '.join(sorted(_selftest_guard.unproven_backends()))})"))
  return lines


# ---------------------------------------------------------------------------
# Each op's path
# ---------------------------------------------------------------------------

def op_examples(m: int, n: int, k: int) -> dict:
  """{op name: (fn, example arguments)}: one call of each op in OPS on an m x n x k
  product, as jax.ShapeDtypeStruct (bf16 inputs; e4m3 with 1x128 / 128x128 scales for
  the FP8 GEMM; quantize_fp8_blockwise on the m x k activations in 1x128 blocks; e4m3
  with one UE8M0 scale per 32 elements of K for the MXFP8 GEMM)."""
  s = jax.ShapeDtypeStruct
  bf16, e4m3, f32, e8m0 = jnp.bfloat16, jnp.float8_e4m3fn, jnp.float32, jnp.float8_e8m0fnu
  return {
      "matmul": (jax_sm100.matmul, (s((m, k), bf16), s((k, n), bf16))),
      "matmul_residual": (jax_sm100.matmul_residual,
                          (s((m, k), bf16), s((k, n), bf16), s((m, n), bf16))),
      "fp8_blockwise_matmul": (jax_sm100.fp8_blockwise_matmul,
                               (s((m, k), e4m3), s((m, cdiv(k, 128)), f32), s((n, k), e4m3),
                                s((cdiv(n, 128), cdiv(k, 128)), f32))),
      "quantize_fp8_blockwise": (jax_sm100.quantize_fp8_blockwise, (s((m, k), bf16),)),
      "fp8_dot": (jax_sm100.fp8_dot, (s((m, k), bf16), s((k, n), bf16))),
      "mxfp8_matmul": (jax_sm100.mxfp8_matmul,
                       (s((m, k), e4m3), s((m, cdiv(k, 32)), e8m0), s((n, k), e4m3),
                        s((n, cdiv(k, 32)), e8m0))),
  }


def op_paths(shape=DEFAULT_SHAPE) -> dict:
  """{op name: tuning.explain(...) of its example call (op_examples), or the exception
  that tracing it raised}. Traced on the default device, not run."""
  out = {}
  for name, (fn, args) in op_examples(*shape).items():
    try:
      out[name] = tuning.explain(fn, *args)
    except Exception as e:  # noqa: BLE001  (reported per op)
      out[name] = e
  return out


def _summary(decisions) -> str:
  """The op's path: 'kernel', 'xla' or 'reference' when all its products take it, else
  the paths taken, e.g. 'kernel and reference (per product below)'."""
  paths = {d.path for d in decisions}
  if not paths:
    return "no jax_sm100 product"
  if len(paths) == 1:
    return paths.pop()
  order = sorted(paths, key=lambda p: _PATHS.index(p) if p in _PATHS else len(_PATHS))
  return " and ".join(order) + " (per product below)"


def _op_lines(paths: dict, shape) -> list:
  m, n, k = shape
  lines = [f"ops on the default device (traced, not run; bf16/fp8/mxfp8 example, M x N x K = "
           f"{m} x {n} x {k}):"]
  for name in OPS:
    res = paths[name]
    if isinstance(res, Exception):
      lines.append(f"  {name}: error: {type(res).__name__}: {res}")
      continue
    lines.append(f"  {name}: {_summary(res)}")
    for d in res:
      lines.append(f"    {d}")
  return lines


def report(shape=DEFAULT_SHAPE) -> str:
  """The text `python -m jax_sm100.info` prints (see the module docstring)."""
  shape = tuple(int(v) for v in shape)
  lines = ["jax_sm100 install report", *_versions(), *_extension(), *_cuda(), *_device(),
           *_backend_lines(), ""]
  lines += _op_lines(op_paths(shape), shape)
  results = _selftest_guard.results()
  if results:
    lines.append("self-test results in this process:")
    for r in results:
      lines.append(f"  {r.backend} {r.family} on {r.device_kind}: "
                   + ("passed" if r.passed else f"FAILED: {r.message}")
                   + f" ({len(r.cases)} cases, seed {r.seed})")
  return "\n".join(lines)


def _shape_arg(text: str) -> tuple:
  try:
    dims = tuple(int(v) for v in text.lower().replace(",", "x").split("x"))
  except ValueError:
    dims = ()
  if len(dims) != 3 or min(dims) <= 0:
    raise argparse.ArgumentTypeError(f"expected MxNxK with positive ints, e.g. 4096x4096x4096; "
                                     f"got {text!r}")
  return dims


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m jax_sm100.info",
      description="Print jax_sm100's versions, compiled extension, CUDA driver and runtime, "
                  "default device, backend and the path each op would take here, and why.")
  parser.add_argument("--shape", type=_shape_arg, default=DEFAULT_SHAPE,
                      help="M x N x K of the example products (default 4096x4096x4096)")
  args = parser.parse_args(argv)
  print(report(args.shape), flush=True)
  return 0


if __name__ == "__main__":
  # Run in the package's own module object (not this __main__ copy).
  from jax_sm100 import info as _info
  sys.exit(_info.main())
