// Host side of the sm_100a M-grouped GEMM: the launch entry point the grouped handler
// (ffi/src/grouped_ffi.cu) calls on a compute capability 10.0 device with the problem it
// validated (common/grouped_problem.h). group_sizes is read on the device only: no host
// synchronisation, safe inside CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"

namespace jax_sm100::host {

/// The (block_m, block_n) tiles of the sm100 M-grouped kernel (one CTA per tile, no pair).
constexpr int kSm100GroupedTiles[][2] = {{128, 128}, {128, 256}};

/// "" when the sm100 M-grouped kernel has `tiling`, else a sentence naming the valid set.
std::string check_sm100_grouped_tiling(const GroupedTiling& tiling);

/// M-grouped GEMM (forward / lhs gradient of ragged_dot): bf16/f16 in, bf16/f16/f32 out,
/// K >= 1 (the handler fills zeros for an empty contraction). Returns "" or an error.
std::string sm100_grouped_gemm_launch(const GroupedGemmProblem& prob, cudaStream_t stream);

}  // namespace jax_sm100::host
