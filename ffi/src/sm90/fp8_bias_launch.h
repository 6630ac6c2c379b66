// Host side of the sm_90a FP8 bias/activation GEMM: the launch entry point the handler
// (ffi/src/fp8_bias_ffi.cu) calls on a compute capability 9.0 device, taking the problem
// it validated (common/fp8_problem.h; no residual) and the bias.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/fp8_problem.h"  // Fp8GemmProblem

namespace jax_sm100::host {

/// Launches the sm90 FP8 kernel of the form prob.tiling names (any non-residual form the
/// plain target has, fp8_gemm_forms.h) with the fused epilogue d = bf16(act(acc +
/// bias)); K >= 1; bias (prob.n,) f32 or null; activation a kernels::Activation value; a
/// persistent grid of at most num_sms CTAs. Returns "" or an error sentence.
std::string sm90_fp8_bias_gemm_launch(const Fp8GemmProblem& prob, const float* bias, int32_t activation,
                                      int num_sms, cudaStream_t stream);

/// The kernels of one activation (kernels::Activation value ACT), explicitly instantiated
/// in fp8_bias_inst_<activation>.cu (one unit each, so they compile in parallel).
template <int ACT>
std::string sm90_fp8_bias_gemm_launch_act(const Fp8GemmProblem& prob, const float* bias, int num_sms,
                                          cudaStream_t stream);

extern template std::string sm90_fp8_bias_gemm_launch_act<0>(const Fp8GemmProblem&, const float*, int, cudaStream_t);
extern template std::string sm90_fp8_bias_gemm_launch_act<1>(const Fp8GemmProblem&, const float*, int, cudaStream_t);
extern template std::string sm90_fp8_bias_gemm_launch_act<2>(const Fp8GemmProblem&, const float*, int, cudaStream_t);
extern template std::string sm90_fp8_bias_gemm_launch_act<3>(const Fp8GemmProblem&, const float*, int, cudaStream_t);
extern template std::string sm90_fp8_bias_gemm_launch_act<4>(const Fp8GemmProblem&, const float*, int, cudaStream_t);

}  // namespace jax_sm100::host
