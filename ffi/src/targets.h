// The registration table: the one list of the extension's XLA FFI targets. module.cc
// hands it to Python (target_names(), registrations(), sm100_targets()); Python keeps
// no copy of it. Each handler symbol is defined (XLA_FFI_DEFINE_HANDLER_SYMBOL) in one
// *_ffi.cu file under ffi/src/; every handler validates its buffers, then dispatches on
// the device's compute capability.
//
//   X(target name, handler symbol, has an sm_100a kernel)
#pragma once

#include "xla/ffi/api/c_api.h"

#define JAX_SM100_FFI_TARGETS(X)                                   \
  X("jax_sm100_gemm", JaxSm100Gemm, false)                         \
  X("jax_sm100_gemm_residual", JaxSm100GemmResidual, false)        \
  X("jax_sm100_fp8_gemm", JaxSm100Fp8Gemm, false)                  \
  X("jax_sm100_fp8_gemm_residual", JaxSm100Fp8GemmResidual, false) \
  X("jax_sm100_quantize_fp8", JaxSm100QuantizeFp8, false)          \
  X("jax_sm100_quantize_fp8_dual", JaxSm100QuantizeFp8Dual, false)

#if JAX_SM100_WITH_CUDA
extern "C" {
#define JAX_SM100_DECLARE_HANDLER(name, symbol, sm100) \
  XLA_FFI_Error* symbol(XLA_FFI_CallFrame* call_frame);
JAX_SM100_FFI_TARGETS(JAX_SM100_DECLARE_HANDLER)
#undef JAX_SM100_DECLARE_HANDLER
}
#endif
