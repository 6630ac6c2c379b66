// Activation-backward kernel instantiations of the sm_100a GEMM for __half inputs and
// outputs (2 tilings x 4 activations). One file per input type so they compile in parallel.
#include "sm100/gemm_dact_inst_impl.h"

namespace jax_sm100::host {
template std::string sm100_gemm_dact_launch<__half>(const GemmProblem&, cudaStream_t);
}  // namespace jax_sm100::host
