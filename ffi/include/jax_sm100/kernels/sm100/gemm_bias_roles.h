// The fused bias/activation epilogue of the sm_100a bf16/fp16 GEMM:
//
//   z   = alpha * acc + bias[col]      fp32, acc the tile's TMEM accumulator
//   pre = round(z) to Out              only when has_pre (the backward pass's input)
//   d   = round(act(z)) to Out         act = the Act template parameter, in fp32
//
// The kernel is the bf16 GEMM's CTA (cta_skeleton.h run_cta) with that GEMM's own load
// and MMA roles (gemm_roles.h, unchanged) and the epilogue role below; the plain and
// residual kernels do not include this file. The activation is compile-time; bias (null:
// z = alpha * acc) and pre are per-launch values, tested once per tile / chunk.
//
// Bias: before waiting for a tile's accumulator, each epilogue thread loads its share of
// the tile's BlockN bias columns (BlockN / 128 floats; 0 past n or without a bias) into
// registers, so the global load's latency hides behind the MMA; it writes them into a
// (BlockN,) f32 slice that follows the CTA's GemmSharedStorage once the accumulator is
// there. The first chunk's barrier (BiasTileStore::chunk) publishes the slice; the
// previous tile's last reads of it precede that tile's last chunk's second barrier, which
// every thread has passed before writing, so the overwrite is safe. Every thread of a
// warp reads the same column at the same time: a shared-memory broadcast.
//
// Stores: the plain kernel's chunking (TileStore): kCols-wide chunks through two 128B-
// swizzled staging buffers, alternating. pre, when asked for with an activation, is
// staged in the C buffers (this kernel has no residual operand, so the C-load warp never
// fills them) at the same index as d's, and both chunks go out in one bulk group: the
// wait before reusing a buffer pair (wait_group.read 1) covers both. With no activation
// pre == d: the d chunk is stored to both tensors.
#pragma once

#include <cstdint>
#include <cstring>
#include <math.h>
#include <utility>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm100/cta_skeleton.h"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/gemm_roles.h"
#include "jax_sm100/kernels/sm100/mma_handle.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"

namespace jax_sm100::kernels::sm100 {

/// Kernel parameters of the bias/activation GEMM.
template <class Ops>
struct GemmBiasParams {
  GemmParams<Ops> gemm;           ///< the GEMM's (has_c = 0: no residual)
  typename Ops::TensorMap tma_pre;  ///< pre: d's shape, type and box; stored only when has_pre
  const float* bias;              ///< (n,) f32 in global memory, or null: no bias
  int n;                          ///< columns of d (bias entries)
  int has_pre;                    ///< write z to tma_pre
};

/// Bytes of the bias slice that follows GemmSharedStorage in dynamic shared memory.
template <class Cfg>
constexpr uint32_t bias_slice_bytes() {
  return static_cast<uint32_t>(Cfg::kBlockN * sizeof(float));
}

/// The (BlockN,) f32 bias slice right after the shared carve-up (1024-aligned).
template <class Cfg, class Ops>
JAX_SM100_ROLE float* bias_slice(GemmStorage<Cfg, Ops>& s) {
  return reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(&s) + sizeof(GemmStorage<Cfg, Ops>));
}

/// The epilogue's output path of the bias kernel (one per epilogue thread; thread =
/// output row): TileStore's chunking, with pre staged alongside d when asked for.
template <class Cfg, class Ops, class Out, bool kStagePre>
struct BiasTileStore {
  static constexpr int kCols = Cfg::kEpiRowBytes / static_cast<int>(sizeof(Out));  ///< columns per chunk
  static constexpr int kChunks = Cfg::kBlockN / kCols;                            ///< chunks per tile
  static_assert(Cfg::kEpiStages >= 2, "pre is staged in the two C buffers");

  GemmStorage<Cfg, Ops>& s;
  const GemmBiasParams<Ops>& p;
  bool store_thread;         ///< issues the TMA stores
  uint32_t chunk_count = 0;  ///< chunks this CTA has stored: picks the staging buffers

  JAX_SM100_ROLE BiasTileStore(GemmStorage<Cfg, Ops>& storage, const GemmBiasParams<Ops>& params, uint32_t row)
      : s(storage), p(params), store_thread(row == 0) {
    if (store_thread) {
      Ops::prefetch_map(&p.gemm.tma_d);
      if (p.has_pre) Ops::prefetch_map(&p.tma_pre);
    }
  }

  /// Chunk `chunk` of the tile at (n_col, m_row) of batch entry `batch`: `fill(dbuf,
  /// prebuf)` writes this thread's row of d (and, when prebuf is not null, of pre) into
  /// the 128B-swizzled staging buffers (epi_chunk_offset).
  template <class Fill>
  JAX_SM100_ROLE void chunk(int chunk, int n_col, int m_row, int batch, Fill&& fill) {
    const uint32_t buf = chunk_count++ & 1;  // the two buffer pairs in turn
    uint8_t* dbuf = s.d[buf];
    uint8_t* prebuf = kStagePre && p.has_pre ? s.c[buf] : nullptr;
    if (store_thread) Ops::tma_store_wait_read_1();  // the stores from this pair 2 chunks ago
    Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
    fill(dbuf, prebuf);
    Ops::fence_async_shared();  // make the generic-proxy writes visible to the TMA
    Ops::named_sync(Cfg::kEpilogueBarrierId, Cfg::kEpilogueThreads);
    if (store_thread) {
      const int c0 = n_col + chunk * kCols;
      Ops::tma_store(&p.gemm.tma_d, dbuf, c0, m_row, batch);
      if (p.has_pre) Ops::tma_store(&p.tma_pre, prebuf != nullptr ? prebuf : dbuf, c0, m_row, batch);
      Ops::tma_store_commit();
    }
  }

  /// After the last tile: every store has completed before the CTA exits.
  JAX_SM100_ROLE void finish() {
    if (store_thread) Ops::tma_store_wait_all();
  }
};

// ------------------------------------------------------------------------------------
// Warps 4..7: the bias/activation epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out, Activation Act>
JAX_SM100_ROLE void bias_epilogue_role(GemmStorage<Cfg, Ops>& s, const GemmBiasParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  constexpr bool kStagePre = Act != Activation::kNone;  // else pre == d
  using Store = BiasTileStore<Cfg, Ops, Out, kStagePre>;
  constexpr int kCols = Store::kCols;  // columns per chunk
  constexpr int kPerLoad = 16;         // TMEM columns per load
  constexpr int kChunksPerLoad = kPerLoad * static_cast<int>(sizeof(Out)) / 16;
  constexpr int kBiasRegs = Cfg::kBlockN / Cfg::kEpilogueThreads;
  static_assert(Cfg::kBlockN % Cfg::kEpilogueThreads == 0, "each thread stages BlockN / 128 bias columns");
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "accumulator");
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127; warp w covers TMEM lanes 32 * (w % 4) ..
  Store store(s, p, row);
  float* slice = bias_slice<Cfg, Ops>(s);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p.gemm, work);
    float bias_share[kBiasRegs];  // columns row + 128 i of the tile
    for (int i = 0; i < kBiasRegs; ++i) {
      const int col = t.n_col + static_cast<int>(row) + Cfg::kEpilogueThreads * i;
      bias_share[i] = p.bias != nullptr && col < p.n ? p.bias[col] : 0.f;
    }
    auto acc = acc_pipe.acquire_epilogue_stage();  // waits for the MMA's commit
    Ops::tcgen05_fence_after();
    for (int i = 0; i < kBiasRegs; ++i) slice[row + Cfg::kEpilogueThreads * i] = bias_share[i];
    const uint32_t taddr = acc.tmem_offset() + (((row / 32) * 32) << 16);
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, t.batch, [&](uint8_t* dbuf, uint8_t* prebuf) {
        for (int j = 0; j < kCols / kPerLoad; ++j) {
          uint32_t v[kPerLoad];
          Ops::tmem_load_32x32b_x16(taddr + chunk * kCols + j * kPerLoad, v);
          Ops::tmem_wait_ld();
          float bias[kPerLoad];  // the same 16 columns for every thread: broadcast reads
          std::memcpy(bias, slice + chunk * kCols + j * kPerLoad, sizeof(bias));
          Out out[kPerLoad];
          Out pre_vals[kPerLoad];
          for (int i = 0; i < kPerLoad; ++i) {
            float x;
            std::memcpy(&x, &v[i], 4);
            const float z = fmaf(p.gemm.alpha, x, bias[i]);
            const float y = apply_activation<Act>(z);
            pre_vals[i] = static_cast<Out>(z);
            out[i] = static_cast<Out>(y);
          }
          for (int q = 0; q < kChunksPerLoad; ++q) {
            const uint32_t off = epi_chunk_offset(row, j * kChunksPerLoad + q);
            std::memcpy(dbuf + off, reinterpret_cast<const uint8_t*>(out) + q * 16, 16);
            if (prebuf != nullptr) std::memcpy(prebuf + off, reinterpret_cast<const uint8_t*>(pre_vals) + q * 16, 16);
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
// The CTA: the bf16 GEMM's load and MMA roles, this epilogue.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class T, class Out, Activation Act>
JAX_SM100_ROLE void gemm_bias_cta(GemmStorage<Cfg, Ops>& s, const GemmBiasParams<Ops>& p) {
  run_cta<Cfg, Ops, Out>(
      s, p.gemm, [&] { load_role<Cfg, Ops, T>(s, p.gemm); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { mma_role<Cfg, Ops, T>(s, p.gemm, mma); },
      [&](uint32_t tmem_base) { bias_epilogue_role<Cfg, Ops, Out, Act>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
