// FP8 bias/activation kernels of the sm90 GEMM for Activation::kGeluTanh, every non-residual
// form (fp8_gemm_forms.h). One unit per activation so they compile in parallel.
#include "sm90/fp8_gemm_forms.h"

namespace jax_sm100::host {
static_assert(static_cast<int>(kernels::Activation::kGeluTanh) == 2);
template std::string sm90_fp8_bias_gemm_launch_act<2>(const Fp8GemmProblem&, const float*, int, cudaStream_t);
}  // namespace jax_sm100::host
