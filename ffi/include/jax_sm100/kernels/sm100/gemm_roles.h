// The sm_100a bf16/fp16 GEMM: D = alpha * op(A) @ op(B) + beta * C, fp32 accumulation in
// TMEM, one function per warp role (see gemm_config.h for the roles and shapes).
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (gemm.cuh) and with the CPU emulator's EmuOps (tests/emu) from this same
// source. The pipelines are the library's (pipeline/): InputTilePipeline over a
// StandardTilePayload (TMA -> MMA), OutputTilePipeline over TMEM accumulators
// (MMA -> epilogue, MmaStage / EpilogueStage), EpiLoadPipeline (C -> epilogue) and two
// ProducerConsumerPipeline rings for cluster launch control: the CLC responses
// (scheduler -> every role) and the throttle (load warp -> scheduler, the seeds'
// throttle_signal: the scheduler asks for the next cluster only once the load warp has
// started the current one, so one CTA does not hoard work).
//
// Work: every CTA starts with its own launch cluster's tile, then takes the tiles of
// clusters it cancels (clusterlaunchcontrol.try_cancel) until the hardware says there is
// no more. In a pair (ClusterM = 2) the even CTA issues the try_cancel with the response
// multicast to both CTAs, issues every UMMA (cta_group::2) and receives every arrival
// that frees shared state of the pair (CLC responses, accumulators); each CTA loads its
// own halves and runs its own epilogue over its 128 TMEM lanes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_payloads.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

#if defined(__CUDACC__)
#define JAX_SM100_ROLE __device__ __forceinline__
#else
#define JAX_SM100_ROLE inline
#endif

namespace jax_sm100::kernels::sm100 {

template <class Cfg, class Ops>
using GemmStorage = GemmSharedStorage<Cfg, typename Ops::Barrier, typename Ops::ClcResponse>;

/// One tile of work, decoded from a cluster tile index.
struct TileCoord {
  int batch, m_row, n_col;  ///< batch entry, first output row of this CTA, first column
};

template <class Cfg, class Ops>
JAX_SM100_ROLE TileCoord tile_coord(const GemmParams<Ops>& p, int work) {
  const TileScheduler sched = TileScheduler::make(p.order, Cfg::kClusterM, 1, Ops::cta_rank(), 0, 1);
  int b, mt, nt;
  sched.tile(work, b, mt, nt);
  return TileCoord{b, mt * Cfg::kBlockM, nt * Cfg::kBlockN};
}

/// A role's walk over the CLC responses (consumer side of the response ring).
template <class Cfg, class Ops>
struct WorkIterator {
  using Barrier = typename Ops::Barrier;
  pipeline::ProducerConsumerPipeline<Cfg::kClcStages, Barrier> ring;
  const typename Ops::ClcResponse* responses;

  JAX_SM100_ROLE explicit WorkIterator(GemmStorage<Cfg, Ops>& s)
      : ring(s.clc_bars, "clc"), responses(s.clc_response) {}

  /// Waits for the next response and returns its cluster tile, or -1: no more work.
  /// `warp_wide`: all 32 lanes call this and lane 0 frees the response once every lane
  /// has read it; otherwise the one calling thread frees it. (In a pair the arrival goes
  /// to the even CTA's barrier.)
  JAX_SM100_ROLE int next(bool warp_wide) {
    ring.wait_producer();
    const uint32_t s = ring.consumer_stage();
    uint32_t first_cta = 0;
    const bool more = Ops::clc_decode(responses[s], &first_cta);
    if (warp_wide) Ops::sync_warp();
    if (!warp_wide || Ops::thread_idx() % 32 == 0) {
      if (Cfg::kPair) Ops::arrive_remote(ring.consumer_mbar(s), 0);
      else ring.consumer_mbar(s)->arrive();
    }
    ring.consumer_step();
    return more ? static_cast<int>(first_cta / Cfg::kClusterM) : -1;
  }
};

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void load_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto producer = input.producer();
  pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier> throttle(s.throttle_bars, "throttle");
  WorkIterator<Cfg, Ops> work_items(s);
  const bool leader = Ops::cta_rank() == 0;
  const int rank = static_cast<int>(Ops::cta_rank());
  Ops::prefetch_map(&p.tma_a);
  Ops::prefetch_map(&p.tma_b);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    if (leader) throttle.producer_signal_and_step();  // throttle_signal(is_first_cta_in_cluster)
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    const int a_batch = p.a_batched ? t.batch : 0, b_batch = p.b_batched ? t.batch : 0;
    const int n_row = t.n_col + rank * Cfg::kBRows;  // this CTA's B rows
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      auto stage = producer.acquire_stage();
      if (leader) stage.expect_bytes(Cfg::kStageTxBytes);
      Barrier* bar = stage.mbar();
      uint8_t* a = stage.a_tile();
      uint8_t* b = stage.b_tile();
      const int k0 = kb * Cfg::kBlockK;
      auto load = [&](void* dst, const typename Ops::TensorMap* map, int c0, int c1, int c2) {
        if (Cfg::kPair) Ops::tma_load_pair(dst, map, bar, c0, c1, c2);
        else Ops::tma_load(dst, map, bar, c0, c1, c2);
      };
      if (!p.trans_a) {
        load(a, &p.tma_a, k0, t.m_row, a_batch);  // 128 rows x 64 K
      } else {
        for (int h = 0; h < Cfg::kBlockM / 64; ++h)  // 64 K rows x 64 M columns each
          load(a + h * 8192, &p.tma_a, t.m_row + h * 64, k0, a_batch);
      }
      if (p.trans_b) {
        load(b, &p.tma_b, k0, n_row, b_batch);  // kBRows rows x 64 K
      } else {
        for (int h = 0; h < Cfg::kBRows / 64; ++h)  // 64 K rows x 64 N columns each
          load(b + h * 8192, &p.tma_b, n_row + h * 64, k0, b_batch);
      }
      std::move(stage).release();
    }
  }
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread of the even CTA).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void mma_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p,
                             MmaHandle<Cfg::kAccStages, Ops>& mma) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  const uint32_t idesc =
      ptx::make_umma_idesc_f16(kBf16, p.trans_a != 0, p.trans_b == 0, Cfg::kUmmaM, Cfg::kUmmaN);
  // Per UMMA (K = 16): K-major operands advance 32 bytes inside the 128-byte swizzled
  // row; MN-major ones advance 16 K rows = two 8-row groups of 1024 bytes. MN-major
  // tiles are 64-column boxes of 64 K rows, 8192 bytes apart (the LBO).
  const uint32_t a_step = p.trans_a ? 2048u : 32u, b_step = p.trans_b ? 32u : 2048u;
  const uint32_t a_lbo = p.trans_a ? 8192u : 16u, b_lbo = p.trans_b ? 16u : 8192u;

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    auto acc = mma.acquire_stage_linear();  // waits until the epilogue freed this TMEM stage
    Ops::tcgen05_fence_after();
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      auto tiles = consumer.acquire_stage();
      Ops::tcgen05_fence_after();
      const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
      for (int kk = 0; kk < Cfg::kBlockK / Cfg::kUmmaK; ++kk) {
        const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * a_step, a_lbo, 1024, ptx::UmmaSwizzle::k128B);
        const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * b_step, b_lbo, 1024, ptx::UmmaSwizzle::k128B);
        Ops::umma_f16(acc.tmem_offset(), da, db, idesc, kb > 0 || kk > 0, Cfg::kPair);
      }
      // The stage is free once these UMMA have read it: commit onto its empty barrier
      // (in both CTAs of a pair), then step without an arrival of our own.
      if (Cfg::kPair) Ops::umma_commit_pair(tiles.mbar(), 0x3);
      else Ops::umma_commit(tiles.mbar());
      std::move(tiles).release_without_signal();
    }
    // The accumulator is complete once every UMMA above is: commit onto its full barrier.
    if (Cfg::kPair) Ops::umma_commit_pair(acc.mbar(), 0x3);
    else Ops::umma_commit(acc.mbar());
    std::move(acc).release();
  }
}

// ------------------------------------------------------------------------------------
// Warp 2: the cluster-launch-control scheduler (one thread per CTA).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void scheduler_role(GemmStorage<Cfg, Ops>& s) {
  using Barrier = typename Ops::Barrier;
  pipeline::ProducerConsumerPipeline<Cfg::kClcStages, Barrier> ring(s.clc_bars, "clc");
  pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier> throttle(s.throttle_bars, "throttle");
  WorkIterator<Cfg, Ops> work_items(s);
  const bool leader = Ops::cta_rank() == 0;
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    const uint32_t st = ring.producer_stage();
    if (leader) {
      throttle.consumer_signal_and_step();  // the load warp has started `work`
      ring.wait_consumer();                 // every role of the cluster read this slot
    }
    // Arm this CTA's full barrier for the 16-byte response (the odd CTA's scheduler arms
    // its own: it consumed the slot's previous response, so that phase is complete).
    ring.producer_mbar(st)->arrive_expect_tx(16);
    if (leader) Ops::clc_try_cancel(&s.clc_response[st], ring.producer_mbar(st), Cfg::kPair);
    ring.producer_step();
  }
}

// ------------------------------------------------------------------------------------
// Warp 3: C loads for the epilogue (one thread; beta != 0 only).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void epilogue_load_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p) {
  using Barrier = typename Ops::Barrier;
  constexpr int kCols = Cfg::kEpiRowBytes / static_cast<int>(sizeof(Out));
  pipeline::EpiLoadPipeline<Cfg::kEpiStages, Barrier> epi(s.epi_bars, "epi_load");
  WorkIterator<Cfg, Ops> work_items(s);
  if (p.has_c) Ops::prefetch_map(&p.tma_c);
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    if (!p.has_c) continue;
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    for (int chunk = 0; chunk < Cfg::kBlockN / kCols; ++chunk) {
      auto stage = epi.acquire_producer();
      stage.mbar()->arrive_expect_tx(Cfg::kEpiBufBytes);
      Ops::tma_load(s.c[stage.index()], &p.tma_c, stage.mbar(), t.n_col + chunk * kCols, t.m_row,
                    p.c_batched ? t.batch : 0);
      std::move(stage).release();
    }
  }
}

/// Byte offset of 16-byte chunk q of row r in a 128B-swizzled epilogue buffer (1024-aligned).
JAX_SM100_ROLE uint32_t epi_chunk_offset(uint32_t r, uint32_t q) {
  return r * 128u + ((q ^ (r & 7u)) << 4);
}

struct alignas(16) Chunk16 {
  uint32_t w[4];
};

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void epilogue_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  constexpr int kCols = Cfg::kEpiRowBytes / static_cast<int>(sizeof(Out));  // columns per chunk
  constexpr int kPerLoad = 16;                                             // TMEM columns per load
  constexpr int kChunksPerLoad = kPerLoad * static_cast<int>(sizeof(Out)) / 16;
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "accumulator");
  pipeline::EpiLoadPipeline<Cfg::kEpiStages, Barrier> epi(s.epi_bars, "epi_load");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t et = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127
  const uint32_t row = et;                     // warp w covers TMEM lanes 32 * (w % 4) ..
  const bool store_thread = et == 0;
  uint32_t chunk_count = 0;
  if (store_thread) Ops::prefetch_map(&p.tma_d);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Cfg::kBlockN / kCols; ++chunk, ++chunk_count) {
      uint8_t* dbuf = s.d[chunk_count & 1];
      if (store_thread) Ops::tma_store_wait_read_1();  // the store from this buffer 2 chunks ago
      Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
      const uint8_t* cbuf = nullptr;
      uint32_t c_stage = 0;
      if (p.has_c) {
        epi.wait_producer();
        c_stage = epi.consumer_stage();
        cbuf = s.c[c_stage];
      }
      for (int j = 0; j < kCols / kPerLoad; ++j) {
        uint32_t v[kPerLoad];
        Ops::tmem_load_32x32b_x16(taddr + chunk * kCols + j * kPerLoad, v);
        Ops::tmem_wait_ld();
        Out out[kPerLoad];
        Out cvals[kPerLoad];
        if (cbuf != nullptr) {
          for (int q = 0; q < kChunksPerLoad; ++q)
            std::memcpy(reinterpret_cast<uint8_t*>(cvals) + q * 16,
                        cbuf + epi_chunk_offset(row, j * kChunksPerLoad + q), 16);
        }
        for (int i = 0; i < kPerLoad; ++i) {
          float x;
          std::memcpy(&x, &v[i], 4);
          float y = p.alpha * x;
          if (cbuf != nullptr) y += p.beta * static_cast<float>(cvals[i]);
          out[i] = static_cast<Out>(y);
        }
        for (int q = 0; q < kChunksPerLoad; ++q)
          std::memcpy(dbuf + epi_chunk_offset(row, j * kChunksPerLoad + q),
                      reinterpret_cast<const uint8_t*>(out) + q * 16, 16);
      }
      if (p.has_c) {
        epi.consumer_mbar()->arrive();  // this thread is done with the C chunk
        epi.consumer_step();
      }
      Ops::fence_async_shared();  // make the generic-proxy writes visible to the TMA
      Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
      if (store_thread) {
        Ops::tma_store(&p.tma_d, dbuf, t.n_col + chunk * kCols, t.m_row, t.batch);
        Ops::tma_store_commit();
      }
    }
    // Every TMEM read of this accumulator is complete: free it (the even CTA's barrier).
    Ops::tcgen05_fence_before();
    if (Cfg::kPair) Ops::arrive_remote(acc.mbar(), 0);
    else acc.mbar()->arrive();
    std::move(acc).release_without_signal();
  }
  if (store_thread) Ops::tma_store_wait_all();
}

// ------------------------------------------------------------------------------------
// The CTA: set-up, the roles, tear-down.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, class Out>
JAX_SM100_ROLE void gemm_cta(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p) {
  const uint32_t warp = Ops::thread_idx() / 32;
  if (Ops::thread_idx() == 0) {
    pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, typename Ops::Barrier>(s.input_bars, &s.tiles)
        .init_barriers(1, 1);  // full: one arrive_expect_tx; empty: one UMMA commit
    pipeline::OutputTilePipeline<Cfg::kAccStages, typename Ops::Barrier>(s.acc_bars)
        .init_barriers(1, Cfg::kAccConsumers);
    pipeline::ProducerConsumerPipeline<Cfg::kClcStages, typename Ops::Barrier>(s.clc_bars)
        .init_mbars(1, Cfg::kClcConsumers);
    pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, typename Ops::Barrier>(s.throttle_bars)
        .init_mbars(1, 1);
    pipeline::EpiLoadPipeline<Cfg::kEpiStages, typename Ops::Barrier>(s.epi_bars)
        .init_barriers(1, Cfg::kEpilogueThreads);
    Ops::Barrier::fence_init();
  }
  MmaHandle<Cfg::kAccStages, Ops> mma;
  if (warp == Cfg::kWarpMma) mma = MmaHandle<Cfg::kAccStages, Ops>::create(s.acc_bars, &s.tmem_base,
                                                                           Cfg::kTmemCols, Cfg::kBlockN, Cfg::kPair);
  Ops::tcgen05_fence_before();
  if (Cfg::kPair) Ops::cluster_sync();  // the peer's barriers exist before any remote arrival
  else Ops::sync_cta();
  Ops::tcgen05_fence_after();
  const uint32_t tmem_base = s.tmem_base;

  if (warp == Cfg::kWarpLoad) {
    if (Ops::elect_one()) load_role<Cfg, Ops, T>(s, p);
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpMma) {
    if (Ops::cta_rank() == 0 && Ops::elect_one()) mma_role<Cfg, Ops, T>(s, p, mma);
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpSched) {
    if (Ops::elect_one()) scheduler_role<Cfg, Ops>(s);
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpEpiLoad) {
    if (Ops::elect_one()) epilogue_load_role<Cfg, Ops, Out>(s, p);
    Ops::sync_warp();
  } else {
    epilogue_role<Cfg, Ops, Out>(s, p, tmem_base);
  }

  // Every UMMA completed (the epilogues waited for the last commits) and every TMEM read
  // is done; in a pair the peer's shared memory is no longer read by our UMMA.
  Ops::tcgen05_fence_before();
  if (Cfg::kPair) Ops::cluster_sync();
  else Ops::sync_cta();
  if (warp == Cfg::kWarpMma) {
    Ops::tcgen05_fence_after();
    std::move(mma).release();  // tcgen05.dealloc (warp-wide)
  }
}

}  // namespace jax_sm100::kernels::sm100
