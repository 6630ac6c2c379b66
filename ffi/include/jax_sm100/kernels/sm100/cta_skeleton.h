// The CTA every sm_100a GEMM kernel runs, and the pieces their roles share.
//
// The bf16/fp16 GEMM (gemm_roles.h), the blockwise FP8 GEMM (fp8_roles.h) and the MXFP8
// GEMM (mx_gemm_roles.h) have the same warp layout (gemm_config.h), the same shared-memory
// carve-up (GemmSharedStorage over each kernel's payload) and the same pipelines; they
// differ in what the load warp brings per stage, what the MMA thread issues per stage and
// how the epilogue turns TMEM into output values. This header holds everything else, once:
//   run_cta             set-up (barriers, TMEM), the dispatch of warps to roles, tear-down;
//                       templated over the kernel's load, MMA and epilogue roles
//   scheduler_role      warp 2: cluster launch control (the same in every kernel)
//   epilogue_load_role  warp 3: C chunks for the epilogue (beta != 0 only)
//   WorkIterator        every role's walk over the CLC responses; tile_coord decodes them
//   produce_stages      the load warp's loop: throttle, per tile and K block one input
//                       stage armed for Cfg::kStageTxBytes; the kernel issues the loads
//   mma_per_tile        the MMA thread's loop for one accumulator per tile (bf16, MXFP8);
//                       the kernel issues the UMMA of each stage
//   TileStore           the epilogue's store: kCols-wide chunks of the tile through the two
//                       128B-swizzled staging buffers to TMA stores, C read alongside; the
//                       kernel writes each thread's row of a chunk
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a and with the CPU emulator's EmuOps (tests/emu) from this same source.
//
// Work: every CTA starts with its own launch cluster's tile, then takes the tiles of
// clusters it cancels (clusterlaunchcontrol.try_cancel) until the hardware says there is
// no more. In a pair (ClusterM = 2) the even CTA issues the try_cancel with the response
// multicast to both CTAs, issues every UMMA (cta_group::2) and receives every arrival
// that frees shared state of the pair (CLC responses, accumulators); each CTA loads its
// own halves and runs its own epilogue over its 128 TMEM lanes.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/kernels/sm100/role.h"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_payloads.h"
#include "jax_sm100/pipeline/tile_pipeline.h"

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

/// Warp 0's loop (one thread): for every tile of the work list and each of its K blocks,
/// one input stage, armed for Cfg::kStageTxBytes on its full barrier (by the pair's even
/// CTA: its barrier counts both CTAs' bytes), then `issue(stage, tile, kb)` issues the
/// stage's loads. A tile is started (the scheduler's throttle) before its first stage.
template <class Cfg, class Ops, class Issue>
JAX_SM100_ROLE void produce_stages(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p, Issue&& issue) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto producer = input.producer();
  pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier> throttle(s.throttle_bars, "throttle");
  WorkIterator<Cfg, Ops> work_items(s);
  const bool leader = !Cfg::kPair || Ops::cta_rank() == 0;

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    if (leader) throttle.producer_signal_and_step();  // throttle_signal(is_first_cta_in_cluster)
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      auto stage = producer.acquire_stage();
      if (leader) stage.expect_bytes(Cfg::kStageTxBytes);
      issue(stage, t, kb);
      std::move(stage).release();
    }
  }
}

/// Warp 1's loop (one thread of the even CTA) for kernels with one accumulator per tile:
/// per tile a free TMEM accumulator; per K block the input stage, `issue(tiles, tmem_d,
/// kb)` issues its UMMA (accumulating from the tile's first UMMA on), one commit frees
/// the stage once they have read it; one commit per tile hands the accumulator to the
/// epilogue. Commits reach both CTAs of a pair (multicast).
template <class Cfg, class Ops, class Issue>
JAX_SM100_ROLE void mma_per_tile(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p,
                                 MmaHandle<Cfg::kAccStages, Ops>& mma, Issue&& issue) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    auto acc = mma.acquire_stage_linear();  // waits until the epilogue freed this TMEM stage
    Ops::tcgen05_fence_after();
    for (int kb = 0; kb < p.k_blocks; ++kb) {
      auto tiles = consumer.acquire_stage();
      Ops::tcgen05_fence_after();
      issue(tiles, acc.tmem_offset(), kb);
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

/// The epilogue's output path (one per epilogue thread; thread = output row): each tile
/// goes out in kChunks chunks of kCols columns (one 128-byte staging row per output row),
/// alternating between the two staging buffers s.d, each chunk one TMA store issued by
/// thread 0 once every epilogue thread has written its row; with has_c the chunk's C
/// arrives through the EpiLoadPipeline (epilogue_load_role, the same chunking).
template <class Cfg, class Ops, class Out>
struct TileStore {
  using Barrier = typename Ops::Barrier;
  static constexpr int kCols = Cfg::kEpiRowBytes / static_cast<int>(sizeof(Out));  ///< columns per chunk
  static constexpr int kChunks = Cfg::kBlockN / kCols;                            ///< chunks per tile

  GemmStorage<Cfg, Ops>& s;
  const GemmParams<Ops>& p;
  pipeline::EpiLoadPipeline<Cfg::kEpiStages, Barrier> epi;
  bool store_thread;         ///< issues the TMA stores
  uint32_t chunk_count = 0;  ///< chunks this CTA has stored: picks the staging buffer

  JAX_SM100_ROLE TileStore(GemmStorage<Cfg, Ops>& storage, const GemmParams<Ops>& params, uint32_t row)
      : s(storage), p(params), epi(storage.epi_bars, "epi_load"), store_thread(row == 0) {
    if (store_thread) Ops::prefetch_map(&p.tma_d);
  }

  /// Chunk `chunk` of the tile whose output starts at (n_col, m_row) of batch entry
  /// `batch`: `fill(dbuf, cbuf)` writes this thread's row of the chunk into the
  /// 128B-swizzled staging buffer dbuf (epi_chunk_offset), reading C's row from the
  /// equally swizzled cbuf when cbuf is not null (has_c).
  template <class Fill>
  JAX_SM100_ROLE void chunk(int chunk, int n_col, int m_row, int batch, Fill&& fill) {
    uint8_t* dbuf = s.d[chunk_count++ & 1];  // the two buffers in turn
    if (store_thread) Ops::tma_store_wait_read_1();  // the store from this buffer 2 chunks ago
    Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
    const uint8_t* cbuf = nullptr;
    if (p.has_c) {
      epi.wait_producer();
      cbuf = s.c[epi.consumer_stage()];
    }
    fill(dbuf, cbuf);
    if (p.has_c) {
      epi.consumer_mbar()->arrive();  // this thread is done with the C chunk
      epi.consumer_step();
    }
    Ops::fence_async_shared();  // make the generic-proxy writes visible to the TMA
    Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
    if (store_thread) {
      Ops::tma_store(&p.tma_d, dbuf, n_col + chunk * kCols, m_row, batch);
      Ops::tma_store_commit();
    }
  }

  /// After the last tile: every store has completed before the CTA exits.
  JAX_SM100_ROLE void finish() {
    if (store_thread) Ops::tma_store_wait_all();
  }
};

// ------------------------------------------------------------------------------------
// The CTA: set-up, the roles, tear-down.
// ------------------------------------------------------------------------------------
/// Runs one CTA of a kernel whose own roles are:
///   load_warp()                         warp kWarpLoad, one elected thread
///   mma_warp(MmaHandle& mma, tmem_base) warp kWarpMma, one elected thread (the even
///                                       CTA's in a pair): the accumulators' producer
///   epilogue_warps(tmem_base)           warps kWarpEpilogue.., every thread
/// and the shared scheduler and C-load roles, the C chunks as wide as the epilogue's
/// `Out`. Input stages are freed by Cfg::kInputConsumers arrivals (the MMA's commit, plus
/// any the kernel's epilogue adds).
template <class Cfg, class Ops, class Out, class Load, class Mma, class Epilogue>
JAX_SM100_ROLE void run_cta(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p, Load&& load_warp, Mma&& mma_warp,
                            Epilogue&& epilogue_warps) {
  using Barrier = typename Ops::Barrier;
  const uint32_t warp = Ops::thread_idx() / 32;
  if (Ops::thread_idx() == 0) {
    pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier>(s.input_bars, &s.tiles)
        .init_barriers(1, Cfg::kInputConsumers);  // full: one arrive_expect_tx; empty: UMMA commit (+ epilogue)
    pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier>(s.acc_bars).init_barriers(1, Cfg::kAccConsumers);
    pipeline::ProducerConsumerPipeline<Cfg::kClcStages, Barrier>(s.clc_bars).init_mbars(1, Cfg::kClcConsumers);
    pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier>(s.throttle_bars).init_mbars(1, 1);
    pipeline::EpiLoadPipeline<Cfg::kEpiStages, Barrier>(s.epi_bars).init_barriers(1, Cfg::kEpilogueThreads);
    Barrier::fence_init();
  }
  MmaHandle<Cfg::kAccStages, Ops> mma;
  if (warp == Cfg::kWarpMma)
    mma = MmaHandle<Cfg::kAccStages, Ops>::create(s.acc_bars, &s.tmem_base, Cfg::kTmemCols, Cfg::kBlockN, Cfg::kPair);
  Ops::tcgen05_fence_before();
  if (Cfg::kPair) Ops::cluster_sync();  // the peer's barriers exist before any remote arrival
  else Ops::sync_cta();
  Ops::tcgen05_fence_after();
  const uint32_t tmem_base = s.tmem_base;

  if (warp == Cfg::kWarpLoad) {
    if (Ops::elect_one()) load_warp();
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpMma) {
    if ((!Cfg::kPair || Ops::cta_rank() == 0) && Ops::elect_one()) mma_warp(mma, tmem_base);
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpSched) {
    if (Ops::elect_one()) scheduler_role<Cfg, Ops>(s);
    Ops::sync_warp();
  } else if (warp == Cfg::kWarpEpiLoad) {
    if (Ops::elect_one()) epilogue_load_role<Cfg, Ops, Out>(s, p);  // with has_c = 0 it only walks the work
    Ops::sync_warp();
  } else {
    epilogue_warps(tmem_base);
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
