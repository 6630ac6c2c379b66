// The sm_100a blockwise-scaled FP8 GEMM: d = sum_kb a_scale * b_scale * partial_kb
// (+ beta * c), one function per warp role (see fp8_config.h for the roles, shapes and
// where the scales come from).
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (fp8_gemm.cuh) and with the CPU emulator's EmuOps (tests/emu) from this
// same source. The CTA and what the sm_100a GEMMs share come from cta_skeleton.h: the
// shared-memory carve-up (GemmSharedStorage over this kernel's BlockwiseFP8TilePayload),
// set-up and tear-down, the CLC work walk (WorkIterator), the scheduler and C-load roles,
// the load loop, MmaHandle, the epilogue's store through the swizzled staging buffers.
// What is this kernel's own: the producer's A-scale box, the MMA's per-K TMEM stages
// (kind::f8f6f4) and the epilogue's per-K promotion, as per-K-block / per-tile pieces
// (fp8_load_k_block, fp8_mma_tile, fp8_promote_tile, fp8_fill_chunk) that the FP8
// M-grouped kernel (grouped_fp8_roles.h) drives with its own work list and store.
//
// Pipelines: InputTilePipeline<BlockwiseFP8TilePayload> (TMA -> MMA for the tiles, and
// -> epilogue for A's scales: two consumers, the empty barrier counts the UMMA commit and
// one arrival per epilogue warp); OutputTilePipeline over kAccStages per-K TMEM stages
// through its per-K view (MmaHandle::acquire_k_stage_linear -> MmaKStage on the MMA side,
// OutputKPipeline::consume_k_explicit -> PerKConsumerStage on the epilogue side);
// EpiLoadPipeline (C); the CLC response and throttle rings.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/fp8_config.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

// Full unrolling keeps the 128-float accumulator in registers on the GPU (every index a
// constant); the host compiler (the emulator) does not need it.
#if defined(__CUDACC__)
#define JAX_SM100_FP8_UNROLL _Pragma("unroll")
#else
#define JAX_SM100_FP8_UNROLL
#endif

namespace jax_sm100::kernels::sm100 {

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer (A, B and A's scales of one K block per stage).
// ------------------------------------------------------------------------------------
/// One K block's three loads into an input stage (one transaction, zero fill included):
/// A's 128 rows from row0, B's 128 rows from n_col of batch entry b_batch (the group in
/// the grouped kernel), the A scales of those rows for K block kb.
template <class Cfg, class Ops, class Stage>
JAX_SM100_ROLE void fp8_load_k_block(Stage& stage, const Fp8GemmParams<Ops>& p, int row0, int n_col, int b_batch,
                                     int kb) {
  auto* bar = stage.mbar();
  const int k0 = kb * Cfg::kBlockK;
  Ops::tma_load(stage.a_tile(), &p.tma_a, bar, k0, row0, 0);          // 128 rows x 128 K
  Ops::tma_load(stage.b_tile(), &p.tma_b, bar, k0, n_col, b_batch);   // 128 rows x 128 K
  Ops::tma_load(stage.sfa_tile(), &p.tma_sfa, bar, row0, kb, 0);     // the rows' scales of kb
}

template <class Cfg, class Ops>
JAX_SM100_ROLE void fp8_load_role(GemmStorage<Cfg, Ops>& s, const Fp8GemmParams<Ops>& p) {
  Ops::prefetch_map(&p.tma_a);
  Ops::prefetch_map(&p.tma_b);
  Ops::prefetch_map(&p.tma_sfa);
  produce_stages<Cfg, Ops>(s, p, [&](auto& stage, const TileCoord& t, int kb) {
    fp8_load_k_block<Cfg, Ops>(stage, p, t.m_row, t.n_col, 0, kb);
  });
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread). Each K block's partial gets its own TMEM stage.
// ------------------------------------------------------------------------------------
/// The MMA of one output tile: per K block a free per-K TMEM stage (the epilogue has
/// promoted its last use), the stage's A and B, four UMMA into a fresh partial; commits
/// free the input stage once they have read it (the epilogue warps add their own
/// arrivals for the A scales) and hand the partial to the epilogue once complete.
template <class Cfg, class Ops, class Consumer>
JAX_SM100_ROLE void fp8_mma_tile(MmaHandle<Cfg::kAccStages, Ops>& mma, Consumer& consumer, int k_blocks) {
  constexpr auto kE4M3 = ptx::UmmaF8f6f4Format::kE4M3;
  const uint32_t idesc = ptx::make_umma_idesc_f8f6f4(kE4M3, kE4M3, false, false, Cfg::kUmmaM, Cfg::kUmmaN);
  // Both operands K-major, 128-byte rows in 8-row swizzle atoms 1024 bytes apart (SBO);
  // each UMMA (K = 32 bytes) starts 32 bytes further into the row.
  constexpr uint32_t kStep = Cfg::kUmmaK, kLbo = 16, kSbo = 1024;
  for (int kb = 0; kb < k_blocks; ++kb) {
    auto partial = mma.acquire_k_stage_linear();
    auto tiles = consumer.acquire_stage();  // A, B of this K block have landed
    Ops::tcgen05_fence_after();
    const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
    for (int kk = 0; kk < Cfg::kBlockK / Cfg::kUmmaK; ++kk) {
      const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * kStep, kLbo, kSbo, ptx::UmmaSwizzle::k128B);
      const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * kStep, kLbo, kSbo, ptx::UmmaSwizzle::k128B);
      Ops::umma_f8f6f4(partial.tmem_offset(), da, db, idesc, kk > 0);  // a fresh partial per K block
    }
    Ops::umma_commit(tiles.mbar());
    std::move(tiles).release_without_signal();
    Ops::umma_commit(partial.mbar());
    std::move(partial).release();
  }
}

template <class Cfg, class Ops>
JAX_SM100_ROLE void fp8_mma_role(GemmStorage<Cfg, Ops>& s, const Fp8GemmParams<Ops>& p,
                                 MmaHandle<Cfg::kAccStages, Ops>& mma) {
  using Barrier = typename Ops::Barrier;
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto consumer = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(false))
    fp8_mma_tile<Cfg, Ops>(mma, consumer, p.k_blocks);
}

/// acc[i] += scale * (partial in TMEM at taddr, column i), for all kN columns: tcgen05.ld
/// in groups of 32 columns (two 32x32b.x16 loads, one wait), then one FFMA per column.
template <class Ops, int kN>
JAX_SM100_ROLE void promote_partial(float (&acc)[kN], uint32_t taddr, float scale) {
  constexpr int kPerLoad = 16, kPerWait = 32;
  static_assert(kN % kPerWait == 0, "whole load groups");
  JAX_SM100_FP8_UNROLL
  for (int c = 0; c < kN; c += kPerWait) {
    uint32_t v[kPerWait / kPerLoad][kPerLoad];
    JAX_SM100_FP8_UNROLL
    for (int j = 0; j < kPerWait / kPerLoad; ++j) Ops::tmem_load_32x32b_x16(taddr + c + j * kPerLoad, v[j]);
    Ops::tmem_wait_ld();
    JAX_SM100_FP8_UNROLL
    for (int i = 0; i < kPerWait; ++i) {
      float x;
      std::memcpy(&x, &v[i / kPerLoad][i % kPerLoad], 4);
      acc[c + i] = fmaf(scale, x, acc[c + i]);
    }
  }
}

/// acc = sum over the tile's K blocks of a_scale[row, kb] * b_scale_row[kb] * partial_kb
/// (the epilogue's per-K promotion; thread = output row = TMEM lane): per K block the
/// row's A scale from the input stage (then one arrival per warp frees the stage), B's
/// from global memory, the partial from its TMEM stage, freed once read.
template <class Cfg, class Ops, class Scales, class Partials>
JAX_SM100_ROLE void fp8_promote_tile(float (&acc)[Cfg::kBlockN], Scales& scales, Partials& partials,
                                     const float* b_scale_row, int k_blocks, uint32_t row) {
  const uint32_t lane_bits = ((row / 32) * 32) << 16;  // warp w reads TMEM lanes 32 * (w % 4) ..
  const bool lane0 = row % 32 == 0;
  JAX_SM100_FP8_UNROLL
  for (int i = 0; i < Cfg::kBlockN; ++i) acc[i] = 0.f;
  for (int kb = 0; kb < k_blocks; ++kb) {
    const float sb = b_scale_row[kb];  // global load, in flight during the waits below
    float sa;
    {
      auto stage = scales.acquire_stage();  // this K block's A scales have landed
      sa = stage.sfa_tile()[row];
      Ops::sync_warp();                     // every lane has read before the warp's one arrival
      if (lane0) stage.arrive();
      std::move(stage).release_without_signal();
    }
    const float scale = sa * sb;
    auto partial = partials.consume_k_explicit();  // waits for the MMA's commit of this K block
    Ops::tcgen05_fence_after();
    promote_partial<Ops>(acc, partial.tmem_offset() + lane_bits, scale);
    Ops::tcgen05_fence_before();
    partial.arrive();  // this thread's TMEM reads are done; the guard's exit steps
  }
}

/// This thread's row of staging chunk `chunk` (kCols columns of acc) as bf16
/// (+ beta * C from cbuf when not null), 16-byte pieces at their 128B-swizzled offsets.
template <class Cfg, int kCols>
JAX_SM100_ROLE void fp8_fill_chunk(const float (&acc)[Cfg::kBlockN], int chunk, uint32_t row, uint8_t* dbuf,
                                   const uint8_t* cbuf, float beta) {
  using Out = __nv_bfloat16;
  constexpr int kPer = 16 / static_cast<int>(sizeof(Out));
  JAX_SM100_FP8_UNROLL
  for (int q = 0; q < kCols / kPer; ++q) {
    Out cvals[kPer], out[kPer];
    if (cbuf != nullptr) std::memcpy(cvals, cbuf + epi_chunk_offset(row, q), 16);
    JAX_SM100_FP8_UNROLL
    for (int i = 0; i < kPer; ++i) {
      float y = acc[chunk * kCols + q * kPer + i];
      if (cbuf != nullptr) y = fmaf(beta, static_cast<float>(cvals[i]), y);
      out[i] = static_cast<Out>(y);
    }
    std::memcpy(dbuf + epi_chunk_offset(row, q), out, 16);
  }
}

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane): per-K promotion, then the store.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void fp8_epilogue_role(GemmStorage<Cfg, Ops>& s, const Fp8GemmParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  using Store = TileStore<Cfg, Ops, __nv_bfloat16>;
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "partials");
  auto partials = acc_pipe.per_k();
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto scales = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127: output row, TMEM lane
  Store store(s, p, row);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    const float* b_scale_row = p.b_scale + static_cast<int64_t>(t.n_col / Cfg::kScaleBlock) * p.k_blocks;
    float acc[Cfg::kBlockN];
    fp8_promote_tile<Cfg, Ops>(acc, scales, partials, b_scale_row, p.k_blocks, row);
    // bf16 (+ beta * C) -> 128B-swizzled staging -> TMA store, kCols columns at a time
    // (unrolled: acc is indexed by constants only, so it stays in registers).
    JAX_SM100_FP8_UNROLL
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, 0, [&](uint8_t* dbuf, const uint8_t* cbuf) {
        fp8_fill_chunk<Cfg, Store::kCols>(acc, chunk, row, dbuf, cbuf, p.beta);
      });
    }
  }
  store.finish();
}

// ------------------------------------------------------------------------------------
// The CTA (cta_skeleton.h) with this kernel's load, MMA and epilogue roles.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void fp8_gemm_cta(GemmStorage<Cfg, Ops>& s, const Fp8GemmParams<Ops>& p) {
  run_cta<Cfg, Ops, __nv_bfloat16>(
      s, p, [&] { fp8_load_role<Cfg, Ops>(s, p); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { fp8_mma_role<Cfg, Ops>(s, p, mma); },
      [&](uint32_t tmem_base) { fp8_epilogue_role<Cfg, Ops>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
