// sm_90a DeepSeek-style blockwise-scaled FP8 GEMM (DeepGEMM's Hopper design, on our
// pipeline library):
//
//   D (M, N) bf16 = sum_kb  diag(a_scale[:, kb]) (A[:, kb] @ B[:, kb]^T) b_scale[nb(n), kb]
//                   (+ beta * C)
//
//   A (M, K) e4m3 row-major (K-major), a_scale in 1x128 blocks along K, transposed:
//     (ceil(K/128), Mp) f32, Mp = round_up(M, 4), so one TMA box brings a stage's BLOCK_M
//     scales in the stage's transaction;
//   B (N, K) e4m3 row-major (K-major), b_scale (ceil(N/128), ceil(K/128)) f32 per 128x128;
//   C, D (M, N) bf16 row-major.
//
// Structure (one CTA per SM, persistent, 3 warpgroups; 4 with BLOCK_M = 192):
//   WG 0, 1  math: each owns 64 rows of every 128-row wave of the tile (BLOCK_M = 128:
//            one wave; 256: two, rows w*64 and 128 + w*64; 192: three math WGs, WG 0-2,
//            one 192-row wave, so each WG's promotion hides behind two others' wgmmas).
//            Per 128-wide K block (= one
//            scale block) and wave, 4 x wgmma m64nNk32 e4m3 into a fresh fp32
//            accumulator, then promote: final[wave] += acc * a_scale[row] *
//            b_scale[col block]. The tensor cores keep only ~14 bits of the FP8 sum, so
//            this per-block fp32 promotion is required, not an optimisation. With
//            overlapped promotion (128-row tiles) the next K block's wgmmas run during
//            this one's FFMAs, across tiles too (math_loop_chained); with one
//            accumulator (math_loop_waves) the next tile's first wave runs during this
//            tile's epilogue, and a 256-row tile whose waves are all live runs a K loop
//            unrolled over the pipeline ring (constant stage indices). Epilogue:
//            bf16 into 128B-swizzled smem, TMA store (each WG its own rows, so the two
//            WGs never wait on each other).
//   last WG  warp 0: TMA producer: A tile, B tile and A's scales of one K block land in
//            one InputTilePipeline<BlockwiseFP8TilePayload> stage (one expect_bytes);
//            warp 1 (residual only): epilogue-load warp streaming C through one
//            EpiLoadPipeline per math WG (consumer count 128 = that WG's threads);
//            warp 2: B-scale warp, each tile's B-scale rows into a two-stage ring.
//   setmaxnreg: producers drop to 40 registers, math WGs grow to 232 (32 / 160 with three
//   math WGs).
// B's scales: the B-scale warp copies each tile's 1 or 2 scale rows (an N tile that
// straddles two 128-column scale blocks uses the right one per 8-column group) into one
// of two shared buffers, up to two tiles ahead, so between tiles the math WGs only wait
// on a barrier that has long completed. (Copied by the math WGs themselves, the copy and
// its barrier lay between one tile's last wgmma and the next one's first: the warp gained
// 1.2-1.5% at K = 1536 and 2048, H200.)
//
// Partial tiles: TMA zero-fills out-of-bounds A/B/scale reads (K tail contributes 0)
// and clips the D store; a math WG whose 64 rows are all past M skips its MMAs. When
// one M tile holds all of M (decode shapes), A's and A-scales' TMA boxes stop at M
// (rounded up to 8 rows / 4 scales) instead: zero-filling the out-of-bounds rows made
// the loads slow in proportion to their number (M = 16: 27.9 us against 17.5 with A
// padded to 128 rows, H200). The tile's rows past the box keep stale smem; they only
// feed output rows >= M, which are never stored.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include <utility>

#include "jax_sm100/common/fast_divisor.h"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/ld_shared.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/stmatrix.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"
#include "jax_sm100/ptx/sm90/wgmma_fp8.cuh"

namespace jax_sm100::kernels::sm90_fp8 {

/// Largest number of 128-wide K blocks (K <= 65536): bounds the B-scale smem.
constexpr int kMaxKBlocks = 512;
/// Largest dynamic shared memory of one CTA on sm_90 (227 KB).
constexpr uint32_t kSmemLimit = 232448;


/// Compile-time configuration: tile shape, stage count, roles, smem carve-up.
template <int BLOCK_N_, bool RESIDUAL_, int CLUSTER_ = 1, bool OVERLAP_ = false, int BLOCK_M_ = 128,
          bool PAIR_ALONG_N_ = false>
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
  // CTAs per cluster: 1; 2 = 2 along M (or, with PAIR_ALONG_N_, 2 along N); 4 = 2 along
  // M x 2 along N. CTAs along M share their N tile: each loads 1/kClusterM of B and
  // multicasts it to the others (B's L2->SM traffic / kClusterM). CTAs along N share
  // their M tile and split A likewise. Consumers free a stage in every CTA of the
  // cluster (any peer may write into it).
  static constexpr int kCluster = CLUSTER_;
  static_assert(kCluster == 1 || kCluster == 2 || kCluster == 4, "cluster of 1, 2 or 2x2 CTAs");
  static_assert(!PAIR_ALONG_N_ || kCluster == 2, "PAIR_ALONG_N_: a cluster of 2");
  static constexpr int kClusterM = kCluster == 1 || PAIR_ALONG_N_ ? 1 : 2;  // CTAs along M (sharing B)
  static constexpr int kClusterN = kCluster / kClusterM;                     // CTAs along N (sharing A)
  // Overlapped promotion: K block kb+1's wgmmas are issued into a second accumulator
  // before K block kb's is promoted, so the tensor cores stay busy during the FFMAs.
  // Three BLOCK_N/2-register arrays: BLOCK_N <= 128.
  static constexpr bool kOverlap = OVERLAP_;
  static_assert(!kOverlap || BLOCK_N_ <= 128, "overlapped promotion needs 3 x BLOCK_N/2 registers");
  static_assert(kWaves == 1 || (!kOverlap && BLOCK_N_ <= 128),
                "two waves need 3 x BLOCK_N/2 registers already: BLOCK_N <= 128, no overlap");
  static_assert(kWaves == 1 || !RESIDUAL_, "no shared memory left for C staging at BLOCK_M 256");
  static_assert(kMathWGs == 2 || (!kOverlap && !RESIDUAL_ && BLOCK_N_ <= 128),
                "three math WGs: 160 registers each, room for one accumulator and the finals");
  static constexpr int kMathThreads = 128 * kMathWGs;
  static constexpr int kThreads = kMathThreads + 128;  // + producer warpgroup
  // setmaxnreg budgets (multiples of 8; all WGs together within the SM's 64K registers).
  static constexpr int kProducerRegs = kMathWGs == 3 ? 32 : 40;
  static constexpr int kMathRegs = kMathWGs == 3 ? 160 : 232;
  static_assert(kMathWGs * 128 * kMathRegs + 128 * kProducerRegs <= 65536, "register budget");
  static constexpr int kAcc = BLOCK_N / 2;  // fp32 accumulator registers per thread and wave
  // Every 128-column scale block starts on an 8-column group of every tile, so the
  // per-column choice of b scale is per group of 8 (the wgmma accumulator's grain).
  static constexpr bool kUniformScaleB = (kScaleBlock % BLOCK_N) == 0;
  static constexpr int kScaleBRows = kUniformScaleB ? 1 : 2;
  static constexpr int kEpiChunk = 64;  // bf16 columns per 128-byte swizzle span

  static_assert(BLOCK_N % kEpiChunk == 0 && BLOCK_N <= 192,
                "BLOCK_N in {64, 128, 192}: 64-column epilogue chunks, <= 2 scale blocks per "
                "tile, and 2*BLOCK_N/2 fp32 registers must fit under 232");
  static_assert(BLOCK_K == kScaleBlock, "one K stage must be exactly one scale block");
  static_assert((BLOCK_N / kClusterM) % 8 == 0 && (BLOCK_M / kClusterN) % 8 == 0,
                "multicast slices must be whole 8-row swizzle atoms");

  using Payload = pipeline::BlockwiseFP8TilePayload<uint8_t, uint8_t, float, BLOCK_M * BLOCK_K,
                                                    BLOCK_N * BLOCK_K, BLOCK_M, 1>;  // per stage
  static constexpr uint32_t kStageBytes =
      Payload::a_bytes + Payload::b_bytes + Payload::sfa_stride * sizeof(float);
  static constexpr uint32_t kDBytes = kMathWGs * kWaves * WG_M * BLOCK_N * 2;  // bf16 staging of D
  static constexpr uint32_t kCBytes = kResidual ? kDBytes : 0;        // one C stage per WG
  // B scales: two buffers (this tile's, the next tile's) of kScaleBRows x num_kb, filled
  // by the B-scale warp and read by every math WG.
  static constexpr uint32_t kSfbBytes = 2 * kScaleBRows * kMaxKBlocks * sizeof(float);
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
  };

  /// Dynamic shared memory for `num_kb` K blocks (1024 extra to align the base).
  static constexpr uint32_t smem_bytes(int num_kb) {
    return 1024 + sizeof(Smem) + 2 * kScaleBRows * num_kb * sizeof(float);
  }
  static_assert(1024 + sizeof(Smem) + kSfbBytes <= kSmemLimit, "shared memory budget");
};

/// Run-time shape of one launch.
struct Fp8GemmParams {
  int m, n, k;
  int num_kb;               // ceil(K / 128)
  int num_nb;               // ceil(N / 128): rows of b_scale
  int num_m_tiles, num_n_tiles;
  const float* b_scale;     // (num_nb, num_kb) row-major
  float beta;               // residual only
  int chain_tiles;          // overlapped form: 1 = next tile's first K block issued before the epilogue
  uint32_t stage_tx_bytes;  // bytes TMA brings per stage (smaller than a full stage when
                            // one M tile holds all of M: A's boxes stop at M, see the host)
  int group_m;              // cluster rows per group of the tile order
  int order_m, order_n;     // cluster rows and columns of the tile order
  // Divisors of the tile order (see GroupedTileOrder::tile): tiles per group
  // (group_m * order_n), the rows of a full group (group_m) and of the last one.
  FastDivisor div_group, div_rows, div_last_rows;
};

/// Persistent tile order with L2-friendly grouping: consecutive tiles walk group_m M
/// tiles down one N column before moving right, so a wave of CTAs shares A rows and B
/// columns. With clusters, the order is over cluster tiles (cluster_m x cluster_n
/// tiles); CTA (rank_m, rank_n) of a cluster takes M tile cluster_row * cluster_m +
/// rank_m and N tile cluster_col * cluster_n + rank_n (which may lie past the matrix
/// when the tile counts are odd: that CTA computes nothing, stores nothing).
/// (A stand-in with the same contract as the bf16 kernel's scheduler.)
struct GroupedTileOrder {
  int group_m;       // cluster rows per group
  int num_m, num_n;  // cluster rows (ceil(M tiles / cluster_m)), cluster columns
  int cluster_m, cluster_n, rank_m, rank_n;
  int first, stride;  // this cluster's first cluster tile, number of clusters
  FastDivisor div_group, div_rows, div_last_rows;  // group_m * num_n, group_m, last group's rows
  __device__ __forceinline__ void tile(int t, int& mt, int& nt) const {
    const uint32_t group = div_group.div(static_cast<uint32_t>(t));
    const int first_m = static_cast<int>(group) * group_m;
    const uint32_t in_group = static_cast<uint32_t>(t) - group * div_group.d;
    // min(group_m, num_m - first_m) rows: all groups but the last have group_m.
    const FastDivisor& rows = num_m - first_m >= group_m ? div_rows : div_last_rows;
    const uint32_t col = rows.div(in_group);
    mt = (first_m + static_cast<int>(rows.rem(in_group, col))) * cluster_m + rank_m;
    nt = static_cast<int>(col) * cluster_n + rank_n;
  }
  __device__ __forceinline__ int count() const { return num_m * num_n; }
};

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}





/// One CTA's part of a kRowsTile x BLOCK_K tile (K block kb, first global row row0):
/// rows [part * kRowsTile/kParts, +kRowsTile/kParts), multicast to the CTAs in `mask`
/// (same smem offset in each, each CTA's full barrier gets the bytes), so every CTA's
/// stage still receives the whole tile. kParts == 1: a plain load of the whole tile.
template <class Cfg, int kRowsTile, int kParts>
__device__ __forceinline__ void load_tile_part(uint8_t* tile, const CUtensorMap* map, uint64_t* bar,
                                               int kb, int row0, int part, uint32_t mask) {
  if constexpr (kParts == 1) {
    (void)part; (void)mask;
    ptx::tma_load_2d(tile, map, bar, kb * Cfg::BLOCK_K, row0);
  } else {
    constexpr int kRows = kRowsTile / kParts;
    ptx::tma_load_2d_multicast(tile + part * kRows * Cfg::BLOCK_K, map, bar,
                               static_cast<uint16_t>(mask), kb * Cfg::BLOCK_K, row0 + part * kRows);
  }
}

/// B tile of K block kb, N tile nt: split among the CTAs along M (cluster rank = rank_n *
/// kClusterM + rank_m), which share it: the CTAs of this cluster column.
template <class Cfg>
__device__ __forceinline__ void load_b(uint8_t* b_tile, const CUtensorMap* map_b, uint64_t* bar,
                                       int kb, int nt, const GroupedTileOrder& order) {
  const uint32_t mask = ((1u << Cfg::kClusterM) - 1) << (order.rank_n * Cfg::kClusterM);
  load_tile_part<Cfg, Cfg::BLOCK_N, Cfg::kClusterM>(b_tile, map_b, bar, kb, nt * Cfg::BLOCK_N,
                                                    order.rank_m, mask);
}

/// A tile of K block kb, M tile mt: split among the CTAs along N, which share it: the
/// CTAs of this cluster row (ranks rank_m + j * kClusterM).
template <class Cfg>
__device__ __forceinline__ void load_a(uint8_t* a_tile, const CUtensorMap* map_a, uint64_t* bar,
                                       int kb, int mt, const GroupedTileOrder& order) {
  uint32_t mask = 0;
#pragma unroll
  for (int j = 0; j < Cfg::kClusterN; ++j) mask |= 1u << (order.rank_m + j * Cfg::kClusterM);
  load_tile_part<Cfg, Cfg::BLOCK_M, Cfg::kClusterN>(a_tile, map_a, bar, kb, mt * Cfg::BLOCK_M,
                                                    order.rank_n, mask);
}

/// Free a consumed input stage (its empty barrier): one arrival per math warp on that
/// stage's empty barrier of every CTA of the cluster (lane l signals CTA l; the peer's
/// multicast writes into our stage too, so it must wait for our consumers as well). The
/// math loops hold a stage across the next one's issue (or the epilogue), so they drive
/// the ring through its stage-index API and free stages by barrier.
template <class Cfg>
__device__ __forceinline__ void release_input_barrier(pipeline::DeviceBarrier* empty, int lane) {
  if constexpr (Cfg::kCluster == 1) {
    if (lane == 0) empty->arrive();
  } else {
    if (lane < Cfg::kCluster) empty->arrive_cluster(static_cast<uint32_t>(lane));
  }
}

/// Producer (WG 2, warp 0): per tile, per K block, one stage: A, B, A-scales, all by TMA
/// in one transaction, issued by one lane.
template <class Cfg>
__device__ __forceinline__ void producer_loop(typename Cfg::InputPipe& pipe, const CUtensorMap* map_a,
                                              const CUtensorMap* map_b, const CUtensorMap* map_sfa,
                                              const Fp8GemmParams& p, GroupedTileOrder order) {
  auto producer = pipe.producer();
  const uint32_t lane = ptx::lane_id();
  for (int t = order.first; t < order.count(); t += order.stride) {
    int mt, nt;
    order.tile(t, mt, nt);
    for (int kb = 0; kb < p.num_kb; ++kb) {
      auto stage = producer.acquire_stage();  // waits until both math WGs freed it
      uint64_t* bar = stage.mbar()->ptr();
      if (lane == 0) {
        stage.expect_bytes(p.stage_tx_bytes);  // one transaction: A + B + A-scales
        load_a<Cfg>(stage.a_tile(), map_a, bar, kb, mt, order);
        load_b<Cfg>(stage.b_tile(), map_b, bar, kb, nt, order);
        ptx::tma_load_2d(stage.sfa_tile(), map_sfa, bar, mt * Cfg::BLOCK_M, kb);
      }
      std::move(stage).release();
    }
  }
  // With a cluster, the peers' consumers arrive on this CTA's empty barriers: wait until
  // all of them released every stage, so that no arrival lands after this CTA exits.
  // (That is the only cluster traffic left at the end: the multicast writes into this CTA
  // have all landed, as its math WGs waited for every full barrier.)
  if constexpr (Cfg::kCluster > 1) producer.drain();
}

/// Epilogue-load warp (WG 2, warp 1, one lane; residual only): C's 64-row half of each
/// tile for each math WG, one transaction per stage.
template <class Cfg>
__device__ __forceinline__ void epi_load_loop(typename Cfg::Smem* smem, const CUtensorMap* map_c,
                                              GroupedTileOrder order) {
  static_assert(Cfg::kMathWGs == 2, "one C pipeline per math WG");
  typename Cfg::EpiPipe epi[2] = {typename Cfg::EpiPipe(smem->epi_bars[0], "fp8_c"),
                                  typename Cfg::EpiPipe(smem->epi_bars[1], "fp8_c")};
  for (int t = order.first; t < order.count(); t += order.stride) {
    int mt, nt;
    order.tile(t, mt, nt);
#pragma unroll
    for (int wg = 0; wg < Cfg::kMathWGs; ++wg) {
      auto stage = epi[wg].acquire_producer();  // the WG finished reading the last C
      stage.mbar()->arrive_expect_tx(Cfg::WG_M * Cfg::BLOCK_N * 2);
#pragma unroll
      for (int ch = 0; ch < Cfg::BLOCK_N / Cfg::kEpiChunk; ++ch)
        ptx::tma_load_2d(smem->c[wg] + ch * Cfg::WG_M * Cfg::kEpiChunk, map_c, stage.mbar()->ptr(),
                         nt * Cfg::BLOCK_N + ch * Cfg::kEpiChunk, mt * Cfg::BLOCK_M + wg * Cfg::WG_M);
      std::move(stage).release();
    }
  }
}

/// Element offset of (row, col) in a WG's D/C staging: 64-column chunks of 64 rows x
/// 128 bytes with the 128-byte swizzle (16-byte unit index XOR row % 8), which is what
/// TMA's SWIZZLE_128B reads and writes, and bank-conflict free for the accumulator
/// layout (8 rows x 4 threads per store).
template <class Cfg>
__device__ __forceinline__ int staging_offset(int row, int col) {
  const int chunk = col / Cfg::kEpiChunk, c = col % Cfg::kEpiChunk;
  return chunk * (Cfg::WG_M * Cfg::kEpiChunk) + row * Cfg::kEpiChunk +
         (((c / 8) ^ (row % 8)) * 8) + (c % 8);
}

/// The four products a_scale[row] * b_scale[col block] a thread needs for one K block
/// (rows r0 / r0 + 8, first / second scale block of the tile).
struct KScales {
  float s00, s01, s10, s11;
};

/// Row offset in the tile of WG wg's 64 rows of wave `wave`.
template <class Cfg>
__device__ __forceinline__ int wave_row0(int wg, int wave) {
  return wave * Cfg::kMathWGs * Cfg::WG_M + wg * Cfg::WG_M;
}

/// The wgmma shared-memory descriptors of every stage's A (this WG's rows) and B tile,
/// kept as 32-bit low words computed once per kernel: the main loop then builds each
/// descriptor with an add (start address >> 4 in the low word; the high word, SBO 1024
/// and the 128-byte swizzle, is the same for every tile), instead of re-deriving shared
/// addresses from generic pointers every K block.
template <class Cfg>
struct TileDescs {
  uint32_t a_lo0, b_lo0;  // stage 0: A at this WG's wave-0 rows, B
  static constexpr uint32_t kAStride = Cfg::Tiles::a_bytes >> 4, kBStride = Cfg::Tiles::b_bytes >> 4;
  __device__ __forceinline__ TileDescs(typename Cfg::Tiles& tiles, int wg, int r0) {
    sfa0 = ptx::smem_addr(tiles.sfa_tile(0) + wave_row0<Cfg>(wg, 0) + r0);
    a_lo0 = static_cast<uint32_t>(ptx::make_smem_desc(
        ptx::smem_addr(tiles.a_tile(0) + wave_row0<Cfg>(wg, 0) * Cfg::BLOCK_K), 0, 1024,
        ptx::WgmmaSwizzle::k128B));
    b_lo0 = static_cast<uint32_t>(
        ptx::make_smem_desc(ptx::smem_addr(tiles.b_tile(0)), 0, 1024, ptx::WgmmaSwizzle::k128B));
    // Opaque to the compiler: under the two-wave loop's register pressure it otherwise
    // re-derives these from the shared window (S2R SR_CgaCtaId + ~30 ALU ops) every K
    // block, on the path from the full barrier to the first wgmma. The descriptor words
    // also go through a shuffle from lane 0: provably warp-uniform, they (and the stage
    // index, shuffled likewise) live in uniform registers, so a wave's 4 wgmmas issue
    // back to back instead of each waiting on R2UR moves (+1-2%, H200, with the
    // full-tile loop).
    a_lo0 = __shfl_sync(0xffffffffu, a_lo0, 0);
    b_lo0 = __shfl_sync(0xffffffffu, b_lo0, 0);
    asm volatile("" : "+r"(sfa0));  // per thread (its rows)
  }
  __device__ __forceinline__ uint32_t a_lo(uint32_t stage, int wave) const {
    return a_lo0 + stage * kAStride + (wave * Cfg::kMathWGs * Cfg::WG_M * Cfg::BLOCK_K >> 4);
  }
  __device__ __forceinline__ uint32_t b_lo(uint32_t stage) const { return b_lo0 + stage * kBStride; }
  /// Shared address of A's scale for row r0 of this WG's wave-0 rows in stage `stage`.
  uint32_t sfa0;
  static constexpr uint32_t kSfaStride = Cfg::Tiles::sfa_stride * sizeof(float);
  __device__ __forceinline__ uint32_t sfa(uint32_t stage, int wave) const {
    return sfa0 + stage * kSfaStride + wave * Cfg::kMathWGs * Cfg::WG_M * sizeof(float);
  }
  static __device__ __forceinline__ uint64_t desc(uint32_t lo) {
    const uint64_t hi = ptx::make_smem_desc(0, 0, 1024, ptx::WgmmaSwizzle::k128B) >> 32;
    return (hi << 32) | lo;
  }
};

/// The four products a_scale[row] * b_scale[col block] of K block kb for rows r0, r0 + 8
/// of wave `wave` (stage `stage`); `sfb` is the shared address of this tile's B-scale rows.
template <class Cfg>
__device__ __forceinline__ KScales read_scales(const TileDescs<Cfg>& descs, uint32_t stage, int wave,
                                               uint32_t sfb, int kb, int num_kb) {
  const uint32_t sfa = descs.sfa(stage, wave);
  const float sa0 = ptx::ld_shared_f32(sfa), sa1 = ptx::ld_shared_f32(sfa + 8 * sizeof(float));
  const float sb0 = ptx::ld_shared_f32(sfb + kb * sizeof(float));
  const float sb1 = Cfg::kUniformScaleB ? sb0 : ptx::ld_shared_f32(sfb + (num_kb + kb) * sizeof(float));
  return KScales{sa0 * sb0, sa0 * sb1, sa1 * sb0, sa1 * sb1};
}

/// 4 x wgmma m64nNk32 over one 128-wide K block into a fresh accumulator (descriptor low
/// words of the A rows and B tile, see TileDescs); committed as one group (not waited for).
template <class Cfg>
__device__ __forceinline__ void issue_k_block(float (&acc)[Cfg::kAcc], uint32_t a_lo, uint32_t b_lo) {
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < Cfg::BLOCK_K / 32; ++k)  // k32 slices: +32 bytes = +2 in the desc
    Cfg::Mma::mma(acc, TileDescs<Cfg>::desc(a_lo + 2 * k), TileDescs<Cfg>::desc(b_lo + 2 * k),
                  k > 0 ? 1 : 0);
  ptx::wgmma_commit();
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
}

/// final += acc * scale, the scale chosen per 8-column group (first `former` groups use
/// the tile's first B scale block).
template <class Cfg>
__device__ __forceinline__ void promote(float (&final_acc)[Cfg::kAcc], const float (&acc)[Cfg::kAcc],
                                        const KScales& sc, int former) {
#pragma unroll
  for (int g = 0; g < Cfg::kAcc / 4; ++g) {
    const bool first = Cfg::kUniformScaleB || g < former;
    final_acc[4 * g + 0] += (first ? sc.s00 : sc.s01) * acc[4 * g + 0];
    final_acc[4 * g + 1] += (first ? sc.s00 : sc.s01) * acc[4 * g + 1];
    final_acc[4 * g + 2] += (first ? sc.s10 : sc.s11) * acc[4 * g + 2];
    final_acc[4 * g + 3] += (first ? sc.s10 : sc.s11) * acc[4 * g + 3];
  }
}

/// B-scale warp (WG of the producer, warp 2): per tile, in the math WGs' order, the tile's
/// B-scale rows (kScaleBRows x num_kb; an N tile that straddles two 128-column scale
/// blocks needs both, clamped: a 2x2 cluster's CTA may hold an N tile past the matrix)
/// into one ScalePipe stage. It runs up to two tiles ahead, so the global reads' latency
/// hides behind the math WGs' main loop, and the math WGs spend nothing on them between
/// tiles but one barrier wait.
template <class Cfg>
__device__ __forceinline__ void b_scale_loop(typename Cfg::ScalePipe& pipe, float* sfb_all,
                                             const Fp8GemmParams& p, GroupedTileOrder order) {
  const int lane = static_cast<int>(ptx::lane_id());
  const int words = Cfg::kScaleBRows * p.num_kb;
  for (int t = order.first; t < order.count(); t += order.stride) {
    int mt, nt;
    order.tile(t, mt, nt);
    const int nb0 = min(nt * Cfg::BLOCK_N / Cfg::kScaleBlock, p.num_nb - 1);
    const int nb1 = min(nb0 + 1, p.num_nb - 1);
    auto stage = pipe.acquire_producer();  // the math WGs are done with this buffer
    float* dst = sfb_all + stage.index() * words;
#pragma unroll
    for (int row = 0; row < Cfg::kScaleBRows; ++row) {
      const float* src = p.b_scale + (row == 0 ? nb0 : nb1) * p.num_kb;
      for (int kb = lane; kb < p.num_kb; kb += 32) dst[row * p.num_kb + kb] = __ldg(src + kb);
    }
    stage.mbar()->arrive();  // every lane: its stores, released to the math WGs
    std::move(stage).release();
  }
}

/// One tile as a math WG sees it: where it lies, which B-scale rows it reads, and how
/// much of it is this WG's to compute and store.
struct TileJob {
  int t;           // index in the tile order
  int mt, nt, n0;  // M tile, N tile, first column
  int former;      // 8-column groups [0, former) use the tile's first B-scale row
  int waves_live;  // this WG's waves holding rows < M (0: nothing to compute or store)
  uint32_t sfb;    // shared address of the tile's B-scale rows
};

/// Per-WG state the main loops and epilogues share.
template <class Cfg>
struct MathWG {
  int wg, t128, lane, r0;  // r0: accumulator rows r0 and r0 + 8 of the WG's 64
  int sfb_words;           // floats in one B-scale buffer
  float* sfb_all;          // the two B-scale buffers
  typename Cfg::ScalePipe sfb_pipe;  // this thread's view of the B-scale ring
  bool holds_scales = false;         // a begun tile's B-scale stage is not yet freed
  __nv_bfloat16* d_wg;     // this WG's D staging
  const __nv_bfloat16* c_wg;

  __device__ __forceinline__ MathWG(typename Cfg::Smem* smem, float* sfb, const Fp8GemmParams& p)
      : wg(threadIdx.x / 128), t128(threadIdx.x % 128), lane(threadIdx.x % 32),
        r0(((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4),
        sfb_words(Cfg::kScaleBRows * p.num_kb), sfb_all(sfb), sfb_pipe(smem->sfb_bars, "fp8_b_scales") {
    d_wg = smem->d[wg];
    c_wg = smem->c[Cfg::kResidual ? wg : 0];
  }

  /// How many of this WG's waves of tile (mt, nt) hold rows < M (0 when the N tile lies
  /// past N).
  __device__ __forceinline__ int waves_live(const Fp8GemmParams& p, int mt, int nt) const {
    const int row_wg = mt * Cfg::BLOCK_M + wg * Cfg::WG_M;
    return (nt * Cfg::BLOCK_N < p.n && row_wg < p.m)
               ? min(Cfg::kWaves, (p.m - row_wg + Cfg::kWaveRows - 1) / Cfg::kWaveRows)
               : 0;
  }
  /// The same for tile t of the order.
  __device__ __forceinline__ int waves_live(const GroupedTileOrder& order, const Fp8GemmParams& p,
                                            int t) const {
    int mt, nt;
    order.tile(t, mt, nt);
    return waves_live(p, mt, nt);
  }

  /// Start tile t: free the previous tile's B-scale stage (its last scale was read: the
  /// caller has issued all of that tile's K blocks), wait for this tile's. Every thread
  /// of every math WG calls it for every tile of the order, in order.
  __device__ __forceinline__ TileJob begin_tile(const GroupedTileOrder& order, const Fp8GemmParams& p,
                                                int t) {
    TileJob job;
    job.t = t;
    order.tile(t, job.mt, job.nt);
    job.n0 = job.nt * Cfg::BLOCK_N;
    job.former = Cfg::kUniformScaleB
                     ? Cfg::BLOCK_N / 8
                     : min(Cfg::BLOCK_N, Cfg::kScaleBlock - job.n0 % Cfg::kScaleBlock) / 8;
    job.waves_live = waves_live(p, job.mt, job.nt);
    if (holds_scales) {
      __syncwarp();  // the warp's reads of the stage come before its one arrival
      if (lane == 0) sfb_pipe.consumer_mbar(sfb_pipe.consumer_stage())->arrive();
      sfb_pipe.consumer_step();
    }
    sfb_pipe.wait_producer();  // filled by the B-scale warp, normally long ago
    holds_scales = true;
    job.sfb = ptx::smem_addr(sfb_all + sfb_pipe.consumer_stage() * sfb_words);
    return job;
  }
};

/// (x, y) rounded to bf16, x in the low half, as a 32-bit register.
__device__ __forceinline__ uint32_t bf16x2_bits(float x, float y) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}

/// Epilogue of one tile: fp32 (+ beta*C) -> bf16 -> swizzled smem -> TMA store of the
/// WG's live rows. With the residual, it consumes the WG's C stage even when nothing is
/// stored (the loader streams C for every tile).
template <class Cfg>
__device__ __forceinline__ void store_tile(const float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                           const MathWG<Cfg>& m, typename Cfg::EpiPipe& epi,
                                           const CUtensorMap* map_d, const Fp8GemmParams& p,
                                           const TileJob& job) {
  if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();  // last tile's store left smem
  named_barrier_sync(1 + m.wg, 128);
  if constexpr (Cfg::kResidual) {
    static_assert(Cfg::kWaves == 1, "residual: one wave");
    const int quad = m.lane % 4;
    auto c_stage = epi.acquire_consumer();  // C rows of this WG have landed
    const float beta = p.beta;
#pragma unroll
    for (int g = 0; g < Cfg::kAcc / 4; ++g) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int off = staging_offset<Cfg>(m.r0 + 8 * h, g * 8 + 2 * quad);
        const float2 cv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(m.c_wg + off));
        *reinterpret_cast<__nv_bfloat162*>(m.d_wg + off) = __floats2bfloat162_rn(
            fmaf(beta, cv.x, final_acc[0][4 * g + 2 * h]), fmaf(beta, cv.y, final_acc[0][4 * g + 2 * h + 1]));
      }
    }
    std::move(c_stage).release();  // each of the 128 threads arrives once
  } else {
    // stmatrix x4: two 8-column groups of the warp's 16 rows per instruction. Lane l
    // addresses row l % 8 of tile l / 8: rows +8 for odd tiles, the second group for
    // tiles 2 and 3.
    const int tile = m.lane / 8;
    const int row = (m.t128 / 32) * 16 + (tile % 2) * 8 + m.lane % 8;
    const uint32_t d_addr = ptx::smem_addr(m.d_wg);
#pragma unroll
    for (int w = 0; w < Cfg::kWaves; ++w) {
#pragma unroll
      for (int g = 0; g < Cfg::kAcc / 4; g += 2) {
        const int off = w * Cfg::WG_M * Cfg::BLOCK_N + staging_offset<Cfg>(row, (g + tile / 2) * 8);
        const float* f = final_acc[w] + 4 * g;
        ptx::stmatrix_x4(d_addr + off * 2, bf16x2_bits(f[0], f[1]), bf16x2_bits(f[2], f[3]),
                         bf16x2_bits(f[4], f[5]), bf16x2_bits(f[6], f[7]));
      }
    }
  }
  ptx::fence_proxy_async_shared_cta();  // st.shared -> TMA store (async proxy)
  named_barrier_sync(1 + m.wg, 128);
  if (m.t128 == 0 && job.waves_live > 0) {
#pragma unroll
    for (int w = 0; w < Cfg::kWaves; ++w) {
      if (w < job.waves_live) {
#pragma unroll
        for (int ch = 0; ch < Cfg::BLOCK_N / Cfg::kEpiChunk; ++ch)
          if (job.n0 + ch * Cfg::kEpiChunk < p.n)  // chunks wholly past N: nothing to write
            ptx::tma_store_2d(map_d, m.d_wg + (w * Cfg::BLOCK_N / Cfg::kEpiChunk + ch) * Cfg::WG_M * Cfg::kEpiChunk,
                              job.n0 + ch * Cfg::kEpiChunk, job.mt * Cfg::BLOCK_M + wave_row0<Cfg>(m.wg, w));
      }
    }
    ptx::tma_store_commit_group();
  }
}

/// A tile the WG holds no rows of (job.waves_live == 0): free each of its stages (the
/// other WG and the cluster peers still use them) without MMAs, and consume the
/// residual's C stage (the loader streams C for every tile). False, doing nothing, for a
/// live tile.
template <class Cfg, class Ring>
__device__ __forceinline__ bool skip_dead_tile(const TileJob& job, Ring& ring, typename Cfg::EpiPipe& epi,
                                               int lane, int num_kb) {
  if (job.waves_live != 0) return false;
  for (int kb = 0; kb < num_kb; ++kb) {
    ring.wait_producer();
    release_input_barrier<Cfg>(ring.consumer_mbar(ring.consumer_stage()), lane);
    ring.consumer_step();
  }
  if constexpr (Cfg::kResidual) {
    auto c_stage = epi.acquire_consumer();
    std::move(c_stage).release();
  }
  return true;
}

/// Begin tiles from t on (advancing t by the order's stride), skipping those this WG holds
/// no rows of (skip_dead_tile), until one it does: that one goes to `job`. False when the
/// order has no tile left.
template <class Cfg, class Ring>
__device__ __forceinline__ bool next_live_tile(MathWG<Cfg>& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                               const GroupedTileOrder& order, const Fp8GemmParams& p,
                                               int& t, TileJob& job) {
  for (; t < order.count(); t += order.stride) {
    job = m.begin_tile(order, p, t);
    if (!skip_dead_tile<Cfg>(job, ring, epi, m.lane, p.num_kb)) return true;
  }
  return false;
}

template <class Cfg, int W>
__device__ __forceinline__ void zero(float (&acc)[W][Cfg::kAcc]) {
#pragma unroll
  for (int w = 0; w < W; ++w)
#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[w][i] = 0.0f;
}

/// Wait for the wave in flight in `acc` (wave `wave` of stage s, scales sc), free the
/// stage when it was the stage's last live wave (its smem is no longer read: the scales
/// are in registers), promote it into that wave's final accumulator.
template <class Cfg, class Ring>
__device__ __forceinline__ void finish_wave(Ring& ring, float (&final_w)[Cfg::kAcc], float (&acc)[Cfg::kAcc],
                                            const KScales& sc, uint32_t s, int wave, const TileJob& job,
                                            int lane) {
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  if (wave == job.waves_live - 1) {
    release_input_barrier<Cfg>(ring.consumer_mbar(s), lane);
    ring.consumer_step();
  }
  promote<Cfg>(final_w, acc, sc, job.former);
}

/// finish_wave for a tile whose every wave is live (the common case): the stage is freed
/// right after the last wave's wgmma_wait, before its FFMAs, with no branch (the wave is
/// a compile-time index), and the next stage's full barrier is polled there too, so the
/// next K block starts without a wait when its data has landed. (With the release under
/// a run-time condition, the compiler sank it past 62 of the 64 FFMAs, and the producer,
/// 3 stages ahead, refilled that much later: ncu showed the math WGs 2.7x as long on the
/// full barrier as DeepGEMM's kernel of the same design. Fixing it: +7% at the largest
/// shapes, H200.)
/// `s` is the ring's stage and `s_next` the one after it (constants in an unrolled loop).
template <class Cfg, int kWave, class Ring>
__device__ __forceinline__ void finish_full_wave(Ring& ring, float (&final_w)[Cfg::kAcc],
                                                 float (&acc)[Cfg::kAcc], const KScales& sc, uint32_t s,
                                                 uint32_t s_next, const TileJob& job, int lane,
                                                 bool& next_ready) {
  ptx::wgmma_wait<0>();
  if constexpr (kWave == Cfg::kWaves - 1) {
    release_input_barrier<Cfg>(ring.consumer_mbar(s), lane);
    ring.consumer_step();
    next_ready = ring.try_wait_producer_at(s_next);
  }
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  promote<Cfg>(final_w, acc, sc, job.former);
}

/// The ring stage after `s`.
template <class Cfg>
__device__ __forceinline__ uint32_t next_stage(uint32_t s) {
  return s + 1 == static_cast<uint32_t>(Cfg::STAGES) ? 0u : s + 1;
}

/// One K block (kb >= 1) of a tile whose every wave is live, in stage `s` (the ring's):
/// wait for its data (unless the last release's poll saw it), then each wave's wgmmas,
/// wait, promote.
template <class Cfg, bool kConstStage, class Ring>
__device__ __forceinline__ void full_waves_k_block(Ring& ring, const TileDescs<Cfg>& descs_in,
                                                   float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                   float (&acc)[Cfg::kAcc], const TileJob& job, int lane,
                                                   int kb, int num_kb, uint32_t s, bool& next_ready) {
  // With a constant stage (kConstStage) the descriptor bases are made opaque here: the
  // compiler otherwise hoists every stage's 64-bit descriptors out of the loop and
  // spills them.
  TileDescs<Cfg> descs = descs_in;
  if constexpr (kConstStage) asm volatile("" : "+r"(descs.a_lo0), "+r"(descs.b_lo0));
  if (!next_ready) ring.wait_producer_at(s);  // A, B, A-scales of K block kb have landed
  const KScales sc_0 = read_scales<Cfg>(descs, s, 0, job.sfb, kb, num_kb);
  issue_k_block<Cfg>(acc, descs.a_lo(s, 0), descs.b_lo(s));
  finish_full_wave<Cfg, 0>(ring, final_acc[0], acc, sc_0, s, next_stage<Cfg>(s), job, lane, next_ready);
  if constexpr (Cfg::kWaves == 2) {
    const KScales sc_1 = read_scales<Cfg>(descs, s, 1, job.sfb, kb, num_kb);
    issue_k_block<Cfg>(acc, descs.a_lo(s, 1), descs.b_lo(s));
    finish_full_wave<Cfg, 1>(ring, final_acc[1], acc, sc_1, s, next_stage<Cfg>(s), job, lane, next_ready);
  }
}

/// K blocks 1 .. num_kb-1 of a full tile with compile-time stage indices: K block 1 sits
/// in stage S1 (the ring's stage, dispatched on once per tile: full_waves_rest_from), so
/// every stage address, descriptor word and barrier of the loop is a constant offset and
/// the ring's index steps fold away. The loop runs whole laps of the ring (STAGES K
/// blocks each), then up to STAGES - 1 K blocks, each under its own check. (Free
/// functions: a struct of references here was kept in local memory.)
template <class Cfg, int S, int N, class Ring>
__device__ __forceinline__ void full_waves_lap(Ring& ring, const TileDescs<Cfg>& descs,
                                               float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                               float (&acc)[Cfg::kAcc], const TileJob& job, int lane,
                                               int kb, int num_kb, bool& next_ready) {
  if constexpr (N > 0) {  // N K blocks from kb, the first in stage S
    full_waves_k_block<Cfg, true>(ring, descs, final_acc, acc, job, lane, kb, num_kb, S, next_ready);
    full_waves_lap<Cfg, (S + 1) % Cfg::STAGES, N - 1>(ring, descs, final_acc, acc, job, lane, kb + 1,
                                                      num_kb, next_ready);
  }
}
template <class Cfg, int S, int N, class Ring>
__device__ __forceinline__ void full_waves_tail(Ring& ring, const TileDescs<Cfg>& descs,
                                                float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                float (&acc)[Cfg::kAcc], const TileJob& job, int lane,
                                                int kb, int num_kb, bool& next_ready) {
  if constexpr (N > 0) {  // K blocks kb .. num_kb-1 (at most N), the first in stage S
    if (kb < num_kb) {
      full_waves_k_block<Cfg, true>(ring, descs, final_acc, acc, job, lane, kb, num_kb, S, next_ready);
      full_waves_tail<Cfg, (S + 1) % Cfg::STAGES, N - 1>(ring, descs, final_acc, acc, job, lane, kb + 1,
                                                         num_kb, next_ready);
    }
  }
}
template <class Cfg, int S1 = 0, class Ring>
__device__ __forceinline__ void full_waves_rest_from(Ring& ring, const TileDescs<Cfg>& descs,
                                                     float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                     float (&acc)[Cfg::kAcc], const TileJob& job,
                                                     int lane, int num_kb, uint32_t s1, bool& next_ready) {
  if constexpr (S1 < Cfg::STAGES) {
    if (s1 == S1) {
      int kb = 1;
      for (; kb + Cfg::STAGES <= num_kb; kb += Cfg::STAGES)
        full_waves_lap<Cfg, S1, Cfg::STAGES>(ring, descs, final_acc, acc, job, lane, kb, num_kb, next_ready);
      full_waves_tail<Cfg, S1, Cfg::STAGES - 1>(ring, descs, final_acc, acc, job, lane, kb, num_kb,
                                                next_ready);
    } else {
      full_waves_rest_from<Cfg, S1 + 1>(ring, descs, final_acc, acc, job, lane, num_kb, s1, next_ready);
    }
  }
}

/// mainloop_waves for a tile whose every wave is live: no run-time branch between a
/// wave's wait, the stage release and the next wave's issue.
template <class Cfg, class Ring>
__device__ __forceinline__ void mainloop_full_waves(Ring& ring, const TileDescs<Cfg>& descs,
                                                    float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                    float (&acc)[Cfg::kAcc], const TileJob& job, int lane,
                                                    int num_kb, uint32_t s0, const KScales& sc0) {
  bool next_ready = false;
  const uint32_t s1 = next_stage<Cfg>(s0);
  finish_full_wave<Cfg, 0>(ring, final_acc[0], acc, sc0, s0, s1, job, lane, next_ready);
  if constexpr (Cfg::kWaves == 2) {
    const KScales sc = read_scales<Cfg>(descs, s0, 1, job.sfb, 0, num_kb);
    issue_k_block<Cfg>(acc, descs.a_lo(s0, 1), descs.b_lo(s0));
    finish_full_wave<Cfg, 1>(ring, final_acc[1], acc, sc, s0, s1, job, lane, next_ready);
  }
  // Unrolled (one loop per starting stage) where it was measured: 256-row tiles, 3
  // stages. The one-wave tiles (192 rows, or 192 columns) keep the plain loop; unrolled,
  // the 128x192 one spilled.
  if constexpr (Cfg::kWaves == 2 && Cfg::STAGES <= 4) {
    full_waves_rest_from<Cfg>(ring, descs, final_acc, acc, job, lane, num_kb, s1, next_ready);
  } else {
    for (int kb = 1; kb < num_kb; ++kb)
      full_waves_k_block<Cfg, false>(ring, descs, final_acc, acc, job, lane, kb, num_kb,
                                     __shfl_sync(0xffffffffu, ring.consumer_stage(), 0), next_ready);
  }
}

/// The first wave of a tile: wait for K block 0's stage, issue its wave 0 into `acc`
/// (not waited for); its stage and scales go to `s0` / `sc0` for the tile's main loop.
template <class Cfg, class Ring>
__device__ __forceinline__ void issue_first_wave(Ring& ring, const TileDescs<Cfg>& descs,
                                                 float (&acc)[Cfg::kAcc], const TileJob& job,
                                                 int num_kb, uint32_t& s0, KScales& sc0) {
  ring.wait_producer();
  s0 = __shfl_sync(0xffffffffu, ring.consumer_stage(), 0);
  sc0 = read_scales<Cfg>(descs, s0, 0, job.sfb, 0, num_kb);
  issue_k_block<Cfg>(acc, descs.a_lo(s0, 0), descs.b_lo(s0));
}

/// Main loop of one tile with one accumulator: per K block and live wave, 4 wgmmas, wait,
/// promote into that wave's final accumulator. K block 0's wave 0 is already in flight
/// (issue_first_wave, stage s0, scales sc0): a chain issues it before the previous
/// tile's epilogue. Every wgmma is waited for on the path that issued it: a conditional
/// issue ahead of a shared wait makes ptxas serialize all of them (C7518), and a form
/// with one wait site for every issue measured 7-9% slower (H200, 06e00d8).
template <class Cfg, class Ring>
__device__ __forceinline__ void mainloop_waves(Ring& ring, const TileDescs<Cfg>& descs,
                                               float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                               float (&acc)[Cfg::kAcc], const TileJob& job, int lane,
                                               int num_kb, uint32_t s0, const KScales& sc0) {
  finish_wave<Cfg>(ring, final_acc[0], acc, sc0, s0, 0, job, lane);
#pragma unroll
  for (int wave = 1; wave < Cfg::kWaves; ++wave) {
    if (wave < job.waves_live) {
      const KScales sc = read_scales<Cfg>(descs, s0, wave, job.sfb, 0, num_kb);
      issue_k_block<Cfg>(acc, descs.a_lo(s0, wave), descs.b_lo(s0));
      finish_wave<Cfg>(ring, final_acc[wave], acc, sc, s0, wave, job, lane);
    }
  }
  for (int kb = 1; kb < num_kb; ++kb) {
    ring.wait_producer();  // A, B, A-scales of K block kb have landed
    const uint32_t s = ring.consumer_stage();
#pragma unroll
    for (int wave = 0; wave < Cfg::kWaves; ++wave) {
      if (wave < job.waves_live) {
        const KScales sc = read_scales<Cfg>(descs, s, wave, job.sfb, kb, num_kb);
        issue_k_block<Cfg>(acc, descs.a_lo(s, wave), descs.b_lo(s));
        finish_wave<Cfg>(ring, final_acc[wave], acc, sc, s, wave, job, lane);
      }
    }
  }
}

/// Math WG with one accumulator (BLOCK_M 256, BLOCK_N 192, or JAX_SM100_FP8_OVERLAP=0),
/// tile by tile. Chained (p.chain_tiles): at a tile's end the next tile's first wave is
/// issued before this tile's epilogue, so the tensor cores work while it stores (the
/// registers allow it: the epilogue reads the finals, the wave runs in the accumulator).
/// A tile the WG holds no rows of breaks the chain (skip_dead_tile).
/// Drives the ring through its stage-index API (a stage is held across the epilogue).
template <class Cfg, class Ring>
__device__ __forceinline__ void math_loop_waves(MathWG<Cfg>& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                                const TileDescs<Cfg>& descs, const CUtensorMap* map_d,
                                                const Fp8GemmParams& p, const GroupedTileOrder& order) {
  float final_acc[Cfg::kWaves][Cfg::kAcc], acc[Cfg::kAcc];

  int t = order.first;
  TileJob job;
  while (next_live_tile<Cfg>(m, ring, epi, order, p, t, job)) {
    uint32_t s0;  // a chain of live tiles
    KScales sc0;
    issue_first_wave<Cfg>(ring, descs, acc, job, p.num_kb, s0, sc0);
    while (true) {
      zero<Cfg>(final_acc);
      if (job.waves_live == Cfg::kWaves)
        mainloop_full_waves<Cfg>(ring, descs, final_acc, acc, job, m.lane, p.num_kb, s0, sc0);
      else
        mainloop_waves<Cfg>(ring, descs, final_acc, acc, job, m.lane, p.num_kb, s0, sc0);
      const TileJob done = job;
      t = job.t + order.stride;
      if (!p.chain_tiles || t >= order.count() || m.waves_live(order, p, t) == 0) {
        store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
        break;
      }
      job = m.begin_tile(order, p, t);
      issue_first_wave<Cfg>(ring, descs, acc, job, p.num_kb, s0, sc0);  // runs during the epilogue
      store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
    }
  }
}

/// Math WG with overlapped promotion (one wave): K block kb+1's wgmmas are issued into
/// the other accumulator before K block kb's is promoted (wgmma.wait_group 1), so the
/// tensor cores stay busy during the FFMAs. The overlap runs across tiles: the next
/// tile's first K block is issued before this tile's last one is promoted and stored,
/// so the epilogue runs while the tensor cores work too. A tile the WG holds no rows of
/// breaks the chain: its stages are freed without MMAs. Holding two stages at once, the
/// loop drives the ring through the pipeline's stage-index API (wait_producer /
/// consumer_stage / consumer_mbar / consumer_step).
template <class Cfg, class Ring>
__device__ __forceinline__ void math_loop_chained(MathWG<Cfg>& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                                  const TileDescs<Cfg>& descs, const CUtensorMap* map_d,
                                                  const Fp8GemmParams& p, const GroupedTileOrder& order) {
  static_assert(Cfg::kWaves == 1, "overlapped promotion: one wave");
  float final_acc[1][Cfg::kAcc], acc0[Cfg::kAcc], acc1[Cfg::kAcc];

  int t = order.first;
  TileJob job;
  while (next_live_tile<Cfg>(m, ring, epi, order, p, t, job)) {
    // A chain of live tiles. `prev`: the K block in flight (stage s_prev, its scales
    // sc_prev, its tile's former_prev); kb: the next K block of `job` to issue.
    zero<Cfg>(final_acc);
    ring.wait_producer();
    uint32_t s_prev = ring.consumer_stage();
    KScales sc_prev = read_scales<Cfg>(descs, s_prev, 0, job.sfb, 0, p.num_kb);
    int former_prev = job.former;
    issue_k_block<Cfg>(acc0, descs.a_lo(s_prev, 0), descs.b_lo(s_prev));
    ring.consumer_step();
    int kb = 1;

    // Issue the next K block (of this tile, or the first of the next) into `next`, then
    // retire `prev`; when `prev` ended a tile, store that tile. False, issuing nothing,
    // when `prev` ended the chain.
    auto step = [&](float (&next)[Cfg::kAcc], float (&prev)[Cfg::kAcc]) -> bool {
      const bool tile_end = kb == p.num_kb;
      const TileJob done = job;
      if (tile_end) {
        const int t_next = job.t + order.stride;
        if (!p.chain_tiles || t_next >= order.count() || m.waves_live(order, p, t_next) == 0)
          return false;
        job = m.begin_tile(order, p, t_next);
        kb = 0;
      }
      ring.wait_producer();
      const uint32_t s = ring.consumer_stage();
      const KScales sc = read_scales<Cfg>(descs, s, 0, job.sfb, kb, p.num_kb);
      issue_k_block<Cfg>(next, descs.a_lo(s, 0), descs.b_lo(s));
      ring.consumer_step();
      ptx::wgmma_wait<1>();  // `prev` done; `next` may still run
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(prev[i]);
      release_input_barrier<Cfg>(ring.consumer_mbar(s_prev), m.lane);
      promote<Cfg>(final_acc[0], prev, sc_prev, former_prev);
      if (tile_end) {  // `next` runs on the tensor cores meanwhile
        store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
        zero<Cfg>(final_acc);
      }
      s_prev = s;
      sc_prev = sc;
      former_prev = job.former;
      ++kb;
      return true;
    };
    auto retire = [&](float (&last)[Cfg::kAcc]) {
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(last[i]);
      release_input_barrier<Cfg>(ring.consumer_mbar(s_prev), m.lane);
      promote<Cfg>(final_acc[0], last, sc_prev, former_prev);
    };
    // Unrolled by two so each accumulator stays a fixed register array. Each half keeps
    // its own exit and wait: a loop whose in-flight wgmma crosses the back-edge must have
    // at least two exits, each with its own wgmma_wait, or ptxas serializes every wgmma of
    // the kernel (C7514; reproduced with a minimal kernel in the tenth session).
    while (true) {
      if (!step(acc1, acc0)) { retire(acc0); break; }
      if (!step(acc0, acc1)) { retire(acc1); break; }
    }
    store_tile<Cfg>(final_acc, m, epi, map_d, p, job);
    t = job.t + order.stride;
  }
}

/// A math WG: its per-WG state, C pipeline and wgmma descriptors, then the main loop of
/// the configuration (overlapped promotion, or one accumulator).
template <class Cfg>
__device__ __forceinline__ void math_wg(typename Cfg::InputPipe& pipe, typename Cfg::Smem* smem,
                                        float* sfb_all, const CUtensorMap* map_d, const Fp8GemmParams& p,
                                        const GroupedTileOrder& order) {
  MathWG<Cfg> m(smem, sfb_all, p);
  // This WG's C pipeline (built from its own barriers: a run-time index into an array of
  // pipelines would put the array in local memory).
  typename Cfg::EpiPipe epi(smem->epi_bars[m.wg], "fp8_c");
  const TileDescs<Cfg> descs(*pipe.tiles, m.wg, m.r0);
  if constexpr (Cfg::kOverlap) math_loop_chained<Cfg>(m, pipe.pipeline, epi, descs, map_d, p, order);
  else math_loop_waves<Cfg>(m, pipe.pipeline, epi, descs, map_d, p, order);
  // The last store must have left shared memory before the CTA exits; its global writes
  // complete with the kernel.
  if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();
}

/// The kernel. Launch: grid = a multiple of Cfg::kCluster, at most one CTA per SM (the
/// cluster-tile loop covers the rest), cluster dims (kCluster, 1, 1), block =
/// Cfg::kThreads, dynamic smem = Cfg::smem_bytes(num_kb). map_a's box has
/// BLOCK_M / kClusterN rows, map_b's BLOCK_N / kClusterM. map_c is unused unless
/// Cfg::kResidual.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                         const __grid_constant__ CUtensorMap map_b,
                         const __grid_constant__ CUtensorMap map_sfa,
                         const __grid_constant__ CUtensorMap map_d,
                         const __grid_constant__ CUtensorMap map_c, const Fp8GemmParams p) {
#if JAX_SM100_SM90A_DEVICE
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA/WGMMA tiles need 1024-byte alignment. Aligned by pointer
  // arithmetic on smem_raw, not through an integer: that keeps every later access a
  // shared-space one (LDS/STS), where the integer round trip made them generic LD/ST.
  auto* smem = reinterpret_cast<typename Cfg::Smem*>(
      smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u));
  float* sfb_all = reinterpret_cast<float*>(smem + 1);  // (2, kScaleBRows, num_kb)

  typename Cfg::InputPipe pipe(smem->input_bars, &smem->tiles, "fp8_input");
  GroupedTileOrder order;
  order.group_m = p.group_m;
  order.num_m = p.order_m;
  order.num_n = p.order_n;
  order.div_group = p.div_group;
  order.div_rows = p.div_rows;
  order.div_last_rows = p.div_last_rows;
  order.cluster_m = Cfg::kClusterM;
  order.cluster_n = Cfg::kClusterN;
  const int rank = Cfg::kCluster > 1 ? static_cast<int>(ptx::block_rank_in_cluster()) : 0;
  order.rank_m = rank % Cfg::kClusterM;
  order.rank_n = rank / Cfg::kClusterM;
  order.first = blockIdx.x / Cfg::kCluster;
  order.stride = gridDim.x / Cfg::kCluster;

  if (threadIdx.x == Cfg::kMathThreads) {
    // full: 1 arrival (the producer's expect_bytes) + TMA bytes;
    // empty: one lane per math warp of every CTA in the cluster.
    pipe.init_barriers(1, Cfg::kMathWGs * 4 * Cfg::kCluster);
    if constexpr (Cfg::kResidual) {
      for (int w = 0; w < Cfg::kMathWGs; ++w) typename Cfg::EpiPipe(smem->epi_bars[w]).init_barriers(1, 128);
    }
    typename Cfg::ScalePipe(smem->sfb_bars).init_mbars(32, Cfg::kMathWGs * 4);
    ptx::tma_prefetch_descriptor(&map_a);
    ptx::tma_prefetch_descriptor(&map_b);
    ptx::tma_prefetch_descriptor(&map_sfa);
    ptx::tma_prefetch_descriptor(&map_d);
    if constexpr (Cfg::kResidual) ptx::tma_prefetch_descriptor(&map_c);
  }
  // Barrier init must be visible to the peer CTA (remote arrivals, multicast tx) too.
  if constexpr (Cfg::kCluster > 1) ptx::cluster_sync();
  else __syncthreads();

  if (threadIdx.x >= Cfg::kMathThreads) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    const uint32_t warp = ptx::warp_idx_sync() - Cfg::kMathThreads / 32;
    const uint32_t lane = ptx::lane_id();
    if (warp == 0) {
      producer_loop<Cfg>(pipe, &map_a, &map_b, &map_sfa, p, order);
    } else if (warp == 2) {
      typename Cfg::ScalePipe sfb_pipe(smem->sfb_bars, "fp8_b_scales");
      b_scale_loop<Cfg>(sfb_pipe, sfb_all, p, order);
    } else if constexpr (Cfg::kResidual) {
      if (warp == 1 && lane == 0) epi_load_loop<Cfg>(smem, &map_c, order);
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kMathRegs>();
    math_wg<Cfg>(pipe, smem, sfb_all, &map_d, p, order);
  }
#else
  (void)map_a; (void)map_b; (void)map_sfa; (void)map_d; (void)map_c; (void)p;
  __trap();  // built for another arch: the handler never launches this there
#endif
}

}  // namespace jax_sm100::kernels::sm90_fp8
