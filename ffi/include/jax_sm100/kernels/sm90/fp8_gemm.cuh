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
//            Per 128-wide K block (= one scale block) and wave, 4 x wgmma m64nNk32 e4m3
//            into a fresh fp32 accumulator, then promote: final[wave] += acc *
//            a_scale[row] * b_scale. The tensor cores keep only ~14 bits of the FP8 sum,
//            so this per-block fp32 promotion is required, not an optimisation. 128-row
//            tiles promote overlapped: the next K block's wgmmas run during this one's
//            FFMAs, across tiles too (math_loop_chained); with one accumulator
//            (math_loop_waves: 192 and 256 rows) the next tile's first wave runs during
//            this tile's epilogue, and a 256-row tile whose waves are all live runs a K
//            loop unrolled over the pipeline ring (constant stage indices). Epilogue:
//            bf16 into 128B-swizzled smem, TMA store (each WG its own rows, so the math
//            WGs never wait on each other).
//   last WG  warp 0: TMA producer: A tile, B tile and A's scales of one K block land in
//            one InputTilePipeline<BlockwiseFP8TilePayload> stage (one expect_bytes);
//            warp 1 (residual only): epilogue-load warp streaming C through one
//            EpiLoadPipeline per math WG (consumer count 128 = that WG's threads);
//            warp 2: B-scale warp, each tile's B-scale row into a two-stage ring.
//   setmaxnreg: producers drop to 40 registers, math WGs grow to 232 (32 / 160 with three
//   math WGs).
//   Clusters: 128-row tiles on 1 CTA or a pair along M (B multicast), 256-row tiles on 1
//   CTA or a pair along N (A multicast), 192-row tiles on 1 CTA.
// B's scales: every N tile (64 or 128 wide) lies in one 128-column scale block. The
// B-scale warp copies each tile's scale row into one of two shared buffers, up to two
// tiles ahead, so between tiles the math WGs only wait on a barrier that has long
// completed. (Copied by the math WGs themselves, the copy and its barrier lay between
// one tile's last wgmma and the next one's first: the warp gained 1.2-1.5% at K = 1536
// and 2048, H200.)
//
// Partial tiles: TMA zero-fills out-of-bounds A/B/scale reads (K tail contributes 0)
// and clips the D store; a math WG whose 64 rows are all past M skips its MMAs. When
// one M tile holds all of M (decode shapes), A's and A-scales' TMA boxes stop at M
// (rounded up to 8 rows / 4 scales) instead: zero-filling the out-of-bounds rows made
// the loads slow in proportion to their number (M = 16: 27.9 us against 17.5 with A
// padded to 128 rows, H200). The tile's rows past the box keep stale smem; they only
// feed output rows >= M, which are never stored.
//
// The kernel is split top to bottom into
//   fp8_gemm_config.cuh    Fp8GemmConfig (budgets, smem carve-up), Fp8GemmParams
//   fp8_gemm_loads.cuh     producer, epilogue-load and B-scale warps
//   fp8_gemm_math.cuh      math WG building blocks and the epilogue
//   fp8_gemm_mainloop.cuh  math WG main loops
//   fp8_gemm.cuh           this file: the kernel entry (barrier init, role split)
#pragma once

#include <cuda.h>
#include <stdint.h>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_config.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_loads.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_mainloop.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_math.cuh"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::kernels::sm90_fp8 {

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
  float* sfb_all = reinterpret_cast<float*>(smem + 1);  // (2, num_kb)

  typename Cfg::InputPipe pipe(smem->input_bars, &smem->tiles, "fp8_input");
  const int rank = Cfg::kCluster > 1 ? static_cast<int>(ptx::block_rank_in_cluster()) : 0;
  const TileScheduler order =
      TileScheduler::make(p.order, Cfg::kClusterM, Cfg::kClusterN, rank,
                          static_cast<int>(blockIdx.x / Cfg::kCluster),
                          static_cast<int>(gridDim.x / Cfg::kCluster));

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
