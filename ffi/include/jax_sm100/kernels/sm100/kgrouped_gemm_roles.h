// The sm_100a K-grouped GEMM's role functions (kgrouped_gemm_config.h):
//   out[g] = lhs[rows of g]^T @ dy[rows of g], a (K, N) slice per group.
//
// The CTA is the bf16 GEMM's (cta_skeleton.h run_cta: set-up, CLC scheduler, C-load warp
// with has_c = 0, tear-down; the dense tile order with the group as the batch). What
// differs:
//   * the group table: warp 3 builds it from group_sizes (device memory: no host
//     synchronisation, CUDA-graph safe) before run_cta's CTA barrier; every role reads a
//     tile's rows [lo, hi) from it;
//   * loads (warp 0, one thread): the contraction runs over rows [lo, hi) in 64-row
//     blocks. A block whose valid rows v end inside a 16-row slice (v % 16 != 0) is loaded
//     onto the load warp's own barrier instead of the stage's; once it has landed the
//     thread zeroes rows v .. round_up(v, 16) of every A and B box (whole 128-byte rows:
//     the swizzle permutes 16-byte pieces inside a row only), fences the writes for the
//     tensor core (fence.proxy.async) and then arrives on the stage's full barrier, so the
//     MMA never sees the stage before the zeros;
//   * MMA (warp 1, one thread): per 64-row block the UMMA of its ceil(v / 16) slices only;
//     an empty group takes no accumulator;
//   * epilogue (warps 4..7): the GEMM's conversion and store (the (G, K, N) tensor map
//     clips at K and N); an empty group's tile stores zeros.
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (kgrouped_gemm.cuh) and with the CPU emulator's EmuOps (tests/emu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/gemm_roles.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_roles.h"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_config.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

namespace jax_sm100::kernels::sm100 {

/// The load warp's own barrier: right after the group table.
template <class Cfg, class Ops>
JAX_SM100_ROLE typename Ops::Barrier* kgrouped_fix_barrier(GemmStorage<Cfg, Ops>& s) {
  return reinterpret_cast<typename Ops::Barrier*>(reinterpret_cast<uint8_t*>(grouped_table<Cfg, Ops>(s)) +
                                                  Cfg::kTableBytes);
}

/// Rows [lo, hi) of tile t's group.
template <class Ops>
JAX_SM100_ROLE void kgrouped_rows(const KGroupedGemmParams<Ops>& p, const GroupTableEntry* table, const TileCoord& t,
                                  int& lo, int& hi) {
  p.groups.group_rows(table, p.group_sizes, t.batch, lo, hi);
}

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer (one thread).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void kgrouped_load_role(GemmStorage<Cfg, Ops>& s, const KGroupedGemmParams<Ops>& p,
                                       const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  constexpr int kRowBytes = 128;  // one contraction row of a 64-column box
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto producer = input.producer();
  pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier> throttle(s.throttle_bars, "throttle");
  WorkIterator<Cfg, Ops> work_items(s);
  Barrier* fix = kgrouped_fix_barrier<Cfg, Ops>(s);
  uint32_t fix_phase = 0;
  Ops::prefetch_map(&p.gemm.tma_a);
  Ops::prefetch_map(&p.gemm.tma_b);
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    throttle.producer_signal_and_step();  // the scheduler may ask for the next item
    const TileCoord t = tile_coord<Cfg, Ops>(p.gemm, work);
    int lo, hi;
    kgrouped_rows(p, table, t, lo, hi);
    for (int r0 = lo; r0 < hi; r0 += Cfg::kBlockK) {
      auto stage = producer.acquire_stage();
      const int valid = hi - r0 < Cfg::kBlockK ? hi - r0 : Cfg::kBlockK;
      const bool fixup = valid % Cfg::kSliceRows != 0;
      Barrier* bar = fixup ? fix : stage.mbar();
      bar->arrive_expect_tx(Cfg::kStageTxBytes);  // whole boxes: zero fill past M, K, N counts
      uint8_t* a = stage.a_tile();
      uint8_t* b = stage.b_tile();
      for (int h = 0; h < Cfg::kBlockM / 64; ++h)  // 64 contraction rows x 64 K columns each
        Ops::tma_load(a + h * 8192, &p.gemm.tma_a, bar, t.m_row + h * 64, r0, 0);
      for (int h = 0; h < Cfg::kBRows / 64; ++h)  // 64 contraction rows x 64 N columns each
        Ops::tma_load(b + h * 8192, &p.gemm.tma_b, bar, t.n_col + h * 64, r0, 0);
      if (fixup) {
        fix->wait(fix_phase);
        fix_phase ^= 1;
        const int end = (valid + Cfg::kSliceRows - 1) / Cfg::kSliceRows * Cfg::kSliceRows;
        // 16-byte aligned stores (the boxes are 1024-aligned): 8 per row and box.
        for (int r = valid; r < end; ++r) {
          for (int h = 0; h < Cfg::kBlockM / 64; ++h)
            for (int q = 0; q < kRowBytes; q += 16) *reinterpret_cast<Piece16*>(a + h * 8192 + r * kRowBytes + q) = {};
          for (int h = 0; h < Cfg::kBRows / 64; ++h)
            for (int q = 0; q < kRowBytes; q += 16) *reinterpret_cast<Piece16*>(b + h * 8192 + r * kRowBytes + q) = {};
        }
        Ops::fence_async_shared();  // the zeros, visible to the tensor core's reads
        stage.mbar()->arrive();     // the stage is full (its bytes were counted on `fix`)
      }
      std::move(stage).release();
    }
  }
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread). An empty group takes no accumulator.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void kgrouped_mma_role(GemmStorage<Cfg, Ops>& s, const KGroupedGemmParams<Ops>& p,
                                      MmaHandle<Cfg::kAccStages, Ops>& mma, const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  // A (MN-major) and B (N-major): 64-column boxes of 64 contraction rows, 8192 bytes
  // apart (the LBO); each UMMA (K = 16 rows) advances two 8-row groups of 1024 bytes.
  const uint32_t idesc = ptx::make_umma_idesc_f16(kBf16, true, true, Cfg::kUmmaM, Cfg::kUmmaN);
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p.gemm, work);
    int lo, hi;
    kgrouped_rows(p, table, t, lo, hi);
    if (hi <= lo) continue;  // an empty group: the epilogue stores zeros
    auto acc = mma.acquire_stage_linear();  // waits until the epilogue freed this TMEM stage
    Ops::tcgen05_fence_after();
    for (int r0 = lo; r0 < hi; r0 += Cfg::kBlockK) {
      const int valid = hi - r0 < Cfg::kBlockK ? hi - r0 : Cfg::kBlockK;
      auto tiles = consumer.acquire_stage();
      Ops::tcgen05_fence_after();
      const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
      for (int kk = 0; kk * Cfg::kSliceRows < valid; ++kk) {  // slices past the group: not issued
        const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * 2048u, 8192u, 1024, ptx::UmmaSwizzle::k128B);
        const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * 2048u, 8192u, 1024, ptx::UmmaSwizzle::k128B);
        Ops::umma_f16(acc.tmem_offset(), da, db, idesc, r0 > lo || kk > 0, false);
      }
      Ops::umma_commit(tiles.mbar());  // frees the stage once these UMMA have read it
      std::move(tiles).release_without_signal();
    }
    Ops::umma_commit(acc.mbar());  // the accumulator is complete: to the epilogue
    std::move(acc).release();
  }
}

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void kgrouped_epilogue_role(GemmStorage<Cfg, Ops>& s, const KGroupedGemmParams<Ops>& p,
                                           uint32_t tmem_base, const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  using Store = TileStore<Cfg, Ops, Out>;
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "accumulator");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127
  Store store(s, p.gemm, row);
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p.gemm, work);
    int lo, hi;
    kgrouped_rows(p, table, t, lo, hi);
    if (hi <= lo) {  // an empty group: zeros, no accumulator
      for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
        store.chunk(chunk, t.n_col, t.m_row, t.batch, [&](uint8_t* dbuf, const uint8_t*) {
          const uint8_t zero[16] = {};
          for (int q = 0; q < Cfg::kEpiRowBytes / 16; ++q) std::memcpy(dbuf + epi_chunk_offset(row, q), zero, 16);
        });
      }
      continue;
    }
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, t.batch, [&](uint8_t* dbuf, const uint8_t* cbuf) {
        fill_accumulator_chunk<Ops, Out, Store::kCols>(taddr, chunk, row, dbuf, cbuf, 1.f, 0.f);
      });
    }
    // Every TMEM read of this accumulator is complete: free it.
    Ops::tcgen05_fence_before();
    acc.mbar()->arrive();
    std::move(acc).release_without_signal();
  }
  store.finish();
}

// ------------------------------------------------------------------------------------
// The CTA: the group table and the load warp's barrier, then cta_skeleton.h's CTA.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, class Out>
JAX_SM100_ROLE void kgrouped_gemm_cta(GemmStorage<Cfg, Ops>& s, const KGroupedGemmParams<Ops>& p) {
  static_assert(Cfg::kClusterM == 1, "the K-grouped kernel runs one CTA per cluster");
  GroupTableEntry* table = grouped_table<Cfg, Ops>(s);
  // Warp 3 (the C-load warp, idle at set-up) builds the table; thread 0 arms the load
  // warp's barrier before run_cta's initialisation (its fence_init covers it); run_cta's
  // CTA barrier publishes both before any role runs.
  if (Ops::thread_idx() / 32 == Cfg::kWarpEpiLoad) build_grouped_table<Ops>(p.groups, p.group_sizes, table);
  if (Ops::thread_idx() == 0) kgrouped_fix_barrier<Cfg, Ops>(s)->init(1);
  run_cta<Cfg, Ops, Out>(
      s, p.gemm, [&] { kgrouped_load_role<Cfg, Ops>(s, p, table); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { kgrouped_mma_role<Cfg, Ops, T>(s, p, mma, table); },
      [&](uint32_t tmem_base) { kgrouped_epilogue_role<Cfg, Ops, Out>(s, p, tmem_base, table); });
}

}  // namespace jax_sm100::kernels::sm100
