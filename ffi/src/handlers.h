// Declarations of every XLA FFI handler symbol the extension exports.
// Each handler is defined (XLA_FFI_DEFINE_HANDLER_SYMBOL) in one .cu file under
// ffi/src/ and listed in kHandlers in module.cc.
#pragma once

#include "xla/ffi/api/c_api.h"

#if JAX_SM100_WITH_CUDA
extern "C" {
// (handlers are added here as their kernels land)
XLA_FFI_Error* JaxSm100QuantizeFp8(XLA_FFI_CallFrame* call_frame);  // quantize_ffi.cu
XLA_FFI_Error* JaxSm100QuantizeFp8Dual(XLA_FFI_CallFrame* call_frame);  // quantize_ffi.cu
XLA_FFI_Error* JaxSm100Gemm(XLA_FFI_CallFrame* call_frame);          // gemm_ffi.cu
XLA_FFI_Error* JaxSm100GemmResidual(XLA_FFI_CallFrame* call_frame);  // gemm_ffi.cu
XLA_FFI_Error* JaxSm100Fp8Gemm(XLA_FFI_CallFrame* call_frame);          // fp8_ffi.cu
XLA_FFI_Error* JaxSm100Fp8GemmResidual(XLA_FFI_CallFrame* call_frame);  // fp8_ffi.cu
}
#endif
