// The sm_100a FP8 blockwise M-grouped GEMM's role functions (grouped_fp8_config.h):
// the dense FP8 kernel's per-K-block loads, UMMA and epilogue promotion (fp8_roles.h:
// fp8_load_k_block, fp8_mma_tile, fp8_promote_tile, fp8_fill_chunk) driven by the
// M-grouped kernel's work list and store (grouped_gemm_roles.h: the group table built by
// warp 3 from group_sizes in device memory, decode_work, GroupedTileStore):
//   * a work item decodes to a tile of one group; items past the real tile count do
//     nothing; tiles of the rows in no group load nothing, issue no UMMA and take no
//     TMEM stage: the epilogue stores zeros;
//   * loads: a's rows from the tile's first row, b of the tile's group (the group the
//     tensor map's outer coordinate), a's scales of the tile's rows;
//   * the epilogue reads B's scale of (group, N block, K block) from global memory;
//   * the store: TMA for boxes wholly inside the group (or only running past M), row by
//     row for a group's partial last tile.
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (grouped_fp8_gemm.cuh) and with the CPU emulator's EmuFp8Ops (tests/emu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

#include "jax_sm100/kernels/sm100/fp8_roles.h"
#include "jax_sm100/kernels/sm100/grouped_fp8_config.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_roles.h"

namespace jax_sm100::kernels::sm100 {

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer (one thread).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void grouped_fp8_load_role(GemmStorage<Cfg, Ops>& s, const GroupedFp8GemmParams<Ops>& p,
                                          const GroupTableEntry* table) {
  Ops::prefetch_map(&p.gemm.tma_a);
  Ops::prefetch_map(&p.gemm.tma_b);
  Ops::prefetch_map(&p.gemm.tma_sfa);
  produce_grouped_stages<Cfg, Ops>(s, p, table, [&](auto& stage, const GroupedTile& t, int kb) {
    fp8_load_k_block<Cfg, Ops>(stage, p.gemm, t.row0, t.n_tile * Cfg::kBlockN, t.group, kb);
  });
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread). Tiles that compute take per-K TMEM stages; the others none.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void grouped_fp8_mma_role(GemmStorage<Cfg, Ops>& s, const GroupedFp8GemmParams<Ops>& p,
                                         MmaHandle<Cfg::kAccStages, Ops>& mma, const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  const int count = p.order.count(table);
  GroupSpan cache;
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false)) {
    GroupedTile t;
    if (decode_work(p, table, count, work, cache, &t) != GroupedWork::kCompute) continue;
    fp8_mma_tile<Cfg, Ops>(mma, consumer, p.gemm.k_blocks);
  }
}

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane): per-K promotion, masked store.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void grouped_fp8_epilogue_role(GemmStorage<Cfg, Ops>& s, const GroupedFp8GemmParams<Ops>& p,
                                              uint32_t tmem_base, const GroupTableEntry* table) {
  using Barrier = typename Ops::Barrier;
  using Store = GroupedTileStore<Cfg, Ops, __nv_bfloat16, GroupedFp8GemmParams<Ops>>;
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "partials");
  auto partials = acc_pipe.per_k();
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto scales = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127: output row, TMEM lane
  Store store(s, p, row);
  const int count = p.order.count(table);
  GroupSpan cache;

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    GroupedTile t;
    const GroupedWork kind = decode_work(p, table, count, work, cache, &t);
    if (kind == GroupedWork::kNone) continue;
    const int n_col = t.n_tile * Cfg::kBlockN;
    const int rows_valid = grouped_rows_valid<Cfg>(t, p.order.m);
    if (kind == GroupedWork::kZeros) {  // rows in no group: zeros, no partials
      store.zero_tile(n_col, t.row0, rows_valid);
      continue;
    }
    const float* b_scale_row =
        p.gemm.b_scale + (static_cast<int64_t>(t.group) * p.n_blocks + t.n_tile) * p.gemm.k_blocks;
    float acc[Cfg::kBlockN];
    fp8_promote_tile<Cfg, Ops>(acc, scales, partials, b_scale_row, p.gemm.k_blocks, row);
    JAX_SM100_FP8_UNROLL
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, n_col, t.row0, rows_valid, [&](uint8_t* dbuf) {
        fp8_fill_chunk<Cfg, Store::kCols>(acc, chunk, row, dbuf, nullptr, 0.f);
      });
    }
  }
  store.finish();
}

// ------------------------------------------------------------------------------------
// The CTA: the group table, then cta_skeleton.h's CTA with this kernel's roles.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void grouped_fp8_gemm_cta(GemmStorage<Cfg, Ops>& s, const GroupedFp8GemmParams<Ops>& p) {
  static_assert(Cfg::kClusterM == 1, "the grouped kernel runs one CTA per cluster");
  GroupTableEntry* table = grouped_table<Cfg, Ops>(s);
  // Warp 3 (the C-load warp, idle at set-up) builds the table; run_cta's CTA barrier
  // publishes it before any role decodes a tile.
  if (Ops::thread_idx() / 32 == Cfg::kWarpEpiLoad) build_grouped_table<Ops>(p.order, p.group_sizes, table);
  run_cta<Cfg, Ops, __nv_bfloat16>(
      s, p.gemm, [&] { grouped_fp8_load_role<Cfg, Ops>(s, p, table); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { grouped_fp8_mma_role<Cfg, Ops>(s, p, mma, table); },
      [&](uint32_t tmem_base) { grouped_fp8_epilogue_role<Cfg, Ops>(s, p, tmem_base, table); });
}

}  // namespace jax_sm100::kernels::sm100
