// Compile-time shape and kernel parameters of the sm_100a M-grouped (mixture-of-experts)
// bf16/fp16 GEMM: out[r, :] = lhs[r, :] @ rhs[g(r)] for the rows r of group g, rows in
// no group written as zeros (ragged_dot's forward and its lhs gradient).
//
// The CTA is the bf16 GEMM's (gemm_config.h: 256 threads, the same warp roles, input
// stages, TMEM accumulators, CLC ring and output staging), one CTA per cluster (128-row
// tiles; no 2-SM pair), plus the group table (common/grouped_scheduler.cuh) in shared
// memory right after GemmSharedStorage: as many entries as the 227 KiB leave, at most 4096.
#pragma once

#include <cstdint>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"

namespace jax_sm100::kernels::sm100 {

template <int BlockN>
struct GroupedGemmConfig : GemmConfig<BlockN, 1> {
  /// Group-table entries (the sentinel included): 128-wide tiles leave room for 4096
  /// (the C staging is unused here but part of the shared carve-up), 256-wide for 2048.
  /// Larger G keeps every span-th group (GroupedOrder::make).
  static constexpr int kTableEntries = BlockN == 128 ? 4096 : 2048;
  static constexpr uint32_t kTableBytes = kTableEntries * static_cast<uint32_t>(sizeof(GroupTableEntry));
};

/// Kernel parameters (filled on the host by grouped_gemm_plan.h).
template <class Ops>
struct GroupedGemmParams {
  /// The shared CTA's parameters: tma_a = lhs (1, M, K) in boxes of 64 K x 128 rows;
  /// tma_b = rhs (G, K, N) in boxes of 64 N x 64 K or, trans_b, (G, N, K) in boxes of
  /// 64 K x BlockN rows, the group the outer coordinate; tma_d = out (1, M, N); tma_c =
  /// tma_d (never read: has_c = 0); k_blocks = ceil(K / 64); trans_a = 0.
  GemmParams<Ops> gemm;
  GroupedOrder order;           ///< the tile order over the groups (made on the host)
  const int32_t* group_sizes;   ///< (G,) int32 in device memory: read on the device only
  uint8_t* out;                 ///< out (M, N) row-major, for the masked row stores
  int n;                        ///< columns of out
};

}  // namespace jax_sm100::kernels::sm100
