"""The compiled part of jax_sm100: libjax_sm100_ffi.so, through its C ABI.

The library (ffi/src/c_api.cc) holds the XLA FFI handlers (CUDA kernels and their CPU
counterparts) and the registration table (ffi/src/targets.h). It uses no Python C API,
so one build serves every CPython version; this module loads it with ctypes from the
package directory and turns its answers into Python values: handler addresses become
PyCapsules for `jax.ffi.register_ffi_target` (unnamed, without destructor, as
`jax.ffi.pycapsule` makes them; the handlers live as long as the process, since
ctypes never unloads a library).

Importing raises ImportError when the library is missing, cannot be loaded (the
loader's message is in the error) or has another C ABI version than this module
expects; jax_sm100._ffi_registry catches it and every op takes the reference path.
"""
from __future__ import annotations

import ctypes
import os

# The C ABI version this module speaks (jax_sm100_abi_version() in ffi/src/c_api.cc).
ABI_VERSION = 1
LIBRARY_NAME = "jax_sm100_ffi.dll" if os.name == "nt" else "libjax_sm100_ffi.so"

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


def _load(path: str) -> ctypes.CDLL:
  try:
    # RTLD_LOCAL (ctypes' default): the library's symbols stay out of the global
    # namespace; XLA reaches the handlers only through the capsules.
    return ctypes.CDLL(path)
  except OSError as e:  # the dynamic loader's message (dlerror) names the cause
    raise ImportError(f"jax_sm100: cannot load the compiled library {path}: {e}",
                      name=__name__, path=path) from e


_lib = _load(_PATH)


def _function(name: str, restype, *argtypes):
  try:
    fn = getattr(_lib, name)
  except AttributeError:
    raise ImportError(f"jax_sm100: {_PATH} does not export {name}(): it is not the "
                      f"library this package was built with; reinstall jax_sm100",
                      name=__name__, path=_PATH) from None
  fn.restype = restype
  fn.argtypes = argtypes
  return fn


_abi_version = _function("jax_sm100_abi_version", ctypes.c_int)()
if _abi_version != ABI_VERSION:
  raise ImportError(f"jax_sm100: {_PATH} has C ABI version {_abi_version}, but "
                    f"jax_sm100._ffi expects version {ABI_VERSION}: the library and the "
                    "Python package come from different builds; reinstall jax_sm100",
                    name=__name__, path=_PATH)

_has_cuda = _function("jax_sm100_has_cuda", ctypes.c_int)
_cuda_archs = _function("jax_sm100_cuda_archs", ctypes.c_char_p)
_num_targets = _function("jax_sm100_num_targets", ctypes.c_int)
_target_name = _function("jax_sm100_target_name", ctypes.c_char_p, ctypes.c_int)
_target_has_sm100 = _function("jax_sm100_target_has_sm100", ctypes.c_int, ctypes.c_int)
_cuda_handler = _function("jax_sm100_cuda_handler", ctypes.c_void_p, ctypes.c_int)
_cpu_handler = _function("jax_sm100_cpu_handler", ctypes.c_void_p, ctypes.c_int)
_f32_to_e4m3fn = _function("jax_sm100_cpu_f32_to_e4m3fn", None, ctypes.POINTER(ctypes.c_float),
                           ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t)
_driver_version = _function("jax_sm100_cuda_driver_version", ctypes.c_int)
_runtime_version = _function("jax_sm100_cuda_runtime_version", ctypes.c_int)

# PyCapsule_New(pointer, name, destructor) through a private prototype (PYFUNCTYPE holds
# the GIL and raises the Python error it may set), so the shared
# ctypes.pythonapi.PyCapsule_New keeps whatever argtypes other code gave it.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))


def _capsule(address: int):
  return _capsule_new(address, None, None)


def _names() -> list[str]:
  return [_target_name(i).decode() for i in range(_num_targets())]


def has_cuda() -> bool:
  """True when the library was built with CUDA kernels."""
  return bool(_has_cuda())


def cuda_archs() -> list[str]:
  """GPU architectures with machine code in this build, e.g. ['sm_90a', 'sm_100a']."""
  return ["sm_" + a for a in _cuda_archs().decode().split(",") if a]


def target_names() -> list[str]:
  """Every FFI target this package defines (also in a build without CUDA)."""
  return _names()


def sm100_targets() -> list[str]:
  """Targets whose handlers have an sm_100a kernel in this build (none without sm_100a
  code)."""
  return [name for i, name in enumerate(_names()) if _target_has_sm100(i)]


def _registrations(handler) -> dict:
  regs = {}
  for i, name in enumerate(_names()):
    address = handler(i)
    if address:
      regs[name] = _capsule(address)
  return regs


def registrations() -> dict:
  """Map of FFI target name -> handler capsule, for platform CUDA ({} without CUDA)."""
  return _registrations(_cuda_handler)


def cpu_registrations() -> dict:
  """Map of FFI target name -> CPU handler capsule, for platform cpu (every build)."""
  return _registrations(_cpu_handler)


def cpu_f32_to_e4m3fn(f32: bytes) -> bytes:
  """Test hook: the CPU handlers' float32 -> float8_e4m3fn rounding (saturating,
  NaN -> 0x7f) of native-endian float32 bytes, one byte per value."""
  if not isinstance(f32, bytes):
    raise TypeError(f"cpu_f32_to_e4m3fn() takes bytes, not {type(f32).__name__}")
  n = len(f32) // 4
  src = (ctypes.c_float * n).from_buffer_copy(f32[:4 * n])  # aligned copy
  out = (ctypes.c_uint8 * n)()
  _f32_to_e4m3fn(src, out, n)
  return bytes(out)


def driver_version() -> int:
  """The installed NVIDIA driver's CUDA version (e.g. 12080 for 12.8); 0 when there is
  no driver or the library was built without CUDA."""
  return int(_driver_version())


def runtime_version() -> int:
  """The CUDA runtime version the library was built with and links statically
  (e.g. 13000 for 13.0); 0 without CUDA."""
  return int(_runtime_version())


def library_path() -> str:
  """The path of the loaded library (libjax_sm100_ffi.so)."""
  return _PATH
