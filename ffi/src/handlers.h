// Declarations of every XLA FFI handler symbol the extension exports.
// Each handler is defined (XLA_FFI_DEFINE_HANDLER_SYMBOL) in one .cu file under
// ffi/src/ and listed in kHandlers in module.cc.
#pragma once

#include "xla/ffi/api/c_api.h"

#if JAX_SM100_WITH_CUDA
extern "C" {
// (handlers are added here as their kernels land)
}
#endif
