// sm_90a blockwise-scaled FP8 GEMM, part 2 of 5: the producer warpgroup's warp roles.
//   warp 0  TMA producer: A tile, B tile and A's scales of one K block into one input stage
//           (one transaction), with multicast across the cluster;
//   warp 1  epilogue-load warp (residual only): C, one stage per math WG and tile;
//   warp 2  B-scale warp: each tile's B-scale row into a two-stage ring, ahead of the
//           math WGs.
// Each walks the same persistent tile order as the math WGs.
#pragma once

#include <stdint.h>

#include <utility>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_config.cuh"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/tma.cuh"

namespace jax_sm100::kernels::sm90_fp8 {

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
                                       int kb, int nt, const TileScheduler& order) {
  const uint32_t mask = ((1u << Cfg::kClusterM) - 1) << (order.rank_n * Cfg::kClusterM);
  load_tile_part<Cfg, Cfg::BLOCK_N, Cfg::kClusterM>(b_tile, map_b, bar, kb, nt * Cfg::BLOCK_N,
                                                    order.rank_m, mask);
}

/// A tile of K block kb, M tile mt: split among the CTAs along N, which share it: the
/// CTAs of this cluster row (ranks rank_m + j * kClusterM).
template <class Cfg>
__device__ __forceinline__ void load_a(uint8_t* a_tile, const CUtensorMap* map_a, uint64_t* bar,
                                       int kb, int mt, const TileScheduler& order) {
  uint32_t mask = 0;
#pragma unroll
  for (int j = 0; j < Cfg::kClusterN; ++j) mask |= 1u << (order.rank_m + j * Cfg::kClusterM);
  load_tile_part<Cfg, Cfg::BLOCK_M, Cfg::kClusterN>(a_tile, map_a, bar, kb, mt * Cfg::BLOCK_M,
                                                    order.rank_n, mask);
}

/// Producer (last WG, warp 0): per tile, per K block, one stage: A, B, A-scales, all by
/// TMA in one transaction, issued by one lane.
template <class Cfg>
__device__ __forceinline__ void producer_loop(typename Cfg::InputPipe& pipe, const CUtensorMap* map_a,
                                              const CUtensorMap* map_b, const CUtensorMap* map_sfa,
                                              const Fp8GemmParams& p, TileScheduler order) {
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

/// Epilogue-load warp (last WG, warp 1, one lane; residual only): C's 64-row half of each
/// tile for each math WG, one transaction per stage.
template <class Cfg>
__device__ __forceinline__ void epi_load_loop(typename Cfg::Smem* smem, const CUtensorMap* map_c,
                                              TileScheduler order) {
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

/// B-scale warp (last WG, warp 2): per tile, in the math WGs' order, the tile's B-scale
/// row (num_kb floats; clamped: a pair along N may hold an N tile past the matrix) into
/// one ScalePipe stage. It runs up to two tiles ahead, so the global reads' latency
/// hides behind the math WGs' main loop, and the math WGs spend nothing on them between
/// tiles but one barrier wait.
template <class Cfg>
__device__ __forceinline__ void b_scale_loop(typename Cfg::ScalePipe& pipe, float* sfb_all,
                                             const Fp8GemmParams& p, TileScheduler order) {
  const int lane = static_cast<int>(ptx::lane_id());
  const int words = p.num_kb;
  for (int t = order.first; t < order.count(); t += order.stride) {
    int mt, nt;
    order.tile(t, mt, nt);
    const int nb = min(nt * Cfg::BLOCK_N / Cfg::kScaleBlock, p.num_nb - 1);
    auto stage = pipe.acquire_producer();  // the math WGs are done with this buffer
    float* dst = sfb_all + stage.index() * words;
    const float* src = p.b_scale + nb * p.num_kb;
#pragma unroll 4  // up to 4 loads in flight per lane (K up to 512 blocks: 16 passes)
    for (int kb = lane; kb < p.num_kb; kb += 32) dst[kb] = __ldg(src + kb);
    stage.mbar()->arrive();  // every lane: its stores, released to the math WGs
    std::move(stage).release();
  }
}

}  // namespace jax_sm100::kernels::sm90_fp8
