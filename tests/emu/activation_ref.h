// The activations of the fused bias/activation epilogues in float64, for the emulator
// tests' references (sm100_gemm_bias_emu_test.cc, sm100_fp8_bias_emu_test.cc): the
// formulas of ffi/include/jax_sm100/kernels/common/activation.h, evaluated independently of
// its fp32 code, and each activation's name for the case lines.
#pragma once

#include <cmath>

#include "jax_sm100/kernels/common/activation.h"

namespace jax_sm100::emu {

inline const char* act_name(kernels::Activation a) {
  switch (a) {
    case kernels::Activation::kRelu: return "relu";
    case kernels::Activation::kGeluTanh: return "gelu_tanh";
    case kernels::Activation::kGeluErf: return "gelu_erf";
    case kernels::Activation::kSilu: return "silu";
    default: return "none";
  }
}

/// act(z) in float64.
inline double act64(kernels::Activation a, double z) {
  switch (a) {
    case kernels::Activation::kRelu: return z > 0 ? z : 0;
    case kernels::Activation::kGeluTanh:
      return 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
    case kernels::Activation::kGeluErf: return 0.5 * z * (1 + std::erf(z * 0.7071067811865476));
    case kernels::Activation::kSilu: return z / (1 + std::exp(-z));
    default: return z;
  }
}

}  // namespace jax_sm100::emu
