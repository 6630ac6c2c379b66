// Compile-time shape of the sm_100a bf16/fp16 GEMM and its shared-memory and TMEM budgets.
//
// One CTA owns 128 output rows (the 128 TMEM lanes) and BlockN columns. ClusterM = 2 is
// the 2-SM form: a pair of CTAs issues one cta_group::2 UMMA of 256 x BlockN x 16, each
// CTA holding its 128 rows of A and BlockN / 2 rows of B. K advances in blocks of 64
// elements (128 bytes: one 128B-swizzle row), four UMMA of K = 16 per block.
//
// Warp roles (256 threads):
//   warp 0      TMA producer: A and B tiles into the input stages
//   warp 1      MMA: owns TMEM (alloc / relinquish / dealloc); one thread issues UMMA
//               (in a pair only the even CTA's)
//   warp 2      scheduler: cluster launch control (try_cancel), throttled by warp 0
//   warp 3      epilogue loads: C tiles through the EpiLoadPipeline (beta != 0 only)
//   warps 4..7  epilogue: TMEM -> registers (thread = row), alpha / beta * C, TMA store
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/tile_payloads.h"

namespace jax_sm100::kernels::sm100 {

template <int BlockN, int ClusterM>
struct GemmConfig {
  static_assert(BlockN == 128 || BlockN == 256, "BlockN is 128 or 256");
  static_assert(ClusterM == 1 || ClusterM == 2, "ClusterM is 1 or 2 (the 2-SM pair)");
  static_assert(ClusterM == 1 || BlockN == 256, "the pair runs 256 x 256 tiles");

  static constexpr int kBlockM = 128;                  ///< output rows per CTA
  static constexpr int kBlockN = BlockN;               ///< output columns per tile
  static constexpr int kClusterM = ClusterM;           ///< CTAs per cluster (along M)
  static constexpr bool kPair = ClusterM == 2;         ///< cta_group::2 UMMA
  static constexpr int kBlockK = 64;                   ///< K per input stage
  static constexpr int kUmmaK = 16;                    ///< K per UMMA (16-bit inputs)
  static constexpr int kUmmaM = 128 * ClusterM;        ///< UMMA M
  static constexpr int kUmmaN = BlockN;                ///< UMMA N
  static constexpr int kBRows = BlockN / ClusterM;     ///< B rows (of N) this CTA loads
  static constexpr int kABytes = kBlockM * kBlockK * 2;  ///< one A stage
  static constexpr int kBBytes = kBRows * kBlockK * 2;   ///< one B stage
  static constexpr int kStages = (kABytes + kBBytes) >= 48 * 1024 ? 3 : 4;
  /// Transaction bytes the pair leader's full barrier waits for per stage.
  static constexpr uint32_t kStageTxBytes = static_cast<uint32_t>((kABytes + kBBytes) * ClusterM);

  static constexpr int kAccStages = 2;                 ///< TMEM accumulators in flight
  static constexpr uint32_t kTmemCols = kAccStages * BlockN;
  static constexpr int kClcStages = 2;                 ///< CLC responses in flight
  static constexpr int kThrottleStages = 2;            ///< tiles the loads may lead the scheduler
  static constexpr int kEpiStages = 2;                 ///< C chunks in flight
  static constexpr int kEpiRowBytes = 128;             ///< one epilogue chunk row: a 128B-swizzle row
  static constexpr int kEpiBufBytes = kBlockM * kEpiRowBytes;

  static constexpr int kThreads = 256;
  static constexpr int kEpilogueThreads = 128;
  static constexpr int kWarpLoad = 0, kWarpMma = 1, kWarpSched = 2, kWarpEpiLoad = 3, kWarpEpilogue = 4;
  static constexpr uint32_t kEpilogueBarrierId = 1;    ///< named barrier of the epilogue warps

  /// Arrivals that free one CLC response: per CTA the load, scheduler, epilogue-load and
  /// four epilogue warps (one elected lane each), plus the one MMA warp that issues; in a
  /// pair every arrival goes to the even CTA's barrier.
  static constexpr int kClcConsumers = ClusterM * 7 + 1;
  /// Arrivals that free an input stage: the MMA's one commit.
  static constexpr int kInputConsumers = 1;
  /// Arrivals that free one accumulator: every epilogue thread of the cluster.
  static constexpr int kAccConsumers = ClusterM * kEpilogueThreads;

  /// The input stages: A and B tiles as raw bytes (TMA writes them, UMMA reads them).
  using Payload = pipeline::StandardTilePayload<uint8_t, uint8_t, kABytes, kBBytes, kStages>;

  static_assert(kTmemCols >= 32 && kTmemCols <= 512 && (kTmemCols & (kTmemCols - 1)) == 0,
                "TMEM allocations are a power of two in [32, 512] columns");
  static_assert(kBRows % 64 == 0, "N-major B tiles are loaded in boxes of 64 columns");
};

/// Everything the CTA keeps in shared memory. Tiles first, each 1024-aligned (the
/// 128B-swizzle pattern repeats every 1024 bytes and the descriptors' base offset is 0).
template <class Cfg, class Barrier, class ClcResponse>
struct alignas(1024) GemmSharedStorage {
  typename Cfg::Payload tiles;                                   ///< input stages (A, B)
  alignas(1024) uint8_t d[2][Cfg::kEpiBufBytes];               ///< output staging (double)
  alignas(1024) uint8_t c[Cfg::kEpiStages][Cfg::kEpiBufBytes];  ///< C staging
  Barrier input_bars[2 * Cfg::kStages];
  Barrier acc_bars[2 * Cfg::kAccStages];
  Barrier clc_bars[2 * Cfg::kClcStages];
  Barrier throttle_bars[2 * Cfg::kThrottleStages];
  Barrier epi_bars[2 * Cfg::kEpiStages];
  ClcResponse clc_response[Cfg::kClcStages];
  uint32_t tmem_base;
};

/// The most dynamic shared memory a CTA may use on sm_100 (227 KiB).
constexpr uint32_t kSm100MaxSmemBytes = 232448;

}  // namespace jax_sm100::kernels::sm100
