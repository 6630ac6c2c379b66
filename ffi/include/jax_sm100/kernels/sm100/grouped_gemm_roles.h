// The sm_100a M-grouped GEMM's role functions: out[r, :] = lhs[r, :] @ rhs[g(r)] for the
// rows r of group g; rows in no group are zeros (grouped_gemm_config.h).
//
// The CTA is the bf16 GEMM's (cta_skeleton.h run_cta: set-up, CLC scheduler, C-load
// warp with has_c = 0, tear-down; the same pipelines); this file holds what differs:
//   * the group table: warp 3 builds it in shared memory from group_sizes (device memory:
//     no host synchronisation, CUDA-graph safe) before run_cta's CTA barrier, which makes
//     it visible to every role;
//   * the work list: each work item (the launch cluster's own index, then each index a
//     CLC response names) is decoded through GroupedOrder::tile (decode_work) into a tile
//     of one group: a tile never straddles two groups. Items past the real tile count do
//     nothing; tiles of "group G" (the rows in no group) load nothing, issue no UMMA and
//     take no accumulator: the epilogue stores zeros; empty groups have no tiles at all;
//   * loads: lhs rows from the tile's first row, rhs of the tile's group (3-D tensor map,
//     the group the outer coordinate), in either rhs layout;
//   * the store (GroupedTileStore): TMA stores of whole boxes where every row of the box
//     belongs to the tile's group (or the box only runs past M, where TMA clips); a
//     group's last, partial tile instead copies its valid rows from the staging buffer to
//     global memory with 16-byte stores: a box would overwrite the next group's rows.
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (grouped_gemm.cuh) and with the CPU emulator's EmuOps (tests/emu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_config.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

namespace jax_sm100::kernels::sm100 {

/// The group table: right after the shared carve-up (1024-aligned, so 8-byte aligned).
template <class Cfg, class Ops>
JAX_SM100_ROLE GroupTableEntry* grouped_table(GemmStorage<Cfg, Ops>& s) {
  return reinterpret_cast<GroupTableEntry*>(reinterpret_cast<uint8_t*>(&s) + sizeof(GemmStorage<Cfg, Ops>));
}

/// Warp-wide (every lane of one warp): build the group table. On the GPU the warp
/// cooperates (build_group_table_warp); the emulator's lane 0 builds the same entries in
/// order (build_group_table_serial; tests/cpp/grouped_scheduler_test.cc checks both agree).
template <class Ops>
JAX_SM100_ROLE void build_grouped_table(const GroupedOrder& o, const int32_t* sizes, GroupTableEntry* table) {
#if defined(__CUDACC__)
  build_group_table_warp(o, sizes, table);
#else
  if (Ops::thread_idx() % 32 == 0) build_group_table_serial(o, sizes, table);
  Ops::sync_warp();
#endif
}

/// What a work item is.
enum class GroupedWork { kNone, kZeros, kCompute };

/// Decodes work item `work` (a cluster index of the launch) through the grouped order
/// (Params: GroupedGemmParams or the FP8 kernel's GroupedFp8GemmParams: order, group_sizes).
template <class Params>
JAX_SM100_ROLE GroupedWork decode_work(const Params& p, const GroupTableEntry* table, int count, int work,
                                       GroupSpan& cache, GroupedTile* tile) {
  if (work >= count) return GroupedWork::kNone;  // past the tiles these group sizes have
  *tile = p.order.tile(table, p.group_sizes, work, cache);
  return tile->group < p.order.groups ? GroupedWork::kCompute : GroupedWork::kZeros;
}

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer (one thread).
// ------------------------------------------------------------------------------------
/// Warp 0's loop (one thread) for the M-grouped kernels (as cta_skeleton.h's
/// produce_stages for the dense ones): for every work item that decodes to a computing
/// tile, each of its K blocks gets one input stage armed for Cfg::kStageTxBytes (whole
/// boxes: zero fill past M, N, K counts), then `issue(stage, tile, kb)` issues its loads.
/// Params: GroupedGemmParams or GroupedFp8GemmParams (order, group_sizes, gemm.k_blocks).
template <class Cfg, class Ops, class Params, class Issue>
JAX_SM100_ROLE void produce_grouped_stages(GemmStorage<Cfg, Ops>& s, const Params& p, const GroupTableEntry* table,
                                           Issue&& issue) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto producer = input.producer();
  pipeline::ProducerConsumerPipeline<Cfg::kThrottleStages, Barrier> throttle(s.throttle_bars, "throttle");
  WorkIterator<Cfg, Ops> work_items(s);
  const int count = p.order.count(table);
  GroupSpan cache;
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    throttle.producer_signal_and_step();  // the scheduler may ask for the next item
    GroupedTile t;
    if (decode_work(p, table, count, work, cache, &t) != GroupedWork::kCompute) continue;
    for (int kb = 0; kb < p.gemm.k_blocks; ++kb) {
      auto stage = producer.acquire_stage();
      stage.expect_bytes(Cfg::kStageTxBytes);
      issue(stage, t, kb);
      std::move(stage).release();
    }
  }
}

template <class Cfg, class Ops>
JAX_SM100_ROLE void grouped_load_role(GemmStorage<Cfg, Ops>& s, const GroupedGemmParams<Ops>& p,
                                      const GroupTableEntry* table) {
  Ops::prefetch_map(&p.gemm.tma_a);
  Ops::prefetch_map(&p.gemm.tma_b);
  produce_grouped_stages<Cfg, Ops>(s, p, table, [&](auto& stage, const GroupedTile& t, int kb) {
    auto* bar = stage.mbar();
    const int k0 = kb * Cfg::kBlockK;
    const int n_col = t.n_tile * Cfg::kBlockN;
    Ops::tma_load(stage.a_tile(), &p.gemm.tma_a, bar, k0, t.row0, 0);  // 128 rows x 64 K
    uint8_t* b = stage.b_tile();
    if (p.gemm.trans_b) {
      Ops::tma_load(b, &p.gemm.tma_b, bar, k0, n_col, t.group);  // BlockN rows x 64 K
    } else {
      for (int h = 0; h < Cfg::kBRows / 64; ++h)  // 64 K rows x 64 N columns each
        Ops::tma_load(b + h * 8192, &p.gemm.tma_b, bar, n_col + h * 64, k0, t.group);
    }
  });
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread). Tiles that compute take an accumulator; the others none.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void grouped_mma_role(GemmStorage<Cfg, Ops>& s, const GroupedGemmParams<Ops>& p,
                                     MmaHandle<Cfg::kAccStages, Ops>& mma, const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  const bool trans_b = p.gemm.trans_b != 0;
  const uint32_t idesc = ptx::make_umma_idesc_f16(kBf16, false, !trans_b, Cfg::kUmmaM, Cfg::kUmmaN);
  // Per UMMA (K = 16): K-major A and (trans_b) B advance 32 bytes inside the 128-byte
  // swizzled row; N-major B advances 16 K rows (2048 bytes), its 64-column boxes 8192
  // bytes apart (the LBO).
  const uint32_t b_step = trans_b ? 32u : 2048u, b_lbo = trans_b ? 16u : 8192u;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  const int count = p.order.count(table);
  GroupSpan cache;
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    GroupedTile t;
    if (decode_work(p, table, count, work, cache, &t) != GroupedWork::kCompute) continue;
    auto acc = mma.acquire_stage_linear();  // waits until the epilogue freed this TMEM stage
    Ops::tcgen05_fence_after();
    for (int kb = 0; kb < p.gemm.k_blocks; ++kb) {
      auto tiles = consumer.acquire_stage();
      Ops::tcgen05_fence_after();
      const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
      for (int kk = 0; kk < Cfg::kBlockK / Cfg::kUmmaK; ++kk) {
        const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * 32u, 16u, 1024, ptx::UmmaSwizzle::k128B);
        const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * b_step, b_lbo, 1024, ptx::UmmaSwizzle::k128B);
        Ops::umma_f16(acc.tmem_offset(), da, db, idesc, kb > 0 || kk > 0, false);
      }
      Ops::umma_commit(tiles.mbar());  // frees the stage once these UMMA have read it
      std::move(tiles).release_without_signal();
    }
    Ops::umma_commit(acc.mbar());  // the accumulator is complete: to the epilogue
    std::move(acc).release();
  }
}

// ------------------------------------------------------------------------------------
// The epilogue's store (thread = output row).
// ------------------------------------------------------------------------------------
/// Each tile goes out in kChunks chunks of kCols columns through the two 128B-swizzled
/// staging buffers s.d (as TileStore in cta_skeleton.h). A chunk whose box may be stored
/// whole goes by TMA (thread 0); a masked one is copied out by all 128 threads, 16 bytes
/// each, row by row (8 threads per 128-byte row: coalesced), only its valid rows and the
/// columns below N.
/// 16 bytes, 16-byte aligned: the unit of the masked row stores.
struct alignas(16) Piece16 {
  uint32_t w[4];
};

/// Params: GroupedGemmParams<Ops> or GroupedFp8GemmParams<Ops> (gemm.tma_d, out, n).
template <class Cfg, class Ops, class Out, class Params = GroupedGemmParams<Ops>>
struct GroupedTileStore {
  static constexpr int kCols = Cfg::kEpiRowBytes / static_cast<int>(sizeof(Out));  ///< columns per chunk
  static constexpr int kChunks = Cfg::kBlockN / kCols;
  static constexpr int kPieces = Cfg::kEpiRowBytes / 16;  ///< 16-byte pieces per staged row
  static constexpr int kVec = 16 / static_cast<int>(sizeof(Out));

  GemmStorage<Cfg, Ops>& s;
  const Params& p;
  uint32_t row;
  bool store_thread;
  uint32_t chunk_count = 0;      ///< chunks staged: picks the buffer
  bool last_was_tma = false;     ///< the previous chunk committed a TMA store group

  JAX_SM100_ROLE GroupedTileStore(GemmStorage<Cfg, Ops>& storage, const Params& params, uint32_t r)
      : s(storage), p(params), row(r), store_thread(r == 0) {
    if (store_thread) Ops::prefetch_map(&p.gemm.tma_d);
  }

  /// Chunk `chunk` of the tile whose output starts at (n_col, m_row): `fill(dbuf)` writes
  /// this thread's row into the staging buffer (epi_chunk_offset). rows_valid: rows of
  /// the tile that may be written, or kBlockM when the whole box may be stored by TMA.
  template <class Fill>
  JAX_SM100_ROLE void chunk(int chunk, int n_col, int m_row, int rows_valid, Fill&& fill) {
    uint8_t* dbuf = s.d[chunk_count++ & 1];
    // The buffer's last TMA store (two chunks ago) must have read it. wait_group.read 1
    // covers it only when the newest group is the previous chunk's (the other buffer).
    if (store_thread) {
      if (last_was_tma) Ops::tma_store_wait_read_1();
      else Ops::tma_store_wait_all();
    }
    Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);  // and every copy out of it is done
    fill(dbuf);
    const bool tma = rows_valid >= Cfg::kBlockM;
    if (tma) {
      Ops::fence_async_shared();  // generic-proxy writes -> visible to the TMA
      Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
      if (store_thread) {
        Ops::tma_store(&p.gemm.tma_d, dbuf, n_col + chunk * kCols, m_row, 0);
        Ops::tma_store_commit();
      }
    } else {
      Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);  // every row is staged
      const int col0 = n_col + chunk * kCols;
      for (int v = static_cast<int>(row); v < rows_valid * kPieces; v += Cfg::kEpilogueThreads) {
        const int r = v / kPieces, q = v % kPieces;
        const int col = col0 + q * kVec;
        // N * sizeof(Out) is a multiple of 16: a piece lies wholly inside or past N.
        // Both addresses are 16-byte aligned (a 16-byte piece of a staged row; rows of
        // out span a multiple of 16 bytes): one 16-byte load and store each.
        if (col < p.n)
          *reinterpret_cast<Piece16*>(p.out + (static_cast<size_t>(m_row + r) * static_cast<size_t>(p.n) + col) *
                                                  sizeof(Out)) =
              *reinterpret_cast<const Piece16*>(dbuf + epi_chunk_offset(static_cast<uint32_t>(r),
                                                                        static_cast<uint32_t>(q)));
      }
    }
    last_was_tma = tma;
  }

  /// The tile's rows in no group: zeros in every chunk (no accumulator).
  JAX_SM100_ROLE void zero_tile(int n_col, int m_row, int rows_valid) {
    for (int c = 0; c < kChunks; ++c) {
      chunk(c, n_col, m_row, rows_valid, [&](uint8_t* dbuf) {
        const uint8_t zero[16] = {};
        for (int q = 0; q < kPieces; ++q) std::memcpy(dbuf + epi_chunk_offset(row, q), zero, 16);
      });
    }
  }

  /// After the last tile: every store has completed before the CTA exits.
  JAX_SM100_ROLE void finish() {
    if (store_thread) Ops::tma_store_wait_all();
  }
};

/// Rows of tile t that may be written: kBlockM (the whole box, by TMA) when all its rows
/// are the group's or it runs past M only (TMA clips there); else only the group's rows.
template <class Cfg>
JAX_SM100_ROLE int grouped_rows_valid(const GroupedTile& t, int m) {
  return (t.row_end - t.row0 >= Cfg::kBlockM || t.row_end >= m) ? Cfg::kBlockM : t.row_end - t.row0;
}

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void grouped_epilogue_role(GemmStorage<Cfg, Ops>& s, const GroupedGemmParams<Ops>& p,
                                          uint32_t tmem_base, const GroupTableEntry* table) {
  using Store = GroupedTileStore<Cfg, Ops, Out>;
  constexpr int kCols = Store::kCols;
  constexpr int kPerLoad = 16;  // TMEM columns per load
  constexpr int kPiecesPerLoad = kPerLoad * static_cast<int>(sizeof(Out)) / 16;
  pipeline::OutputTilePipeline<Cfg::kAccStages, typename Ops::Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN,
                                                                               "accumulator");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127
  Store store(s, p, row);
  const int count = p.order.count(table);
  GroupSpan cache;

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    GroupedTile t;
    const GroupedWork kind = decode_work(p, table, count, work, cache, &t);
    if (kind == GroupedWork::kNone) continue;
    const int n_col = t.n_tile * Cfg::kBlockN;
    const int rows_valid = grouped_rows_valid<Cfg>(t, p.order.m);
    if (kind == GroupedWork::kZeros) {  // rows in no group: zeros, no accumulator
      store.zero_tile(n_col, t.row0, rows_valid);
      continue;
    }
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, n_col, t.row0, rows_valid, [&](uint8_t* dbuf) {
        for (int j = 0; j < kCols / kPerLoad; ++j) {
          uint32_t v[kPerLoad];
          Ops::tmem_load_32x32b_x16(taddr + chunk * kCols + j * kPerLoad, v);
          Ops::tmem_wait_ld();
          Out out[kPerLoad];
          for (int i = 0; i < kPerLoad; ++i) {
            float x;
            std::memcpy(&x, &v[i], 4);
            out[i] = static_cast<Out>(x);
          }
          for (int q = 0; q < kPiecesPerLoad; ++q)
            std::memcpy(dbuf + epi_chunk_offset(row, j * kPiecesPerLoad + q),
                        reinterpret_cast<const uint8_t*>(out) + q * 16, 16);
        }
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
// The CTA: the group table, then cta_skeleton.h's CTA with this kernel's roles.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, class Out>
JAX_SM100_ROLE void grouped_gemm_cta(GemmStorage<Cfg, Ops>& s, const GroupedGemmParams<Ops>& p) {
  static_assert(Cfg::kClusterM == 1, "the grouped kernel runs one CTA per cluster");
  GroupTableEntry* table = grouped_table<Cfg, Ops>(s);
  // Warp 3 (the C-load warp, idle at set-up) builds the table; run_cta's CTA barrier
  // publishes it before any role decodes a tile.
  if (Ops::thread_idx() / 32 == Cfg::kWarpEpiLoad) build_grouped_table<Ops>(p.order, p.group_sizes, table);
  run_cta<Cfg, Ops, Out>(
      s, p.gemm, [&] { grouped_load_role<Cfg, Ops>(s, p, table); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { grouped_mma_role<Cfg, Ops, T>(s, p, mma, table); },
      [&](uint32_t tmem_base) { grouped_epilogue_role<Cfg, Ops, Out>(s, p, tmem_base, table); });
}

}  // namespace jax_sm100::kernels::sm100
