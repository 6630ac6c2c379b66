// Host side of the sm90 GEMM: the launch entry point, taking the problem description the
// handler validated (common/gemm_problem.h, with the kernel choice). Used by
// gemm_ffi.cu (the FFI handlers) and the per-dtype instantiation files gemm_inst_*.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/gemm_problem.h"  // GemmProblem, GemmTiling, GemmDtype

namespace jax_sm100::host {

/// Launches the sm90 kernel compiled for (prob.tiling's block_m, block_n, cluster_m,
/// residual or not, in type, out type). Defined (and explicitly instantiated) in
/// gemm_inst_<in>_<out>.cu. Returns "" or an error sentence.
template <class T, class Out>
std::string sm90_gemm_launch(const GemmProblem& prob, int num_sms, cudaStream_t stream);

extern template std::string sm90_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, float>(const GemmProblem&, int, cudaStream_t);

}  // namespace jax_sm100::host
