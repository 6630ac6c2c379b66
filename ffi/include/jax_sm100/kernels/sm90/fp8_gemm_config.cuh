// sm_90a blockwise-scaled FP8 GEMM, part 1 of 5: the compile-time configuration (tile
// shape, cluster, roles, register budgets, stage count, shared-memory carve-up) and the
// run-time parameters of one launch. The design is described in fp8_gemm.cuh.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/sm90/wgmma_fp8.cuh"

namespace jax_sm100::kernels::sm90_fp8 {

/// Largest number of 128-wide K blocks (K <= 65536): bounds the B-scale smem.
constexpr int kMaxKBlocks = 512;
/// Largest dynamic shared memory of one CTA on sm_90 (227 KB).
constexpr uint32_t kSmemLimit = 232448;

/// Compile-time configuration of one kernel instantiation. The compiled set (the host's
/// dispatch in ffi/src/sm90/fp8_gemm_launch.cu): 128 x {64, 128} with overlapped
/// promotion on 1 CTA or a pair along M (plain and residual), 192 x 128 on 1 CTA,
/// 256 x 128 on 1 CTA or a pair along N (plain only); each non-residual form also with
/// the fused bias/activation epilogue (ffi/src/sm90/fp8_bias_launch.cu).
/// EPILOGUE_: kPlainEpilogue (d = bf16(acc), or + beta * C with RESIDUAL_), or a
/// kernels::Activation value: d = bf16(act(acc + bias[col])), the bias a launch parameter
/// (Fp8GemmParams::bias, null: none).
inline constexpr int kPlainEpilogue = -1;
template <int BLOCK_M_, int BLOCK_N_, bool RESIDUAL_, int CLUSTER_ = 1, bool PAIR_ALONG_N_ = false,
          int EPILOGUE_ = kPlainEpilogue>
struct Fp8GemmConfig {
  // 128 (two math WGs of 64 rows), 192 (three math WGs: each WG's promotion then hides
  // behind two other WGs' wgmmas instead of one), or 256 = two 128-row waves per K block:
  // each B tile then feeds twice the MMA work (B's L2->smem traffic per flop halves) at
  // the cost of a second final accumulator (kWaves * BLOCK_N/2 + BLOCK_N/2 registers:
  // BLOCK_N <= 128, no overlap).
  static constexpr int BLOCK_M = BLOCK_M_;
  static constexpr int kMathWGs = BLOCK_M == 192 ? 3 : 2;
  static constexpr int WG_M = 64;                       // rows per WG per wave = one wgmma M
  static constexpr int kWaveRows = kMathWGs * WG_M;     // rows of one wave (all math WGs)
  static constexpr int kWaves = BLOCK_M / kWaveRows;
  static_assert(kWaves * kWaveRows == BLOCK_M && kWaves <= 2, "BLOCK_M in {128, 192, 256}");
  static constexpr int BLOCK_N = BLOCK_N_;
  static constexpr int BLOCK_K = 128;  // == the scale block: one promotion per stage
  static constexpr int kScaleBlock = 128;
  static constexpr bool kResidual = RESIDUAL_;
  static constexpr bool kBias = EPILOGUE_ != kPlainEpilogue;
  static constexpr Activation kActivation = kBias ? static_cast<Activation>(EPILOGUE_) : Activation::kNone;
  static_assert(!kBias || (!RESIDUAL_ && EPILOGUE_ >= 0 && EPILOGUE_ < kNumActivations),
                "the bias/activation epilogue: an Activation, no residual");
  // CTAs per cluster: 1, or a pair: along M (sharing B), or with PAIR_ALONG_N_ along N
  // (sharing A). CTAs along M share their N tile: each loads 1/kClusterM of B and
  // multicasts it to the other (B's L2->SM traffic / kClusterM). CTAs along N share
  // their M tile and split A likewise. Consumers free a stage in every CTA of the
  // cluster (any peer may write into it).
  static constexpr int kCluster = CLUSTER_;
  static_assert(kCluster == 1 || kCluster == 2, "a cluster of 1 or 2 CTAs");
  static_assert(!PAIR_ALONG_N_ || kCluster == 2, "PAIR_ALONG_N_: a cluster of 2");
  static constexpr int kClusterM = kCluster == 1 || PAIR_ALONG_N_ ? 1 : 2;  // CTAs along M (sharing B)
  static constexpr int kClusterN = kCluster / kClusterM;                     // CTAs along N (sharing A)
  // Overlapped promotion (every 128-row tile): K block kb+1's wgmmas are issued into a
  // second accumulator before K block kb's is promoted, so the tensor cores stay busy
  // during the FFMAs. Three BLOCK_N/2-register arrays. The 192- and 256-row tiles have
  // one accumulator (their registers hold the third WG's rows or the second wave).
  static constexpr bool kOverlap = BLOCK_M == 128;
  static_assert(BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N in {64, 128}");
  static_assert(BLOCK_M == 128 || BLOCK_N == 128, "192- and 256-row tiles are 128 wide");
  static_assert(kWaves == 1 || !RESIDUAL_, "no shared memory left for C staging at BLOCK_M 256");
  static_assert(kMathWGs == 2 || (!RESIDUAL_ && kCluster == 1),
                "three math WGs: 160 registers each, one CTA, no C staging");
  static_assert(!PAIR_ALONG_N_ || BLOCK_M == 256, "pairs along N: built for 256-row tiles");
  static_assert(BLOCK_M != 256 || kCluster == 1 || PAIR_ALONG_N_,
                "256-row tiles: 1 CTA or a pair along N");
  static constexpr int kMathThreads = 128 * kMathWGs;
  static constexpr int kThreads = kMathThreads + 128;  // + producer warpgroup
  // setmaxnreg budgets (multiples of 8; all WGs together within the SM's 64K registers).
  static constexpr int kProducerRegs = kMathWGs == 3 ? 32 : 40;
  static constexpr int kMathRegs = kMathWGs == 3 ? 160 : 232;
  static_assert(kMathWGs * 128 * kMathRegs + 128 * kProducerRegs <= 65536, "register budget");
  static constexpr int kAcc = BLOCK_N / 2;  // fp32 accumulator registers per thread and wave
  static constexpr int kEpiChunk = 64;      // bf16 columns per 128-byte swizzle span

  // Every N tile lies inside one 128-column B-scale block: one B scale per tile and K block.
  static_assert(kScaleBlock % BLOCK_N == 0, "an N tile within one B-scale block");
  static_assert(BLOCK_N % kEpiChunk == 0, "64-column epilogue chunks");
  static_assert(BLOCK_K == kScaleBlock, "one K stage must be exactly one scale block");
  static_assert((BLOCK_N / kClusterM) % 8 == 0 && (BLOCK_M / kClusterN) % 8 == 0,
                "multicast slices must be whole 8-row swizzle atoms");

  using Payload = pipeline::BlockwiseFP8TilePayload<uint8_t, uint8_t, float, BLOCK_M * BLOCK_K,
                                                    BLOCK_N * BLOCK_K, BLOCK_M, 1>;  // per stage
  static constexpr uint32_t kStageBytes =
      Payload::a_bytes + Payload::b_bytes + Payload::sfa_stride * sizeof(float);
  static constexpr uint32_t kDBytes = kMathWGs * kWaves * WG_M * BLOCK_N * 2;  // bf16 staging of D
  static constexpr uint32_t kCBytes = kResidual ? kDBytes : 0;        // one C stage per WG
  // B scales: two buffers (this tile's, the next tile's) of num_kb floats, filled by the
  // B-scale warp and read by every math WG.
  static constexpr uint32_t kSfbBytes = 2 * kMaxKBlocks * sizeof(float);
  static constexpr uint32_t kReserve = 1024 /*align*/ + 1024 /*barriers*/;
  static constexpr int STAGES = static_cast<int>(
      (kSmemLimit - kReserve - kDBytes - kCBytes - kSfbBytes) / kStageBytes > 8
          ? 8
          : (kSmemLimit - kReserve - kDBytes - kCBytes - kSfbBytes) / kStageBytes);
  static_assert(STAGES >= 3, "too few pipeline stages fit in shared memory");

  using Tiles = pipeline::BlockwiseFP8TilePayload<uint8_t, uint8_t, float, BLOCK_M * BLOCK_K,
                                                  BLOCK_N * BLOCK_K, BLOCK_M, STAGES>;
  using InputPipe = pipeline::InputTilePipeline<Tiles, STAGES>;
  using EpiPipe = pipeline::EpiLoadPipeline<1>;
  // B-scale warp -> math WGs, one stage per tile (full: the warp's 32 lanes; empty: one
  // lane per math warp).
  using ScalePipe = pipeline::ProducerConsumerPipeline<2>;
  using Mma = ptx::WgmmaFp8E4M3<BLOCK_N>;

  /// Fixed part of shared memory (the B-scale rows follow it, sized by K at launch).
  struct alignas(1024) Smem {
    Tiles tiles;                                              // (STAGES, ...) A, B, A-scales
    alignas(1024) __nv_bfloat16 d[kMathWGs][kWaves * WG_M * BLOCK_N];  // (WG, wave, BLOCK_N/64, 64, 64) swz128
    alignas(1024) __nv_bfloat16 c[kResidual ? kMathWGs : 1][kResidual ? WG_M * BLOCK_N : 8];
    pipeline::DeviceBarrier input_bars[2 * STAGES];
    pipeline::DeviceBarrier epi_bars[kMathWGs][2];
    pipeline::DeviceBarrier sfb_bars[2 * 2];  // ScalePipe: full[2], empty[2]
    float bias[kBias ? kMathWGs : 1][kBias ? BLOCK_N : 1];  // each math WG's copy of the tile's bias
  };

  /// Dynamic shared memory for `num_kb` K blocks (1024 extra to align the base).
  static constexpr uint32_t smem_bytes(int num_kb) {
    return 1024 + sizeof(Smem) + 2 * num_kb * sizeof(float);
  }
  static_assert(1024 + sizeof(Smem) + kSfbBytes <= kSmemLimit, "shared memory budget");
};

/// Run-time shape of one launch.
struct Fp8GemmParams {
  int m, n, k;
  int num_kb;               // ceil(K / 128)
  int num_nb;               // ceil(N / 128): rows of b_scale
  const float* b_scale;     // (num_nb, num_kb) row-major
  float beta;               // residual only
  uint32_t stage_tx_bytes;  // bytes TMA brings per stage (smaller than a full stage when
                            // one M tile holds all of M: A's boxes stop at M, see the host)
  TileOrder order;          // the persistent tile order over cluster tiles (one batch entry)
  const float* bias;        // bias/activation kernels: (n,) f32, or null (no bias)
};

}  // namespace jax_sm100::kernels::sm90_fp8
