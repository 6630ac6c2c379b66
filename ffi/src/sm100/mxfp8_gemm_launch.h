// Host side of the sm_100a MXFP8 block-scaled GEMM: the launch entry point the handler
// (ffi/src/mxfp8_ffi.cu) calls on a compute capability 10.0 device, taking the problem
// it validated (common/mxfp8_problem.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/mxfp8_problem.h"

namespace jax_sm100::host {

/// Launches the sm100 MXFP8 kernel for prob (block_n 128 or 256, K >= 1, validated).
/// Returns "" or an error sentence.
std::string sm100_mxfp8_gemm_launch(const Mxfp8GemmProblem& prob, cudaStream_t stream);

}  // namespace jax_sm100::host
