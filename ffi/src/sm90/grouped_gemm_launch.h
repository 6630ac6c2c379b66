// Host side of the sm90 grouped (mixture-of-experts) GEMMs: the launch entry points the
// handlers (ffi/src/grouped_ffi.cu) call on a compute capability 9.0 device with the
// problems they validated (common/grouped_problem.h). group_sizes is read on the device
// only: no host synchronisation, safe inside CUDA graphs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"

namespace jax_sm100::host {

/// "" when the sm90 grouped kernels are compiled for `tiling`, else a sentence naming the
/// valid set.
std::string check_sm90_grouped_tiling(const GroupedTiling& tiling);

/// M-grouped GEMM (forward / lhs gradient of ragged_dot). Returns "" or an error sentence.
std::string sm90_grouped_gemm_launch(const GroupedGemmProblem& prob, int num_sms,
                                     cudaStream_t stream);

/// K-grouped GEMM (rhs gradient of ragged_dot). Returns "" or an error sentence.
std::string sm90_kgrouped_gemm_launch(const KGroupedGemmProblem& prob, int num_sms,
                                      cudaStream_t stream);

/// FP8 M-grouped GEMM (blockwise scales). Returns "" or an error sentence.
std::string sm90_fp8_grouped_gemm_launch(const Fp8GroupedGemmProblem& prob, int num_sms,
                                         cudaStream_t stream);

/// The launchers of one (input T, output Out) pair, defined in sm90/grouped_gemm_inst.h
/// and instantiated per input type in grouped_gemm_inst_<in>.cu; the entry points above
/// dispatch on the problem's types.
template <class T, class Out>
std::string sm90_grouped_gemm_launch_typed(const GroupedGemmProblem& prob, int num_sms,
                                           cudaStream_t stream);
template <class T, class Out>
std::string sm90_kgrouped_gemm_launch_typed(const KGroupedGemmProblem& prob, int num_sms,
                                            cudaStream_t stream);

#define JAX_SM100_GROUPED_EXTERN(T, Out)                                                   \
  extern template std::string sm90_grouped_gemm_launch_typed<T, Out>(                      \
      const GroupedGemmProblem&, int, cudaStream_t);                                       \
  extern template std::string sm90_kgrouped_gemm_launch_typed<T, Out>(                     \
      const KGroupedGemmProblem&, int, cudaStream_t);
JAX_SM100_GROUPED_EXTERN(__nv_bfloat16, __nv_bfloat16)
JAX_SM100_GROUPED_EXTERN(__nv_bfloat16, __half)
JAX_SM100_GROUPED_EXTERN(__nv_bfloat16, float)
JAX_SM100_GROUPED_EXTERN(__half, __nv_bfloat16)
JAX_SM100_GROUPED_EXTERN(__half, __half)
JAX_SM100_GROUPED_EXTERN(__half, float)
#undef JAX_SM100_GROUPED_EXTERN

}  // namespace jax_sm100::host
