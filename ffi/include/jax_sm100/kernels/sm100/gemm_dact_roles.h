// The activation-backward epilogue of the sm_100a bf16/fp16 GEMM (target
// jax_sm100_gemm_dact, jax_sm100.mlp's backward):
//
//   x     = alpha * acc * act'(c)     fp32, acc the tile's TMEM accumulator, c the saved
//                                     pre-activation (the residual operand's path)
//   d     = round(x) to Out           Out = the inputs' type
//   dbias += column sums of x         fp32, unrounded, every row and batch entry; only
//                                     when dbias is not null
//
// The kernel is the bf16 GEMM's CTA (cta_skeleton.h run_cta) with that GEMM's own load
// and MMA roles (gemm_roles.h, unchanged), its C loads (epilogue_load_role: c arrives
// chunk by chunk through the EpiLoadPipeline exactly as the residual kernel's C), its
// store (TileStore) and the epilogue role below. The activation is compile-time.
//
// Column sums: an epilogue thread holds one output row, so a column's sum runs across
// threads. Per 16-column TMEM load, each warp reduces its 32 rows with a transposing
// butterfly (warp_column_sum16: 16 shuffles, after which lane l holds the warp's sum of
// column l / 2) and the even lanes send one f32 reduction each to dbias (columns past n
// skipped): four per column per 128-row tile. Rows past M hold zeros (TMA zero-fills
// A's and C's rows past M, so x = 0 there) and add nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/gemm_roles.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"

namespace jax_sm100::kernels::sm100 {

/// Kernel parameters of the activation-backward GEMM.
template <class Ops>
struct GemmDactParams {
  GemmParams<Ops> gemm;  ///< the GEMM's, with has_c = 1: c is the pre-activation
  float* dbias;          ///< (n,) f32 in global memory, zeroed before the launch; or null
  int n;                 ///< columns of d (dbias entries)
};

/// The warp's 32 rows of 16 columns summed per column (warp-wide: every lane calls it).
/// Four halving steps: across lane bit 2h, the lane with the bit clear keeps columns
/// 0..h-1 of its h-column window and sends h..2h-1, its partner the other way, each
/// adding what it receives; then one step across lane bit 1. Lane l returns column l / 2.
template <class Ops>
JAX_SM100_ROLE float warp_column_sum16(const float (&x)[16], uint32_t lane) {
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = x[i];
#pragma unroll
  for (int h = 8; h >= 1; h /= 2) {
    const uint32_t bit = 2u * static_cast<uint32_t>(h);
    const bool upper = (lane & bit) != 0;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = upper ? v[i] : v[i + h];
      const float keep = upper ? v[i + h] : v[i];
      v[i] = keep + Ops::shfl_xor(send, bit);
    }
  }
  return v[0] + Ops::shfl_xor(v[0], 1u);
}

// ------------------------------------------------------------------------------------
// Warps 4..7: the activation-backward epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out, Activation Act>
JAX_SM100_ROLE void dact_epilogue_role(GemmStorage<Cfg, Ops>& s, const GemmDactParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  using Store = TileStore<Cfg, Ops, Out>;
  constexpr int kCols = Store::kCols;  // columns per chunk
  constexpr int kPerLoad = 16;         // TMEM columns per load
  constexpr int kChunksPerLoad = kPerLoad * static_cast<int>(sizeof(Out)) / 16;
  static_assert(sizeof(Out) == 2, "d has the 16-bit inputs' type");
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "accumulator");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127; warp w covers TMEM lanes 32 * (w % 4) ..
  const uint32_t lane = row % 32;
  Store store(s, p.gemm, row);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p.gemm, work);
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, t.batch, [&](uint8_t* dbuf, const uint8_t* cbuf) {
        for (int j = 0; j < kCols / kPerLoad; ++j) {
          uint32_t v[kPerLoad];
          Ops::tmem_load_32x32b_x16(taddr + chunk * kCols + j * kPerLoad, v);
          Ops::tmem_wait_ld();
          Out cvals[kPerLoad];
          for (int q = 0; q < kChunksPerLoad; ++q)
            std::memcpy(reinterpret_cast<uint8_t*>(cvals) + q * 16, cbuf + epi_chunk_offset(row, j * kChunksPerLoad + q),
                        16);
          float x[kPerLoad];
          Out out[kPerLoad];
          for (int i = 0; i < kPerLoad; ++i) {
            float a;
            std::memcpy(&a, &v[i], 4);
            x[i] = p.gemm.alpha * a * activation_grad<Act>(static_cast<float>(cvals[i]));
            out[i] = static_cast<Out>(x[i]);
          }
          for (int q = 0; q < kChunksPerLoad; ++q)
            std::memcpy(dbuf + epi_chunk_offset(row, j * kChunksPerLoad + q),
                        reinterpret_cast<const uint8_t*>(out) + q * 16, 16);
          if (p.dbias != nullptr) {
            const float sum = warp_column_sum16<Ops>(x, lane);
            const int col = t.n_col + chunk * kCols + j * kPerLoad + static_cast<int>(lane / 2);
            if (lane % 2 == 0 && col < p.n) Ops::red_add_f32(p.dbias + col, sum);
          }
        }
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
// The CTA: the bf16 GEMM's load and MMA roles, its C loads, this epilogue.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, Activation Act>
JAX_SM100_ROLE void gemm_dact_cta(GemmStorage<Cfg, Ops>& s, const GemmDactParams<Ops>& p) {
  run_cta<Cfg, Ops, T>(
      s, p.gemm, [&] { load_role<Cfg, Ops, T>(s, p.gemm); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { mma_role<Cfg, Ops, T>(s, p.gemm, mma); },
      [&](uint32_t tmem_base) { dact_epilogue_role<Cfg, Ops, T, Act>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
