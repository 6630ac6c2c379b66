// Small helpers every FFI handler shares: shapes in messages, CUDA errors as FFI errors.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// "(d0, d1, ...)" for error messages.
inline std::string dims_str(xla::ffi::Span<const int64_t> d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

/// The sticky-free CUDA error of the last launch as an FFI error (Success when none).
inline xla::ffi::Error last_cuda_error(const std::string& who) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return xla::ffi::Error::Success();
  return xla::ffi::Error::Internal(who + ": kernel launch failed: " + cudaGetErrorString(e));
}

/// The error for a device whose architecture has no kernel for this target.
inline xla::ffi::Error no_kernel_for_arch(const std::string& who, int cc_major, int cc_minor) {
  return xla::ffi::Error(xla::ffi::ErrorCode::kUnimplemented,
                         who + ": no kernel for this GPU (compute capability " +
                             std::to_string(cc_major) + "." + std::to_string(cc_minor) +
                             "); the ops take the reference path there");
}

}  // namespace jax_sm100::host
