// Host side of the sm_100a GEMM: the launch entry point the handler calls on a compute
// capability 10.0 device, taking the problem it validated (common/gemm_problem.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "common/gemm_problem.h"

namespace jax_sm100::host {

/// The (block_m, block_n, cluster_m) tilings the sm100 kernel is compiled for.
constexpr int kSm100GemmTilings[][3] = {{128, 256, 1}, {128, 128, 1}, {128, 256, 2}};

/// "" when the sm100 kernel has `tiling`, else a sentence naming the valid set.
std::string check_sm100_gemm_tiling(const GemmTiling& tiling);

/// Launches the sm100 kernel for prob (its tiling must pass check_sm100_gemm_tiling;
/// K >= 1). Returns "" or an error sentence.
template <class T, class Out>
std::string sm100_gemm_launch(const GemmProblem& prob, cudaStream_t stream);

extern template std::string sm100_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, __half>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, float>(const GemmProblem&, cudaStream_t);

}  // namespace jax_sm100::host
