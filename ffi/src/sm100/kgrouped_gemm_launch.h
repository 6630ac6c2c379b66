// Host side of the sm_100a K-grouped GEMM (ragged_dot's weight gradient): the launch entry
// point the grouped handler (ffi/src/grouped_ffi.cu) calls on a compute capability 10.0
// device with the problem it validated (common/grouped_problem.h). group_sizes is read on
// the device only: no host synchronisation, safe inside CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"

namespace jax_sm100::host {

/// The (block_m, block_n) tiles of the sm100 K-grouped kernel (block_m: rows of each
/// group's (K, N) output).
constexpr int kSm100KGroupedTiles[][2] = {{128, 128}, {128, 256}};

/// "" when the sm100 K-grouped kernel has `tiling`, else a sentence naming the valid set.
std::string check_sm100_kgrouped_tiling(const GroupedTiling& tiling);

/// K-grouped GEMM: bf16/f16 in, bf16/f16/f32 out, M >= 1 (the handler fills zeros for no
/// rows). Returns "" or an error.
std::string sm100_kgrouped_gemm_launch(const KGroupedGemmProblem& prob, cudaStream_t stream);

}  // namespace jax_sm100::host
