// Host side of the sm_100a FP8 blockwise M-grouped GEMM: the launch entry point the
// grouped handler (ffi/src/grouped_ffi.cu) calls on a compute capability 10.0 device with
// the problem it validated (common/grouped_problem.h). group_sizes is read on the device
// only: no host synchronisation, safe inside CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"

namespace jax_sm100::host {

/// The (block_m, block_n) tiles the sm100 FP8 grouped target accepts: its one kernel is
/// 128 x 128 (one B-scale block per tile); 128 x 256 runs it too, as on sm90.
constexpr int kSm100Fp8GroupedTiles[][2] = {{128, 128}, {128, 256}};

/// "" when the sm100 FP8 grouped target accepts `tiling`, else a sentence naming the set.
std::string check_sm100_fp8_grouped_tiling(const GroupedTiling& tiling);

/// FP8 M-grouped GEMM (fp8_grouped_matmul; fp8_ragged_dot's forward and dx): e4m3 in,
/// bf16 out, K >= 16 (the handler fills zeros for an empty contraction). Returns "" or an
/// error.
std::string sm100_fp8_grouped_gemm_launch(const Fp8GroupedGemmProblem& prob, cudaStream_t stream);

}  // namespace jax_sm100::host
