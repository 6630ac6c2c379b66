// Host side of the sm90 GEMM: the launch entry point, taking the problem description the
// handler validated (common/gemm_problem.h, with the kernel choice). Used by
// gemm_ffi.cu (the FFI handlers) and the per-dtype instantiation files gemm_inst_*.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/gemm_problem.h"  // GemmProblem, GemmTiling, GemmDtype

namespace jax_sm100::host {

/// Launches the sm90 kernel compiled for (prob.tiling's block_m, block_n, cluster_m,
/// residual or not, in type, out type). Defined (and explicitly instantiated) in
/// gemm_inst_<in>_<out>.cu. Returns "" or an error sentence.
///
/// A problem with a bias, a pre output or an activation (prob.bias, prob.pre,
/// prob.activation != 0; never with a residual C) runs the bias/activation kernels
/// (sm90_gemm_bias_launch), compiled for every tiling and activation but only for the
/// type pairs of kSm90BiasKernels; any other pair returns an error sentence.
template <class T, class Out>
std::string sm90_gemm_launch(const GemmProblem& prob, int num_sms, cudaStream_t stream);

/// The (input, output) type pairs that have bias/activation kernels: bf16 -> bf16,
/// f16 -> f16, bf16 -> f32, f16 -> f32 (not the mixed bf16 <-> f16 pairs).
template <class T, class Out>
inline constexpr bool kSm90BiasKernels = std::is_same_v<Out, T> || std::is_same_v<Out, float>;

/// The bias/activation kernels of one type pair (kSm90BiasKernels). Defined in
/// gemm_inst.h, explicitly instantiated in gemm_bias_inst_<in>_<out>.cu.
template <class T, class Out>
std::string sm90_gemm_bias_launch(const GemmProblem& prob, int num_sms, cudaStream_t stream);

/// The activation-backward kernels (prob.dact: d = acc * act'(c), column sums into
/// prob.dbias) for inputs and output of type T (bf16 or f16), on the tiling 128x256
/// (cluster 1 or 2), no split-K (any other tiling returns an error sentence), and the
/// activations relu, gelu_tanh, gelu_erf and silu. Defined in gemm_inst.h, explicitly
/// instantiated in gemm_dact_inst_<in>.cu.
template <class T>
std::string sm90_gemm_dact_launch(const GemmProblem& prob, int num_sms, cudaStream_t stream);

extern template std::string sm90_gemm_dact_launch<__nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_dact_launch<__half>(const GemmProblem&, int, cudaStream_t);

extern template std::string sm90_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, float>(const GemmProblem&, int, cudaStream_t);

extern template std::string sm90_gemm_bias_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_bias_launch<__nv_bfloat16, float>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_bias_launch<__half, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_bias_launch<__half, float>(const GemmProblem&, int, cudaStream_t);

}  // namespace jax_sm100::host
