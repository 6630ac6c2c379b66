// The fused bias/activation epilogue of the sm_100a blockwise FP8 GEMM:
//
//   z = sum_kb a_scale * b_scale * partial_kb + bias[col]   fp32 (the FP8 kernel's promotion)
//   d = round(act(z)) to bf16                               act = the Act template parameter
//
// The kernel is the FP8 GEMM's CTA (fp8_roles.h) with that GEMM's own load and MMA roles
// and per-K promotion (fp8_load_role, fp8_mma_role, fp8_promote_tile: unchanged) and the
// epilogue role below; the plain and residual FP8 kernels do not include this file. No
// residual operand (has_c = 0). The activation is compile-time; the bias (null: z = acc)
// is a per-launch value.
//
// Bias: before the tile's promotion loop each epilogue thread loads its one bias column
// (the tile is 128 columns wide and there are 128 epilogue threads; 0 past n or without a
// bias) into a register, so the global load's latency hides behind the tile's whole K
// loop; after the loop it writes it into a (BlockN,) f32 slice that follows the CTA's
// GemmSharedStorage. The first chunk's barrier (TileStore::chunk) publishes the slice; the
// previous tile's last reads of it precede that tile's last chunk's second barrier, which
// every thread has passed before writing, so the overwrite is safe. Every thread of a
// warp reads the same column at the same time: a shared-memory broadcast.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm100/fp8_roles.h"

namespace jax_sm100::kernels::sm100 {

/// Kernel parameters of the FP8 bias/activation GEMM: the FP8 GEMM's (has_c = 0) and the
/// bias.
template <class Ops>
struct Fp8BiasParams : Fp8GemmParams<Ops> {
  const float* bias;  ///< (n,) f32 in global memory, or null: no bias
  int n;              ///< columns of d (bias entries)
};

/// Bytes of the bias slice that follows GemmSharedStorage in dynamic shared memory.
template <class Cfg>
constexpr uint32_t fp8_bias_slice_bytes() {
  return static_cast<uint32_t>(Cfg::kBlockN * sizeof(float));
}

/// The (BlockN,) f32 bias slice right after the shared carve-up.
template <class Cfg, class Ops>
JAX_SM100_ROLE float* fp8_bias_slice(GemmStorage<Cfg, Ops>& s) {
  return reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(&s) + sizeof(GemmStorage<Cfg, Ops>));
}

/// This thread's row of staging chunk `chunk` (kCols columns of acc) as bf16 act(acc +
/// bias), the bias columns read from the shared slice, 16-byte pieces at their
/// 128B-swizzled offsets.
template <class Cfg, int kCols, Activation Act>
JAX_SM100_ROLE void fp8_fill_bias_chunk(const float (&acc)[Cfg::kBlockN], int chunk, uint32_t row, uint8_t* dbuf,
                                        const float* slice) {
  using Out = __nv_bfloat16;
  constexpr int kPer = 16 / static_cast<int>(sizeof(Out));
  JAX_SM100_FP8_UNROLL
  for (int q = 0; q < kCols / kPer; ++q) {
    float bias[kPer];  // the same columns for every thread: broadcast reads
    std::memcpy(bias, slice + chunk * kCols + q * kPer, sizeof(bias));
    Out out[kPer];
    JAX_SM100_FP8_UNROLL
    for (int i = 0; i < kPer; ++i) {
      const float z = acc[chunk * kCols + q * kPer + i] + bias[i];
      out[i] = static_cast<Out>(apply_activation<Act>(z));
    }
    std::memcpy(dbuf + epi_chunk_offset(row, q), out, 16);
  }
}

// ------------------------------------------------------------------------------------
// Warps 4..7: the FP8 bias/activation epilogue (thread = output row = TMEM lane).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, Activation Act>
JAX_SM100_ROLE void fp8_bias_epilogue_role(GemmStorage<Cfg, Ops>& s, const Fp8BiasParams<Ops>& p, uint32_t tmem_base) {
  using Barrier = typename Ops::Barrier;
  using Store = TileStore<Cfg, Ops, __nv_bfloat16>;
  static_assert(Cfg::kBlockN == Cfg::kEpilogueThreads, "one bias column per epilogue thread");
  pipeline::OutputTilePipeline<Cfg::kAccStages, Barrier> acc_pipe(s.acc_bars, tmem_base, Cfg::kBlockN, "partials");
  auto partials = acc_pipe.per_k();
  pipeline::InputTilePipeline<typename Cfg::Payload, Cfg::kStages, Barrier> input(s.input_bars, &s.tiles, "input");
  auto scales = input.consumer();
  WorkIterator<Cfg, Ops> work_items(s);
  const uint32_t row = Ops::thread_idx() - Cfg::kWarpEpilogue * 32;  // 0..127: output row, TMEM lane
  Store store(s, p, row);
  float* slice = fp8_bias_slice<Cfg, Ops>(s);

  for (int work = static_cast<int>(Ops::cluster_idx()); work >= 0; work = work_items.next(true)) {
    const TileCoord t = tile_coord<Cfg, Ops>(p, work);
    const int col = t.n_col + static_cast<int>(row);  // this thread's bias column
    const float bias_share = p.bias != nullptr && col < p.n ? p.bias[col] : 0.f;
    const float* b_scale_row = p.b_scale + static_cast<int64_t>(t.n_col / Cfg::kScaleBlock) * p.k_blocks;
    float acc[Cfg::kBlockN];
    fp8_promote_tile<Cfg, Ops>(acc, scales, partials, b_scale_row, p.k_blocks, row);
    slice[row] = bias_share;  // published by the first chunk's barrier
    JAX_SM100_FP8_UNROLL
    for (int chunk = 0; chunk < Store::kChunks; ++chunk) {
      store.chunk(chunk, t.n_col, t.m_row, 0, [&](uint8_t* dbuf, const uint8_t*) {
        fp8_fill_bias_chunk<Cfg, Store::kCols, Act>(acc, chunk, row, dbuf, slice);
      });
    }
  }
  store.finish();
}

// ------------------------------------------------------------------------------------
// The CTA: the FP8 GEMM's load and MMA roles, this epilogue.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, Activation Act>
JAX_SM100_ROLE void fp8_bias_gemm_cta(GemmStorage<Cfg, Ops>& s, const Fp8BiasParams<Ops>& p) {
  run_cta<Cfg, Ops, __nv_bfloat16>(
      s, p, [&] { fp8_load_role<Cfg, Ops>(s, p); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t) { fp8_mma_role<Cfg, Ops>(s, p, mma); },
      [&](uint32_t tmem_base) { fp8_bias_epilogue_role<Cfg, Ops, Act>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
