// Activation-backward (dact) kernel instantiations of the sm90 GEMM for __half inputs and
// outputs (2 tilings x 4 activations). One file per dtype so they compile in parallel.
#include "sm90/gemm_inst.h"

namespace jax_sm100::host {
template std::string sm90_gemm_dact_launch<__half>(const GemmProblem&, int, cudaStream_t);
}  // namespace jax_sm100::host
