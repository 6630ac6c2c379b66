// The sm_100a MXFP8 GEMM: d = (a * a_scale) @ (b * b_scale)^T with UE8M0 scales per 32
// elements of K, applied by the tensor core (tcgen05.mma.kind::mxf8f6f4.block_scale).
//
// The CTA of cta_skeleton.h with this kernel's load and MMA roles and the bf16 GEMM's
// epilogue (gemm_roles.h: TMEM -> registers -> TMA store), instantiated with an MX config
// (mx_gemm_config.h) and an Ops that has three more members (the MX part of
// ops_concept.h: bulk_load, tmem_cp_32x128b_warpx4, umma_mx). Everything else is the
// shared code: the shared-memory carve-up (GemmSharedStorage over the
// BlockScaledTilePayload), the CLC work walk (WorkIterator), the scheduler, the
// epilogue-load warp (no C: it only walks the work list), the load and MMA loops.
// Templates over Ops, so the CPU emulator runs this source.
//
//   warp 0  loads: per stage one TMA box of A (128 rows x 128 K) and of B (BlockN rows),
//           and one bulk copy per operand of the stage's scale chunks (the tiled layout
//           of mx_scale_layout.h), all completing on the stage's full barrier
//           (InputTilePipeline<BlockScaledTilePayload>: sfa_tile() / sfb_tile()).
//   warp 1  MMA (one thread): per stage, tcgen05.cp of the scale chunks into the stage's
//           own TMEM scale columns, then four block-scaled UMMA of K = 32 (scale IDs
//           0..3), then one commit that frees the stage (covering the copies and the
//           UMMA); one commit per tile to the epilogue.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/kernels/sm100/gemm_roles.h"
#include "jax_sm100/kernels/sm100/mx_gemm_config.h"
#include "jax_sm100/kernels/sm100/mx_gemm_plan.h"
#include "jax_sm100/ptx/sm100/tcgen05_block_scale.cuh"
#include "jax_sm100/ptx/sm100/umma_desc.h"

namespace jax_sm100::kernels::sm100 {

/// TMEM column offset (from the allocation's base) of stage `stage`'s B scales; A's
/// follow them (Cfg::kSfbCols further).
template <class Cfg>
JAX_SM100_ROLE uint32_t mx_sf_cols(uint32_t stage) {
  return Cfg::kAccCols + stage * Cfg::kSfStageCols;
}

// ------------------------------------------------------------------------------------
// Warp 0: TMA and bulk-copy producer.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void mx_load_role(GemmStorage<Cfg, Ops>& s, const MxGemmParams<Ops>& p) {
  using Barrier = typename Ops::Barrier;
  Ops::prefetch_map(&p.tma_a);
  Ops::prefetch_map(&p.tma_b);
  constexpr uint32_t kChunk = ptx::kMxScaleChunkBytes;

  // A + B + both scale tiles per stage: Cfg::kStageTxBytes.
  produce_stages<Cfg, Ops>(s, p, [&](auto& stage, const TileCoord& t, int kb) {
    const int64_t a_tile = t.m_row / 128, b_tile = t.n_col / 128;  // 128-row scale tiles
    Barrier* bar = stage.mbar();
    const int k0 = kb * Cfg::kBlockK;
    Ops::tma_load(stage.a_tile(), &p.tma_a, bar, k0, t.m_row, 0);  // 128 rows x 128 K
    Ops::tma_load(stage.b_tile(), &p.tma_b, bar, k0, t.n_col, 0);  // BlockN rows x 128 K
    Ops::bulk_load(stage.sfa_tile(), p.sfa + (int64_t(kb) * p.sfa_row_tiles + a_tile) * kChunk,
                   Cfg::kSfaBytes, bar);
    Ops::bulk_load(stage.sfb_tile(), p.sfb + (int64_t(kb) * p.sfb_row_tiles + b_tile) * kChunk,
                   Cfg::kSfbBytes, bar);
  });
}

// ------------------------------------------------------------------------------------
// Warp 1: MMA (one thread).
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops>
JAX_SM100_ROLE void mx_mma_role(GemmStorage<Cfg, Ops>& s, const MxGemmParams<Ops>& p,
                                MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t tmem_base) {
  const auto a_fmt = static_cast<ptx::MxFormat>(p.a_fmt), b_fmt = static_cast<ptx::MxFormat>(p.b_fmt);
  // Per UMMA (K = 32 fp8 = 32 bytes): both operands K-major, 128B-swizzled rows of one
  // stage's 128 K, 8-row atoms 1024 bytes apart (SBO); advance 32 bytes inside the row.
  constexpr uint32_t kStep = Cfg::kUmmaK;

  // The stage's commit (mma_per_tile) covers these copies and UMMA: tiles and scales are
  // free once they have read them.
  mma_per_tile<Cfg, Ops>(s, p, mma, [&](auto& tiles, uint32_t tmem_d, int kb) {
    // This stage's scales into its own TMEM columns (lane field 0): B's chunks, then A's.
    const uint32_t tsfb = tmem_base + mx_sf_cols<Cfg>(tiles.index());
    const uint32_t tsfa = tsfb + Cfg::kSfbCols;
    const uint32_t sfa_addr = Ops::smem_u32(tiles.sfa_tile()), sfb_addr = Ops::smem_u32(tiles.sfb_tile());
    for (int c = 0; c < Cfg::kSfaChunks; ++c)
      Ops::tmem_cp_32x128b_warpx4(tsfa + c * ptx::kMxScaleChunkCols,
                                  ptx::make_mx_scale_desc(sfa_addr + c * ptx::kMxScaleChunkBytes));
    for (int c = 0; c < Cfg::kSfbChunks; ++c)
      Ops::tmem_cp_32x128b_warpx4(tsfb + c * ptx::kMxScaleChunkCols,
                                  ptx::make_mx_scale_desc(sfb_addr + c * ptx::kMxScaleChunkBytes));
    const uint32_t a_addr = Ops::smem_u32(tiles.a_tile()), b_addr = Ops::smem_u32(tiles.b_tile());
    for (uint32_t kk = 0; kk < Cfg::kBlockK / Cfg::kUmmaK; ++kk) {
      const uint64_t da = ptx::make_umma_smem_desc(a_addr + kk * kStep, 16, 1024, ptx::UmmaSwizzle::k128B);
      const uint64_t db = ptx::make_umma_smem_desc(b_addr + kk * kStep, 16, 1024, ptx::UmmaSwizzle::k128B);
      // UMMA kk covers K block kk of the stage: scale byte kk of every scale column.
      const uint32_t idesc = ptx::make_umma_idesc_mx(a_fmt, b_fmt, Cfg::kUmmaM, Cfg::kUmmaN, kk, kk);
      Ops::umma_mx(tmem_d, da, db, idesc, tsfa, tsfb, kb > 0 || kk > 0);
    }
  });
}

// ------------------------------------------------------------------------------------
// The CTA (cta_skeleton.h) with the MX load and MMA roles and the bf16 GEMM's epilogue.
// ------------------------------------------------------------------------------------
template <class Cfg, class Ops, class Out>
JAX_SM100_ROLE void mx_gemm_cta(GemmStorage<Cfg, Ops>& s, const MxGemmParams<Ops>& p) {
  static_assert(!Cfg::kPair, "the MXFP8 kernel is cta_group::1 only");
  run_cta<Cfg, Ops, Out>(
      s, p, [&] { mx_load_role<Cfg, Ops>(s, p); },
      [&](MmaHandle<Cfg::kAccStages, Ops>& mma, uint32_t tmem_base) { mx_mma_role<Cfg, Ops>(s, p, mma, tmem_base); },
      [&](uint32_t tmem_base) { epilogue_role<Cfg, Ops, Out>(s, p, tmem_base); });
}

}  // namespace jax_sm100::kernels::sm100
