// sm90 launch unit of the FP8 bias/activation GEMM: the activation picks the unit
// (fp8_bias_inst_<activation>.cu) whose kernels the form then picks (fp8_gemm_forms.h).
#include "sm90/fp8_bias_launch.h"

#include "jax_sm100/kernels/common/activation.h"

namespace jax_sm100::host {

static_assert(kernels::kNumActivations == 5, "one instantiation unit per activation");

std::string sm90_fp8_bias_gemm_launch(const Fp8GemmProblem& pr, const float* bias, int32_t activation,
                                      int num_sms, cudaStream_t stream) {
  if (pr.c != nullptr) return "the FP8 bias/activation epilogue takes no residual operand";
  switch (activation) {
    case 0: return sm90_fp8_bias_gemm_launch_act<0>(pr, bias, num_sms, stream);
    case 1: return sm90_fp8_bias_gemm_launch_act<1>(pr, bias, num_sms, stream);
    case 2: return sm90_fp8_bias_gemm_launch_act<2>(pr, bias, num_sms, stream);
    case 3: return sm90_fp8_bias_gemm_launch_act<3>(pr, bias, num_sms, stream);
    case 4: return sm90_fp8_bias_gemm_launch_act<4>(pr, bias, num_sms, stream);
  }
  return "unknown activation code " + std::to_string(activation);
}

}  // namespace jax_sm100::host
