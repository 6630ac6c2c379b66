// Small helpers every CUDA FFI handler shares: CUDA errors as FFI errors (shapes in
// messages: common/ffi_args.h; the configuration checks: common/ffi_checks.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/ffi_args.h"  // dims_str
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

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
