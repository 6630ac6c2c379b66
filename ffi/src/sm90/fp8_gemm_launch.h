// Host side of the sm90 blockwise-scaled FP8 GEMM: the launch entry point, defined in
// fp8_gemm_launch.cu, taking the problem the handler validated (common/fp8_problem.h,
// with the kernel choice it was given as FFI attributes). Used by ffi/src/fp8_ffi.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/fp8_problem.h"  // Fp8GemmProblem, Fp8Tiling

namespace jax_sm100::host {

/// Largest K the sm90 FP8 kernel takes (its B-scale smem holds 512 K blocks).
constexpr int64_t kSm90Fp8MaxK = 65536;
static_assert(kSm90Fp8MaxK == kFp8MaxK, "the handlers' K limit (common/ffi_checks.h) is this kernel's");

/// Launches the sm90 kernel compiled for (tiling's block_m, block_n, cluster,
/// pair_along_n, residual or not) on `stream`, a persistent grid of at most `num_sms`
/// CTAs. Returns "" or an error sentence.
std::string sm90_fp8_gemm_launch(const Fp8GemmProblem& prob, int num_sms, cudaStream_t stream);

}  // namespace jax_sm100::host
