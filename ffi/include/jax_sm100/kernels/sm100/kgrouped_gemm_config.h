// Compile-time shape and kernel parameters of the sm_100a K-grouped bf16/fp16 GEMM (the
// weight gradient of ragged_dot):
//
//   out[g] (K, N) = lhs[start_g:end_g, :]^T @ dy[start_g:end_g, :]   for g < G
//
// In the bf16 GEMM's terms (gemm_config.h) A = lhs^T is MN-major (trans_a) and B = dy
// N-major, both in 64-column boxes of 64 contraction rows, so the stages and UMMA are
// the GEMM's (trans_a = 1, trans_b = 0) layout; the contraction runs over the group's rows
// in 64-row blocks from start_g. Output tiles: the dense tile order over (ceil(K / 128),
// ceil(N / BlockN)) tiles per group, the group the batch coordinate; out is a (G, K, N)
// tensor map, so the TMA stores clip at each group's K and N.
//
// A group's last block reaches past end_g into the next group's rows (or past M, which
// TMA fills with zeros). The UMMA of 16-row slices wholly past end_g are not issued; the
// one slice that straddles end_g has its rows past end_g zeroed in shared memory, in
// every box of A and B (both operands: no Inf or NaN of another group can leak through
// 0 * x), before the MMA may read the stage (kgrouped_gemm_roles.h). An empty group's
// tiles store zeros.
#pragma once

#include <cstdint>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"

namespace jax_sm100::kernels::sm100 {

template <int BlockN>
struct KGroupedGemmConfig : GemmConfig<BlockN, 1> {
  /// Group-table entries (the sentinel included); larger G keeps every span-th group.
  static constexpr int kTableEntries = 2048;
  static constexpr uint32_t kTableBytes = kTableEntries * static_cast<uint32_t>(sizeof(GroupTableEntry));
  /// The load warp's own barrier for a stage whose rows it zeroes (after the table).
  static constexpr uint32_t kExtraBytes = kTableBytes + 8;
  static constexpr int kSliceRows = 16;  ///< contraction rows per kind::f16 UMMA
};

/// Kernel parameters (filled on the host by kgrouped_gemm_plan.h).
template <class Ops>
struct KGroupedGemmParams {
  /// The GEMM's: tma_a = lhs (1, M, K) in boxes of 64 K x 64 rows (the MN-major A);
  /// tma_b = dy (1, M, N) in boxes of 64 N x 64 rows; tma_d = out (G, K, N); tma_c = tma_d
  /// (never read: has_c = 0); order = (ceil(K / 128), ceil(N / BlockN)) tiles x G groups;
  /// trans_a = 1, trans_b = 0, alpha = 1; k_blocks unused (per group).
  GemmParams<Ops> gemm;
  GroupedOrder groups;          ///< the group table's layout (rows only are used)
  const int32_t* group_sizes;   ///< (G,) int32 in device memory: read on the device only
};

}  // namespace jax_sm100::kernels::sm100
