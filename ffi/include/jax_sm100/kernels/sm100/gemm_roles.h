// The sm_100a bf16/fp16 GEMM: D = alpha * op(A) @ op(B) + beta * C, fp32 accumulation in
// TMEM, one function per warp role (see gemm_config.h for the roles and shapes).
//
// Every function here is a template over `Ops` (ops_concept.h): compiled with DeviceOps
// for sm_100a (gemm.cuh) and with the CPU emulator's EmuOps (tests/emu) from this same
// source. The CTA and everything the three sm_100a GEMMs share are in cta_skeleton.h
// (set-up and tear-down, the CLC scheduler, the C loads, the load and MMA loops, the
// epilogue's store); this file holds what is this kernel's own: the loads of op(A) and
// op(B) in either layout, the kind::f16 UMMA and the epilogue's alpha / beta math.
// The pipelines are the library's (pipeline/): InputTilePipeline over a
// StandardTilePayload (TMA -> MMA), OutputTilePipeline over TMEM accumulators
// (MMA -> epilogue, MmaStage / EpilogueStage), EpiLoadPipeline (C -> epilogue) and two
// ProducerConsumerPipeline rings for cluster launch control: the CLC responses
// (scheduler -> every role) and the throttle (load warp -> scheduler, the seeds'
// throttle_signal: the scheduler asks for the next cluster only once the load warp has
// started the current one, so one CTA does not hoard work).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

namespace jax_sm100::kernels::sm100 {

// ------------------------------------------------------------------------------------
// Warp 0: TMA producer.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void load_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p) {
  using Barrier = typename Ops::Barrier;
  const int rank = static_cast<int>(Ops::cta_rank());
  Ops::prefetch_map(&p.tma_a);
  Ops::prefetch_map(&p.tma_b);

  produce_stages<Cfg, Ops>(s, p, [&](auto& stage, const TileCoord& t, int kb) {
    const int a_batch = p.a_batched ? t.batch : 0, b_batch = p.b_batched ? t.batch : 0;
    const int n_row = t.n_col + rank * Cfg::kBRows;  // this CTA's B rows
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
  });
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread of the even CTA).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T>
JAX_SM100_ROLE void mma_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p,
                             MmaHandle<Cfg::kAccStages, Ops>& mma) {
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  const uint32_t idesc =
      ptx::make_umma_idesc_f16(kBf16, p.trans_a != 0, p.trans_b == 0, Cfg::kUmmaM, Cfg::kUmmaN);
  // Per UMMA (K = 16): K-major operands advance 32 bytes inside the 128-byte swizzled
  // row; MN-major ones advance 16 K rows = two 8-row groups of 1024 bytes. MN-major
  // tiles are 64-column boxes of 64 K rows, 8192 bytes apart (the LBO).
  const uint32_t a_step = p.trans_a ? 2048u : 32u, b_step = p.trans_b ? 32u : 2048u;
  const uint32_t a_lbo = p.trans_a ? 8192u : 16u, b_lbo = p.trans_b ? 16u : 8192u;

  mma_per_tile<Cfg, Ops>(s, p, mma, [&](auto& tiles, uint32_t tmem_d, int kb) {
    const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
    for (int kk = 0; kk < Cfg::kBlockK / Cfg::kUmmaK; ++kk) {
      const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * a_step, a_lbo, 1024, ptx::UmmaSwizzle::k128B);
      const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * b_step, b_lbo, 1024, ptx::UmmaSwizzle::k128B);
      Ops::umma_f16(tmem_d, da, db, idesc, kb > 0 || kk > 0, Cfg::kPair);
    }
  });
}

// ------------------------------------------------------------------------------------
// Warps 4..7: epilogue (thread = output row = TMEM lane): alpha * acc (+ beta * C).
// ------------------------------------------------------------------------------------
/// This thread's row of staging chunk `chunk` (kCols columns of the accumulator whose
/// row starts at TMEM address taddr) as Out = alpha * acc (+ beta * C from cbuf when not
/// null), 16 columns per tcgen05.ld, 16-byte pieces at their 128B-swizzled offsets.
template <class Ops, class Out, int kCols>
JAX_SM100_ROLE void fill_accumulator_chunk(uint32_t taddr, int chunk, uint32_t row, uint8_t* dbuf,
                                           const uint8_t* cbuf, float alpha, float beta) {
  constexpr int kPerLoad = 16;  // TMEM columns per load
  constexpr int kChunksPerLoad = kPerLoad * static_cast<int>(sizeof(Out)) / 16;
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
      float y = alpha * x;
      if (cbuf != nullptr) y += beta * static_cast<float>(cvals[i]);
      out[i] = static_cast<Out>(y);
    }
    for (int q = 0; q < kChunksPerLoad; ++q)
      std::memcpy(dbuf + epi_chunk_offset(row, j * kChunksPerLoad + q),
                  reinterpret_cast<const uint8_t*>(out) + q * 16, 16);
  }
}

template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void epilogue_role(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  using Store = TileStore<Cfg, Ops, Out>;
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "accumulator");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127; warp w covers TMEM lanes 32 * (w % 4) ..
  Store store(s, p, row);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, t.batch, [&](uint8_t* dbuf, const uint8_t* cbuf) {
        fill_accumulator_chunk<Ops, Out, Store::kCols>(taddr, chunk, row, dbuf, cbuf, p.alpha, p.beta);
      });
    }
    // Every TMEM read of this accumulator is complete: free it (the even CTA's barrier).
    Ops::tcgen05_fence_before();
    if (Cfg::kPair) Ops::arrive_remote(acc.mbar(), 0);
    else acc.mbar()->arrive();
    std::move(acc).release_without_signal();
  }
  store.finish();
}

// ------------------------------------------------------------------------------------
// The CTA (cta_skeleton.h) with this kernel's load, MMA and epilogue roles.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, class Out>
JAX_SM100_ROLE void gemm_cta(GemmStorage<Cfg, Ops>& s, const GemmParams<Ops>& p) {
  run_cta<Cfg, Ops, Out>(
      s, p, [&] { load_role<Cfg, Ops, T>(s, p); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { mma_role<Cfg, Ops, T>(s, p, mma); },
      [&](uint32_t tmem_base) { epilogue_role<Cfg, Ops, Out>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
