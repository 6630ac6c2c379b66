// The sm_90a FP8 M-grouped GEMM (the DeepSeek recipe per expert):
//
//   out[r, :] (bf16) = sum_kb (a[r, kb] * a_scale[r, kb]) @ (b[g(r)][:, kb] * b_scale[g(r)][nb, kb])^T
//
// for the rows r of group g, zeros for the rows in no group. It is the dense FP8 kernel
// (kernels/sm90/fp8_gemm*.cuh: Fp8GemmConfig 128 x 128 on one CTA with the overlapped
// main loop math_loop_chained, or 256 x 128 with math_loop_waves on one CTA or a pair
// along N; the same wgmma and per-128-K-block fp32 promotion, so the same numerics) over
// the grouped tile order (common/grouped_scheduler.cuh):
//   * every role decodes tile t through GroupedOrder::tile (its own cached lookup into
//     the CTA's group table, built by warp 3 of the producer warpgroup before the role
//     split); the order holds the tiles of groups 0..G-1 only; with a pair along N its
//     columns are pairs of N tiles, both CTAs of a cluster walking the same tiles;
//   * the producer loads A from the tile's first row (any row: A's rows are the TMA box's
//     outer dimension; a pair multicasts its halves) and B through a (G, N, K) tensor
//     map, the group as the outer coordinate; the B-scale warp reads the group's
//     (ceil(N/128), ceil(K/128)) block;
//   * A's scales come by TMA in the stage's transaction when the tile's first row is a
//     multiple of 4; else by the producer warp's 32 lanes with 4-byte cp.async, each
//     lane's copies signalled on the stage's full barrier (cp.async.mbarrier.arrive
//     .noinc): a_scale_t's rows are its inner dimension, and a TMA box whose inner start
//     address is not 16-byte aligned faults (illegal instruction), while a group, hence
//     a tile, may start at any row;
//   * a math warpgroup whose rows all lie past its group's end holds no rows of the tile
//     (waves_live 0: it frees the stages, as the dense kernel does for rows past M); a
//     wave whose 64 rows are cut by the group's end stores the valid rows from its staged
//     tile with 16-byte stores (a TMA box would overwrite the next group's rows);
//   * warp 1 of the producer warpgroup writes the zeros of the rows in no group, rows
//     spread over the CTAs.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include <utility>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/common/named_barrier.cuh"
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

/// The grouped kernel's shared memory beyond the dense configuration's: the group table
/// after the largest B-scale rows, as large as the rest allows (at most 4096 entries).
template <class Cfg>
struct GroupedFp8Layout {
  static constexpr uint32_t kTableOffset = sizeof(typename Cfg::Smem) + Cfg::kSfbBytes;
  static constexpr int kTableEntries =
      (kSmemLimit - 1024 - kTableOffset) / 8 > 4096 ? 4096 : (kSmemLimit - 1024 - kTableOffset) / 8;
  static_assert(kTableEntries >= 256, "room for a group table of at least 255 groups");
  static constexpr uint32_t kSmemBytes = 1024 + kTableOffset + kTableEntries * 8;
  static_assert(kSmemBytes <= kSmemLimit, "shared memory budget");
};

/// Run-time parameters: the dense kernel's (m, n, k, num_kb, num_nb, b_scale = the (G,
/// num_nb, num_kb) scales, stage_tx_bytes; `order` unused) and the grouped order's.
struct GroupedFp8Params : Fp8GemmParams {
  const int32_t* group_sizes;  ///< (G,) device memory
  const float* a_scale_t;      ///< (num_kb, mp) f32: A's scales, transposed
  int mp;                      ///< a_scale_t's row length: round_up(m, 4)
  __nv_bfloat16* out;          ///< (m, n): the masked stores and the rows in no group
  GroupedOrder groups;         ///< the tile order over the groups
};

/// The walk of one CTA over the order's tiles (what the math loops read of it). With a
/// pair along N (Cfg::kClusterN == 2) the order's tile columns are pairs of N tiles: both
/// CTAs of a cluster walk the same tiles (same rows, same group, A shared by multicast),
/// the CTA of rank `rank` taking N tile 2 * column + rank.
struct GroupedFp8Walk {
  int first, stride, total;
  int rank;  ///< the CTA's rank in its pair along N (0 without a cluster)
  __device__ __forceinline__ int count() const { return total; }
};

/// The N tile of order tile x that this CTA computes (it may lie past N: the second of a
/// pair when N spans an odd number of tiles; its waves are then dead).
template <class Cfg>
__device__ __forceinline__ int cta_n_tile(const GroupedTile& x, int rank) {
  return x.n_tile * Cfg::kClusterN + rank;
}

/// One tile as a math WG sees it (the members math_loop_chained and store_tile read).
struct GroupedFp8Job {
  int t;
  int group, nt, n0;
  int row0, row_end;  // the tile's first row; rows from row_end on are the next group's
  int waves_live;     // this WG's waves whose 64 rows start inside the group
  uint32_t sfb;       // shared address of the tile's B-scale row
};

/// Per-WG state: the dense kernel's (MathWG) plus the group table and this WG's cached
/// lookup.
template <class Cfg>
struct GroupedFp8Math : MathWG<Cfg> {
  const GroupTableEntry* table;
  GroupSpan cache;

  __device__ __forceinline__ GroupedFp8Math(typename Cfg::Smem* smem, float* sfb, const GroupedFp8Params& p,
                                            const GroupTableEntry* t)
      : MathWG<Cfg>(smem, sfb, p), table(t) {}

  /// This WG's waves (64 rows each, kWaveRows apart) that start inside the tile's group:
  /// a prefix of the waves (0 when the N tile lies past N).
  __device__ __forceinline__ int waves_of(const GroupedFp8Params& p, const GroupedTile& x, int rank) const {
    const int row_wg = x.row0 + this->wg * Cfg::WG_M;
    return cta_n_tile<Cfg>(x, rank) * Cfg::BLOCK_N < p.n && row_wg < x.row_end
               ? min(Cfg::kWaves, (x.row_end - row_wg + Cfg::kWaveRows - 1) / Cfg::kWaveRows)
               : 0;
  }
  /// waves_live of tile t.
  __device__ __forceinline__ int waves_live(const GroupedFp8Walk& walk, const GroupedFp8Params& p, int t) {
    return waves_of(p, p.groups.tile(table, p.group_sizes, t, cache), walk.rank);
  }
  /// Start tile t (as MathWG::begin_tile: the B-scale stage moves on).
  __device__ __forceinline__ GroupedFp8Job begin_tile(const GroupedFp8Walk& walk, const GroupedFp8Params& p,
                                                       int t) {
    const GroupedTile x = p.groups.tile(table, p.group_sizes, t, cache);
    GroupedFp8Job job;
    job.t = t;
    job.group = x.group;
    job.nt = cta_n_tile<Cfg>(x, walk.rank);
    job.n0 = job.nt * Cfg::BLOCK_N;
    job.row0 = x.row0;
    job.row_end = x.row_end;
    job.waves_live = waves_of(p, x, walk.rank);
    job.sfb = this->next_scales();
    return job;
  }
};

/// Epilogue of one tile of a live WG (found by the math loops through argument-dependent
/// lookup): bf16 staging as the dense kernel (stage_final_acc); per live wave, 64 valid
/// rows go out by TMA store (clipped at N), fewer as 16-byte stores of the valid rows.
template <class Cfg>
__device__ __forceinline__ void store_tile(const float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                           const GroupedFp8Math<Cfg>& m, typename Cfg::EpiPipe& epi,
                                           const CUtensorMap* map_d, const GroupedFp8Params& p,
                                           const GroupedFp8Job& job) {
  static_assert(!Cfg::kResidual, "no residual");
  (void)epi;
  if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();  // last tile's store left smem
  named_barrier_sync(1 + m.wg, 128);  // ... and every thread's 16-byte stores read it
  stage_final_acc<Cfg>(final_acc, m);
  ptx::fence_proxy_async_shared_cta();  // st.shared -> TMA store (async proxy)
  named_barrier_sync(1 + m.wg, 128);    // the staging is complete
  constexpr int kChunks = Cfg::BLOCK_N / Cfg::kEpiChunk;
#pragma unroll
  for (int w = 0; w < Cfg::kWaves; ++w) {
    if (w >= job.waves_live) break;
    const int row_w = job.row0 + wave_row0<Cfg>(m.wg, w);
    const int valid = job.row_end - row_w;  // > 0: the wave is live
    const __nv_bfloat16* staged = m.d_wg + w * Cfg::WG_M * Cfg::BLOCK_N;
    if (valid >= Cfg::WG_M) {
      if (m.t128 == 0) {
#pragma unroll
        for (int ch = 0; ch < kChunks; ++ch)
          if (job.n0 + ch * Cfg::kEpiChunk < p.n)
            ptx::tma_store_2d(map_d, staged + ch * Cfg::WG_M * Cfg::kEpiChunk, job.n0 + ch * Cfg::kEpiChunk,
                              row_w);
      }
    } else {
      // 64 rows x 8 pieces of 16 bytes per 64-column chunk, 128 threads.
#pragma unroll
      for (int ch = 0; ch < kChunks; ++ch) {
#pragma unroll
        for (int i = 0; i < Cfg::WG_M * 8 / 128; ++i) {
          const int v = m.t128 + 128 * i;
          const int row = v / 8, piece = v % 8;
          const int col = job.n0 + ch * Cfg::kEpiChunk + piece * 8;
          if (row < valid && col < p.n) {  // n % 8 == 0: a piece is wholly inside or past N
            const uint4 val =
                *reinterpret_cast<const uint4*>(staged + staging_offset<Cfg>(row, ch * Cfg::kEpiChunk + piece * 8));
            *reinterpret_cast<uint4*>(p.out + static_cast<size_t>(row_w + row) * p.n + col) = val;
          }
        }
      }
    }
  }
  if (m.t128 == 0) ptx::tma_store_commit_group();
}

/// cp.async of one f32 from global to shared (address `dst`); with `valid` false nothing
/// is read and the word is zero-filled.
__device__ __forceinline__ void cp_async_f32(uint32_t dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 4u : 0u)
               : "memory");
}

/// One arrival on `bar` once every cp.async this thread issued so far has landed (.noinc:
/// the arrival counts against the barrier's expected arrivals).
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(ptx::smem_addr(bar)) : "memory");
}

/// Producer (last WG, warp 0; every lane walks): per tile, per K block, one stage: lane 0
/// issues A's rows from the tile's first row (with a pair along N, its half of them,
/// multicast to both CTAs) and B of its group and N tile by TMA (one transaction). A's
/// scales: by TMA in the same transaction when the tile's first row is a multiple of 4
/// (the box's global start is then 16-byte aligned, which TMA requires), every lane
/// arriving once; else every lane copies BLOCK_M / 32 of them (rows row0 + lane + 32 i;
/// rows past M zero-filled) and arrives on the full barrier when they land. Either way
/// the full barrier sees 1 + 32 arrivals.
template <class Cfg>
__device__ __forceinline__ void grouped_producer_loop(typename Cfg::InputPipe& pipe, const CUtensorMap* map_a,
                                                      const CUtensorMap* map_b, const CUtensorMap* map_sfa,
                                                      const GroupedFp8Params& p, const GroupTableEntry* table,
                                                      const GroupedFp8Walk& walk) {
  static_assert(Cfg::BLOCK_M % 32 == 0, "A's scales: BLOCK_M / 32 per lane");
  auto producer = pipe.producer();
  const uint32_t lane = ptx::lane_id();
  GroupSpan cache;
  for (int t = walk.first; t < walk.count(); t += walk.stride) {
    const GroupedTile x = p.groups.tile(table, p.group_sizes, t, cache);
    for (int kb = 0; kb < p.num_kb; ++kb) {
      auto stage = producer.acquire_stage();  // waits until both math WGs freed it
      uint64_t* bar = stage.mbar()->ptr();
      const bool tma_scales = x.row0 % 4 == 0;  // the same in every lane
      if (tma_scales) {
        stage.mbar()->arrive();
      } else {
        const uint32_t sfa = ptx::smem_addr(stage.sfa_tile());
        const float* src = p.a_scale_t + static_cast<size_t>(kb) * p.mp;
#pragma unroll
        for (int i = 0; i < Cfg::BLOCK_M / 32; ++i) {
          const int j = static_cast<int>(lane) + 32 * i, row = x.row0 + j;
          const bool valid = row < p.m;
          cp_async_f32(sfa + j * static_cast<uint32_t>(sizeof(float)), valid ? src + row : src, valid);
        }
        cp_async_arrive_noinc(bar);
      }
      if (lane == 0) {
        // One transaction: A + B (+ A's scales).
        stage.expect_bytes(p.stage_tx_bytes + (tma_scales ? Cfg::BLOCK_M * sizeof(float) : 0u));
        if (tma_scales) ptx::tma_load_2d(stage.sfa_tile(), map_sfa, bar, x.row0, kb);
        load_tile_part<Cfg, Cfg::BLOCK_M, Cfg::kClusterN>(stage.a_tile(), map_a, bar, kb, x.row0, walk.rank,
                                                          (1u << Cfg::kClusterN) - 1);
        ptx::tma_load_3d(stage.b_tile(), map_b, bar, kb * Cfg::BLOCK_K, cta_n_tile<Cfg>(x, walk.rank) * Cfg::BLOCK_N,
                         x.group);
      }
      std::move(stage).release();
    }
  }
  // No copy of this thread's is left in flight when it exits (the math WGs wait for them
  // anyway, through the full barriers).
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  // With a pair, the peer's consumers arrive on this CTA's empty barriers: wait until
  // they released every stage, so that no arrival lands after this CTA exits.
  if constexpr (Cfg::kCluster > 1) producer.drain();
}

/// B-scale warp (last WG, warp 2): as the dense b_scale_loop, from the tile's group's
/// scale block.
template <class Cfg>
__device__ __forceinline__ void grouped_b_scale_loop(typename Cfg::ScalePipe& pipe, float* sfb_all,
                                                     const GroupedFp8Params& p, const GroupTableEntry* table,
                                                     const GroupedFp8Walk& walk) {
  const int lane = static_cast<int>(ptx::lane_id());
  GroupSpan cache;
  for (int t = walk.first; t < walk.count(); t += walk.stride) {
    const GroupedTile x = p.groups.tile(table, p.group_sizes, t, cache);
    const int nb = min(cta_n_tile<Cfg>(x, walk.rank) * Cfg::BLOCK_N / Cfg::kScaleBlock, p.num_nb - 1);
    auto stage = pipe.acquire_producer();  // the math WGs are done with this buffer
    float* dst = sfb_all + stage.index() * p.num_kb;
    const float* src = p.b_scale + (static_cast<size_t>(x.group) * p.num_nb + nb) * p.num_kb;
#pragma unroll 4
    for (int kb = lane; kb < p.num_kb; kb += 32) dst[kb] = __ldg(src + kb);
    stage.mbar()->arrive();  // every lane: its stores, released to the math WGs
    std::move(stage).release();
  }
}

/// Zero-row warp (last WG, warp 1): the rows in no group, [start of group G, m), as zeros;
/// row i of them by CTA i % gridDim.x, 16 bytes per lane and store.
template <class Cfg>
__device__ __forceinline__ void zero_rows_loop(const GroupedFp8Params& p, const GroupTableEntry* table) {
  int lo, hi;
  p.groups.group_rows(table, p.group_sizes, p.groups.groups, lo, hi);
  const int lane = static_cast<int>(ptx::lane_id());
  const int pieces = p.n / 8;  // n % 8 == 0
  for (int row = lo + static_cast<int>(blockIdx.x); row < hi; row += static_cast<int>(gridDim.x)) {
    uint4* dst = reinterpret_cast<uint4*>(p.out + static_cast<size_t>(row) * p.n);
    for (int i = lane; i < pieces; i += 32) dst[i] = make_uint4(0u, 0u, 0u, 0u);
  }
}

/// The kernel. Launch: a persistent grid of single CTAs, block = Cfg::kThreads, dynamic smem
/// = GroupedFp8Layout<Cfg>::kSmemBytes.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_grouped_fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                                 const __grid_constant__ CUtensorMap map_b,
                                 const __grid_constant__ CUtensorMap map_sfa,
                                 const __grid_constant__ CUtensorMap map_d, const GroupedFp8Params p) {
#if JAX_SM100_SM90A_DEVICE
  static_assert(Cfg::kClusterM == 1 && !Cfg::kResidual && Cfg::kMathWGs == 2,
                "grouped: one CTA or a pair along N, 128- or 256-row tiles, no residual");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  auto* smem = reinterpret_cast<typename Cfg::Smem*>(base);
  float* sfb_all = reinterpret_cast<float*>(smem + 1);  // (2, num_kb)
  auto* table = reinterpret_cast<GroupTableEntry*>(base + GroupedFp8Layout<Cfg>::kTableOffset);

  typename Cfg::InputPipe pipe(smem->input_bars, &smem->tiles, "grouped_fp8_input");
  const uint32_t warp = ptx::warp_idx_sync();
  if (threadIdx.x == Cfg::kMathThreads) {
    // full: the producer's expect_bytes + one cp.async arrival per producer lane (A's
    // scales) + the TMA bytes; empty: one lane per math warp of every CTA of the cluster.
    pipe.init_barriers(1 + 32, Cfg::kMathWGs * 4 * Cfg::kCluster);
    typename Cfg::ScalePipe(smem->sfb_bars).init_mbars(32, Cfg::kMathWGs * 4);
    ptx::tma_prefetch_descriptor(&map_a);
    ptx::tma_prefetch_descriptor(&map_b);
    ptx::tma_prefetch_descriptor(&map_sfa);
    ptx::tma_prefetch_descriptor(&map_d);
  }
  if (warp == Cfg::kMathThreads / 32 + 3) build_group_table_warp(p.groups, p.group_sizes, table);
  // Barrier init must be visible to the peer CTA (remote arrivals, multicast tx) too.
  if constexpr (Cfg::kCluster > 1) ptx::cluster_sync();
  else __syncthreads();
  const GroupedFp8Walk walk{static_cast<int>(blockIdx.x) / Cfg::kCluster,
                            static_cast<int>(gridDim.x) / Cfg::kCluster,
                            p.groups.count_groups(table, p.group_sizes),
                            Cfg::kCluster > 1 ? static_cast<int>(ptx::block_rank_in_cluster()) : 0};

  if (threadIdx.x >= Cfg::kMathThreads) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    const uint32_t role = warp - Cfg::kMathThreads / 32;
    if (role == 0) {
      grouped_producer_loop<Cfg>(pipe, &map_a, &map_b, &map_sfa, p, table, walk);
    } else if (role == 1) {
      zero_rows_loop<Cfg>(p, table);
    } else if (role == 2) {
      typename Cfg::ScalePipe sfb_pipe(smem->sfb_bars, "grouped_fp8_b_scales");
      grouped_b_scale_loop<Cfg>(sfb_pipe, sfb_all, p, table, walk);
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kMathRegs>();
    GroupedFp8Math<Cfg> m(smem, sfb_all, p, table);
    typename Cfg::EpiPipe epi(smem->epi_bars[m.wg], "grouped_fp8_c");  // unused: no residual
    const TileDescs<Cfg> descs(*pipe.tiles, m.wg, m.r0);
    if constexpr (Cfg::kOverlap) math_loop_chained<Cfg>(m, pipe.pipeline, epi, descs, &map_d, p, walk);
    else math_loop_waves<Cfg>(m, pipe.pipeline, epi, descs, &map_d, p, walk);
    // The last store must have left shared memory before the CTA exits.
    if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();
  }
#else
  (void)map_a; (void)map_b; (void)map_sfa; (void)map_d; (void)p;
  __trap();  // built for another arch: the handler never launches this there
#endif
}

}  // namespace jax_sm100::kernels::sm90_fp8
