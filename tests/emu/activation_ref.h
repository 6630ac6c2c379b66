// The activations of the fused bias/activation epilogues in float64, for the emulator
// tests' references (sm100_gemm_bias_emu_test.cc, sm100_fp8_bias_emu_test.cc,
// sm100_gemm_dact_emu_test.cc) and their derivatives: the
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

/// act'(z) in float64 (relu's taken as 0 at z == 0, as jax's).
inline double dact64(kernels::Activation a, double z) {
  switch (a) {
    case kernels::Activation::kRelu: return z > 0 ? 1 : 0;
    case kernels::Activation::kGeluTanh: {
      const double c = 0.7978845608028654, t = std::tanh(c * (z + 0.044715 * z * z * z));
      return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z);
    }
    case kernels::Activation::kGeluErf:
      return 0.5 * (1 + std::erf(z * 0.7071067811865476)) + z * std::exp(-0.5 * z * z) * 0.3989422804014327;
    case kernels::Activation::kSilu: {
      const double s = 1 / (1 + std::exp(-z));
      return s * (1 + z * (1 - s));
    }
    default: return 1;
  }
}

}  // namespace jax_sm100::emu
