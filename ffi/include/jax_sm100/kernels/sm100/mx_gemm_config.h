// Compile-time shape of the sm_100a MXFP8 block-scaled GEMM and its shared-memory and
// TMEM budgets. The kernel is the bf16 GEMM's (gemm_config.h, gemm_roles.h, on the CTA
// of cta_skeleton.h) with two roles replaced (mx_gemm_roles.h): the loads bring each
// stage's scale factors beside its A and B tiles (pipeline::BlockScaledTilePayload), and
// the MMA copies them into TMEM (tcgen05.cp) before the block-scaled UMMA of the stage
// reads them.
//
// One CTA owns 128 output rows and BlockN (128 or 256) columns; K advances in stages of
// 128 fp8 elements (128 bytes: one 128B-swizzle row), four UMMA of K = 32 per stage, the
// k-th of them reading scale-factor byte k (its 32-element K block). cta_group::1 only
// (the 2-SM pair is not built for MXFP8). Warp roles as in gemm_config.h.
//
// TMEM (512 columns, one CTA per SM): kAccStages accumulators of BlockN columns, then per
// input stage the scale factors of B (BlockN / 32 columns) and of A (4 columns: 128 rows,
// lanes duplicated x4). 128-wide tiles keep two accumulators (256 + 4 x 8 columns);
// 256-wide tiles keep one (256 + 3 x 16): two would leave no room for the scales.
#pragma once

#include <cstdint>

#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/pipeline/tile_payloads.h"
#include "jax_sm100/ptx/sm100/tcgen05_block_scale.cuh"

namespace jax_sm100::kernels::sm100 {

template <int BlockN>
struct MxGemmConfig {
  static_assert(BlockN == 128 || BlockN == 256, "BlockN is 128 or 256");

  static constexpr int kBlockM = 128;                 ///< output rows per CTA (TMEM lanes)
  static constexpr int kBlockN = BlockN;              ///< output columns per tile
  static constexpr int kClusterM = 1;
  static constexpr bool kPair = false;
  static constexpr int kBlockK = 128;                 ///< K (fp8 elements = bytes) per stage
  static constexpr int kUmmaK = 32;                   ///< K per UMMA = one scale block
  static constexpr int kMxBlock = 32;                 ///< elements per UE8M0 scale
  static constexpr int kUmmaM = 128;
  static constexpr int kUmmaN = BlockN;
  static constexpr int kBRows = BlockN;
  static constexpr int kABytes = kBlockM * kBlockK;   ///< one A stage (e4m3 / e5m2)
  static constexpr int kBBytes = kBRows * kBlockK;    ///< one B stage
  static constexpr int kSfaChunks = kBlockM / 128;    ///< 512-byte scale chunks per stage
  static constexpr int kSfbChunks = BlockN / 128;
  static constexpr int kSfaBytes = kSfaChunks * static_cast<int>(ptx::kMxScaleChunkBytes);
  static constexpr int kSfbBytes = kSfbChunks * static_cast<int>(ptx::kMxScaleChunkBytes);
  static constexpr int kStages = (kABytes + kBBytes) >= 48 * 1024 ? 3 : 4;

  static constexpr int kAccStages = BlockN == 128 ? 2 : 1;  ///< TMEM accumulators in flight
  static constexpr uint32_t kAccCols = kAccStages * BlockN;
  static constexpr uint32_t kSfaCols = kSfaChunks * ptx::kMxScaleChunkCols;  ///< per stage
  static constexpr uint32_t kSfbCols = kSfbChunks * ptx::kMxScaleChunkCols;  ///< per stage
  /// TMEM columns per stage's scales: B's first, then A's, the stride a multiple of 8 so
  /// each scale matrix starts on a multiple of its own width (the ISA states no alignment
  /// for scale addresses; this is the conservative choice, free in an allocation of 512).
  static constexpr uint32_t kSfStageCols = (kSfaCols + kSfbCols + 7) / 8 * 8;
  static constexpr uint32_t kTmemCols = 512;          ///< all of it (a power of two)
  static constexpr int kClcStages = 2;
  static constexpr int kThrottleStages = 2;
  static constexpr int kEpiStages = 1;                ///< no residual: C is never loaded
  static constexpr int kEpiRowBytes = 128;
  static constexpr int kEpiBufBytes = kBlockM * kEpiRowBytes;

  static constexpr int kThreads = 256;
  static constexpr int kEpilogueThreads = 128;
  static constexpr int kWarpLoad = 0, kWarpMma = 1, kWarpSched = 2, kWarpEpiLoad = 3, kWarpEpilogue = 4;
  static constexpr uint32_t kEpilogueBarrierId = 1;
  static constexpr int kInputConsumers = 1;           ///< the MMA's commit frees a stage
  static constexpr int kClcConsumers = 7 + 1;         ///< see GemmConfig::kClcConsumers
  static constexpr int kAccConsumers = kEpilogueThreads;

  /// The input stages: A, B and both scale-factor tiles as raw bytes (TMA and bulk copies
  /// write them; UMMA and tcgen05.cp read them).
  using Payload = pipeline::BlockScaledTilePayload<uint8_t, uint8_t, uint8_t, kABytes, kBBytes, kSfaBytes,
                                                   kSfbBytes, kStages>;
  /// Transaction bytes of one stage: A + B + the scale chunks.
  static constexpr uint32_t kStageTxBytes = Payload::bytes_per_stage;

  static_assert(kAccCols + kStages * kSfStageCols <= kTmemCols,
                "accumulators and per-stage scale factors exceed the 512 TMEM columns");
  static_assert(kBlockK / kUmmaK == 4, "one scale column byte per UMMA of a stage (scale IDs 0..3)");
  static_assert(Payload::sfa_stride == static_cast<uint32_t>(kSfaBytes) &&
                    Payload::sfb_stride == static_cast<uint32_t>(kSfbBytes),
                "scale chunks are whole 128-byte lines: every stage's chunks stay 16-byte aligned");
};

}  // namespace jax_sm100::kernels::sm100
