// Host side of the sm_100a FP8 bias/activation GEMM: the launch entry point the handler
// (ffi/src/fp8_bias_ffi.cu) calls on a compute capability 10.0 device, taking the problem
// it validated (common/fp8_problem.h; no residual) and the bias.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/fp8_problem.h"  // Fp8GemmProblem

namespace jax_sm100::host {

/// Launches the sm100 FP8 kernel with the fused epilogue d = bf16(act(acc + bias)) for
/// prob (its tiling one of kSm100Fp8Forms, K >= 1, no residual); bias is (prob.n,) f32 or
/// null; activation a kernels::Activation value. Returns "" or an error sentence.
std::string sm100_fp8_bias_gemm_launch(const Fp8GemmProblem& prob, const float* bias, int32_t activation,
                                       cudaStream_t stream);

}  // namespace jax_sm100::host
