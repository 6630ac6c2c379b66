// Host side of the sm_100a GEMM: the launch entry point the handler calls on a compute
// capability 10.0 device, taking the problem it validated (common/gemm_problem.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "common/gemm_problem.h"

namespace jax_sm100::host {

/// The (block_m, block_n, cluster_m) tilings the sm100 kernel is compiled for.
constexpr int kSm100GemmTilings[][3] = {{128, 256, 1}, {128, 128, 1}, {128, 256, 2}};

/// "" when the sm100 kernel has `tiling`, else a sentence naming the valid set.
std::string check_sm100_gemm_tiling(const GemmTiling& tiling);

/// Launches the sm100 kernel for prob (its tiling must pass check_sm100_gemm_tiling;
/// K >= 1). Returns "" or an error sentence. A problem with a bias, a pre output or an
/// activation (prob.bias, prob.pre, prob.activation != 0; never with a residual C) runs
/// the bias/activation kernels (sm100_gemm_bias_launch), compiled for every tiling and
/// activation but only for the type pairs of kSm100BiasKernels; any other pair returns an
/// error sentence.
template <class T, class Out>
std::string sm100_gemm_launch(const GemmProblem& prob, cudaStream_t stream);

/// The (input, output) type pairs that have bias/activation kernels: bf16 -> bf16,
/// f16 -> f16, bf16 -> f32, f16 -> f32 (those of the sm90 bias kernels).
template <class T, class Out>
inline constexpr bool kSm100BiasKernels = std::is_same_v<Out, T> || std::is_same_v<Out, float>;

/// The bias/activation kernels of one type pair (kSm100BiasKernels): z = alpha * acc +
/// bias, pre = z, d = act(z). Defined in gemm_bias_inst_impl.h, explicitly instantiated in
/// gemm_bias_inst_<in>_<out>.cu.
template <class T, class Out>
std::string sm100_gemm_bias_launch(const GemmProblem& prob, cudaStream_t stream);

/// The activation-backward kernels (target jax_sm100_gemm_dact): d = round(alpha * acc *
/// act'(c)) in T, dbias += the fp32 column sums of the unrounded values when prob.dbias is
/// not null (zeroed by the handler). Compiled for the tilings (128, 256, 1) and (128, 256,
/// 2) and the activations relu, gelu_tanh, gelu_erf, silu; any other returns an error
/// sentence. Defined in gemm_dact_inst_impl.h, explicitly instantiated in
/// gemm_dact_inst_<in>.cu.
template <class T>
std::string sm100_gemm_dact_launch(const GemmProblem& prob, cudaStream_t stream);

extern template std::string sm100_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, __half>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_launch<__half, float>(const GemmProblem&, cudaStream_t);

extern template std::string sm100_gemm_bias_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_bias_launch<__nv_bfloat16, float>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_bias_launch<__half, __half>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_bias_launch<__half, float>(const GemmProblem&, cudaStream_t);

extern template std::string sm100_gemm_dact_launch<__nv_bfloat16>(const GemmProblem&, cudaStream_t);
extern template std::string sm100_gemm_dact_launch<__half>(const GemmProblem&, cudaStream_t);

}  // namespace jax_sm100::host
