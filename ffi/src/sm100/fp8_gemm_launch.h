// Host side of the sm_100a blockwise-scaled FP8 GEMM: the launch entry point the FP8
// handler (ffi/src/fp8_ffi.cu) calls on a compute capability 10.0 device, taking the
// problem it validated (common/fp8_problem.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/fp8_problem.h"  // Fp8GemmProblem, Fp8Tiling

namespace jax_sm100::host {

/// The (block_m, block_n, cluster, pair_along_n) forms the sm100 FP8 kernel is compiled
/// for (plain and residual): one, 128 x 128 on one SM. A subset of the sm90 forms
/// (common/ffi_checks.h), so the handlers' validation accepts it everywhere.
struct Sm100Fp8Form {
  int block_m, block_n, cluster;
  bool pair_along_n;
};
constexpr Sm100Fp8Form kSm100Fp8Forms[] = {{128, 128, 1, false}};

/// "" when the sm100 FP8 kernel has `tiling`'s form, else a sentence naming the valid set.
std::string check_sm100_fp8_tiling(const Fp8Tiling& tiling);

/// Launches the sm100 kernel for prob (its tiling must pass check_sm100_fp8_tiling;
/// K >= 1; beta * C when prob.c is set). Returns "" or an error sentence.
std::string sm100_fp8_gemm_launch(const Fp8GemmProblem& prob, cudaStream_t stream);

}  // namespace jax_sm100::host
