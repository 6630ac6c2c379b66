// Compile-time shape, budgets and parameters of the sm_100a blockwise-scaled FP8 GEMM:
//
//   d (M, N) bf16 = sum over 128-wide K blocks kb of
//                   a_scale[m, kb] * b_scale[n / 128, kb] * (a[m, block kb] . b[n, block kb])
//                   (+ beta * c)
//
// with the sm90 kernel's contract and numerics (ffi/src/common/fp8_problem.h): each K
// block's partial product is summed by the tensor core, then scaled and added in fp32
// ("promotion"). On sm_100a the partial goes through its own TMEM stage (the seeds'
// per-K OutputTilePipeline stages: MmaKStage / EpilogueKStage), and the epilogue warps
// promote it into registers; the fp32 sum over K blocks never passes through the tensor
// core.
//
// One CTA owns 128 output rows (the 128 TMEM lanes) x 128 columns (exactly one B-scale
// block). K advances in blocks of 128 e4m3 (128 bytes: one 128B-swizzle row, and exactly
// one scale block): four tcgen05.mma.kind::f8f6f4 of K = 32 per block.
//
// Warp roles (256 threads), as in the bf16 GEMM (gemm_config.h) except:
//   warp 0      TMA producer: A, B and A's 128 scales of one K block into one input stage
//   warp 1      MMA: per K block a free per-K TMEM stage (MmaHandle::acquire_k_stage_linear),
//               four UMMA into it (a fresh partial), commits onto the input stage's empty
//               barrier and the TMEM stage's full barrier
//   warps 4..7  epilogue: per K block, the row's A scale from the input stage (then one
//               arrival per warp frees the stage), B's scale from global memory, the
//               partial from TMEM (tcgen05.ld); acc += a_scale * b_scale * partial in
//               registers; after the last K block, bf16 (+ beta * C) through 128B-swizzled
//               staging and TMA stores
//   warps 2, 3  the CLC scheduler and the C loads: the shared roles (cta_skeleton.h)
//
// Where the scales come from (and why):
//   * A's scales (one per row and K block) ride in the input stage with the tiles
//     (BlockwiseFP8TilePayload, one TMA transaction): they have landed whenever the tiles
//     have, so the epilogue never waits on a separate load. The price: an input stage is
//     free only once the epilogue warps have read their rows' scales too (4 more arrivals
//     on its empty barrier), which couples the input ring to the epilogue; the per-K TMEM
//     stages already bound the MMA's lead over the epilogue to kAccStages K blocks, so
//     this costs no overlap the ring could have given.
//   * B's scale is one float per (tile, K block), the same for all 128 threads: a direct
//     global (L2) load, issued before the epilogue waits for the partial, needs no shared
//     memory, barrier or producer work (the sm90 kernel's B-scale warp is not needed).
#pragma once

#include <cstdint>

#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/pipeline/tile_payloads.h"

namespace jax_sm100::kernels::sm100 {

/// The one tiling of the FP8 kernel (128 x 128, one CTA per cluster). Names as in
/// GemmConfig, so the shared-memory carve-up (GemmSharedStorage) and the CTA, scheduler,
/// C-load and store code of cta_skeleton.h serve this kernel unchanged.
struct Fp8GemmConfig {
  static constexpr int kBlockM = 128;             ///< output rows per CTA (TMEM lanes)
  static constexpr int kBlockN = 128;             ///< output columns: one B-scale block
  static constexpr int kClusterM = 1;
  static constexpr bool kPair = false;
  static constexpr int kScaleBlock = 128;         ///< the scale granularity along K and N
  static constexpr int kBlockK = 128;             ///< K per input stage: one scale block
  static constexpr int kUmmaK = 32;               ///< K per kind::f8f6f4 UMMA (8-bit inputs)
  static constexpr int kUmmaM = 128, kUmmaN = kBlockN;
  static constexpr int kBRows = kBlockN;
  static constexpr int kABytes = kBlockM * kBlockK;  ///< one A stage (e4m3)
  static constexpr int kBBytes = kBlockN * kBlockK;  ///< one B stage
  static constexpr int kSfaElems = kBlockM;          ///< A's scales per stage (f32)
  static constexpr int kStages = 4;                  ///< 4 x 128 K in flight

  /// Per-K TMEM stages: each holds one K block's 128 x 128 fp32 partial.
  static constexpr int kAccStages = 4;
  static constexpr uint32_t kTmemCols = kAccStages * kBlockN;
  static constexpr int kClcStages = 2, kThrottleStages = 2, kEpiStages = 2;
  static constexpr int kEpiRowBytes = 128;           ///< one staging row: a 128B-swizzle row
  static constexpr int kEpiBufBytes = kBlockM * kEpiRowBytes;

  static constexpr int kThreads = 256;
  static constexpr int kEpilogueThreads = 128;
  static constexpr int kEpilogueWarps = kEpilogueThreads / 32;
  static constexpr int kWarpLoad = 0, kWarpMma = 1, kWarpSched = 2, kWarpEpiLoad = 3, kWarpEpilogue = 4;
  static constexpr uint32_t kEpilogueBarrierId = 1;

  /// Arrivals that free an input stage: the MMA's commit, and one per epilogue warp once
  /// its lanes have read their rows' A scales.
  static constexpr int kInputConsumers = 1 + kEpilogueWarps;
  /// Arrivals that free a CLC response: load, MMA, scheduler, C-load warps and the four
  /// epilogue warps (one elected lane each).
  static constexpr int kClcConsumers = 8;
  /// Arrivals that free a per-K TMEM stage: every epilogue thread, after its tcgen05.ld.
  static constexpr int kAccConsumers = kEpilogueThreads;

  /// The input stages: A and B tiles as raw bytes (TMA writes them, UMMA reads them) and
  /// A's scales of the stage's K block (TMA writes them, the epilogue reads them).
  using Payload = pipeline::BlockwiseFP8TilePayload<uint8_t, uint8_t, float, kABytes, kBBytes, kSfaElems, kStages>;
  /// What one stage's three TMA boxes bring (zero fill included): the full barrier's count.
  static constexpr uint32_t kStageTxBytes = Payload::bytes_per_stage;

  static_assert(kBlockK == kScaleBlock && kBlockN == kScaleBlock,
                "one input stage is one scale block along K, one tile one B-scale block along N");
  static_assert(kBlockK == 128, "a K block is one 128-byte swizzle row of e4m3");
  static_assert(kBlockK % kUmmaK == 0, "whole UMMA per K block");
  static_assert(kTmemCols >= 32 && kTmemCols <= 512 && (kTmemCols & (kTmemCols - 1)) == 0,
                "TMEM allocations are a power of two in [32, 512] columns");
  static_assert(kStageTxBytes == kABytes + kBBytes + kSfaElems * sizeof(float),
                "the full barrier counts A, B and the A-scale box");
  static_assert(kEpilogueThreads == kBlockM, "one epilogue thread per output row / TMEM lane");
};

/// Kernel parameters: the bf16 GEMM's (tensor maps of A, B, C, D; tile order; k_blocks =
/// ceil(K / 128); has_c, beta; batch 1, no transposes, alpha 1) plus the scales.
template <class Ops>
struct Fp8GemmParams : GemmParams<Ops> {
  typename Ops::TensorMap tma_sfa;  ///< a_scale_t: (k_blocks rows, mp inner) f32, boxes of 128 x 1
  const float* b_scale;             ///< (ceil(N / 128), k_blocks) f32, row-major (global memory)
};

}  // namespace jax_sm100::kernels::sm100
