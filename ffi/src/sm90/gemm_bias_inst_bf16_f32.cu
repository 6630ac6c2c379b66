// Bias/activation kernel instantiations of the sm90 GEMM for __nv_bfloat16 inputs and float outputs
// (every tiling x 5 activations). One file per dtype pair so they compile in parallel.
#include "sm90/gemm_inst.h"

namespace jax_sm100::host {
template std::string sm90_gemm_bias_launch<__nv_bfloat16, float>(const GemmProblem&, int, cudaStream_t);
}  // namespace jax_sm100::host
