// Bias/activation kernel instantiations of the sm_100a GEMM for __half inputs and __half
// outputs (3 tilings x 5 activations). One file per type pair so they compile in parallel.
#include "sm100/gemm_bias_inst_impl.h"

namespace jax_sm100::host {
template std::string sm100_gemm_bias_launch<__half, __half>(const GemmProblem&, cudaStream_t);
}  // namespace jax_sm100::host
