// Compile-time shape and kernel parameters of the sm_100a FP8 blockwise M-grouped GEMM
// (mixture-of-experts: fp8_grouped_matmul, fp8_ragged_dot's forward and dx):
//
//   out[r, :] bf16 = sum over 128-wide K blocks kb of
//                    a_scale[r, kb] * b_scale[g, n / 128, kb] * (a[r, block kb] . b[g, n, block kb])
//
// for the rows r of group g; rows in no group are zeros. The dense FP8 kernel's CTA and
// numerics (fp8_config.h: 128 x 128 tiles, per-K TMEM partials promoted in fp32 by the
// epilogue) with the M-grouped kernel's work list and store (grouped_gemm_config.h): the
// group table in shared memory after GemmSharedStorage, a tile never straddling two
// groups, a group's partial last tile stored row by row.
#pragma once

#include <cstdint>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/fp8_config.h"

namespace jax_sm100::kernels::sm100 {

struct GroupedFp8GemmConfig : Fp8GemmConfig {
  /// Group-table entries (the sentinel included): what the 227 KiB leave after the FP8
  /// carve-up (4 input stages of 32.5 KiB, C and D staging), rounded down to a power of
  /// two. Larger G keeps every span-th group (GroupedOrder::make).
  static constexpr int kTableEntries = 2048;
  static constexpr uint32_t kTableBytes = kTableEntries * static_cast<uint32_t>(sizeof(GroupTableEntry));
};

/// Kernel parameters (filled on the host by grouped_fp8_plan.h).
template <class Ops>
struct GroupedFp8GemmParams {
  /// The dense FP8 kernel's: tma_a = a (1, M, K) e4m3 in boxes of 128 K x 128 rows; tma_b
  /// = b (G, N, K), the group the outer coordinate; tma_sfa = a_scale_t (k_blocks, mp);
  /// tma_d = out (1, M, N) bf16; tma_c = tma_d (never read: has_c = 0); b_scale = the
  /// (G, n_blocks, k_blocks) scales of b.
  Fp8GemmParams<Ops> gemm;
  GroupedOrder order;           ///< the tile order over the groups (made on the host)
  const int32_t* group_sizes;   ///< (G,) int32 in device memory: read on the device only
  uint8_t* out;                 ///< out (M, N) row-major, for the masked row stores
  int n;                        ///< columns of out
  int n_blocks;                 ///< ceil(N / 128): B-scale rows per group
};

}  // namespace jax_sm100::kernels::sm100
