// Tile payloads: the staged shared-memory tile storage an InputTilePipeline hands from
// the TMA load warp to the MMA warp(s), one array of tiles per operand with a stage index
// (StandardTilePayload: A, B; BlockwiseFP8TilePayload: A, B, A-scales;
// BlockScaledTilePayload: A, B, SFA, SFB). Each payload publishes kStages,
// bytes_per_stage (what one stage's loads bring: the full barrier's transaction count)
// and the per-stage tile accessors a_tile()/b_tile()/sfa_tile()/sfb_tile().
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::pipeline {

namespace detail {
constexpr uint32_t round_up(uint32_t x, uint32_t m) { return (x + m - 1) / m * m; }
}  // namespace detail

// ------------------------------------------------------------------------------------
// Payloads: staged tile storage, placed in shared memory by the kernel (e.g. at the
// start of dynamic shared memory, which must then be aligned to Align).
// ------------------------------------------------------------------------------------

/// A and B tiles of a standard matmul. A_ELEMS / B_ELEMS elements per stage
/// (e.g. BLOCK_M * BLOCK_K). Align: per-stage alignment of each tile (1024 for
/// 128-byte swizzled TMA/WGMMA tiles; the byte size of a tile must be a multiple).
template <class TA, class TB, int A_ELEMS, int B_ELEMS, int Stages, int Align = 1024>
struct StandardTilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);  ///< one A tile
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);  ///< one B tile
  /// Transaction bytes of one stage (what expect_bytes() arms the full barrier with).
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes;
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0,
                "each tile must be a multiple of the alignment so every stage stays aligned");

  alignas(Align) TA a[Stages][A_ELEMS];  // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];  // (STAGES, B_ELEMS)

  /// A tile of `stage`.
  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  /// B tile of `stage`.
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
};

/// A, B and per-row A-scales of a DeepSeek-style blockwise FP8 matmul (B scales are
/// per 128x128 block and read directly, not staged). Scale rows are padded to
/// ScaleAlign bytes per stage; bytes_per_stage counts only the SFA_ELEMS loaded.
template <class TA, class TB, class TS, int A_ELEMS, int B_ELEMS, int SFA_ELEMS, int Stages,
          int Align = 1024, int ScaleAlign = 128>
struct BlockwiseFP8TilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);
  static constexpr uint32_t sfa_bytes = SFA_ELEMS * sizeof(TS);
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes + sfa_bytes;
  static constexpr uint32_t sfa_stride = detail::round_up(sfa_bytes, ScaleAlign) / sizeof(TS);
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0, "tile size vs alignment");
  static_assert(sfa_bytes % 16 == 0, "bulk copies move multiples of 16 bytes");

  alignas(Align) TA a[Stages][A_ELEMS];            // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];            // (STAGES, B_ELEMS)
  alignas(ScaleAlign) TS sfa[Stages][sfa_stride];  // (STAGES, SFA_ELEMS padded)

  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
  /// A-scales of `stage` (SFA_ELEMS valid entries).
  JAX_SM100_HD TS* sfa_tile(uint32_t stage) { return sfa[stage]; }
};

/// A, B and both scale-factor tiles of a block-scaled (MX / NVFP4-style) matmul.
template <class TA, class TB, class TSF, int A_ELEMS, int B_ELEMS, int SFA_ELEMS, int SFB_ELEMS,
          int Stages, int Align = 1024, int ScaleAlign = 128>
struct BlockScaledTilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);
  static constexpr uint32_t sfa_bytes = SFA_ELEMS * sizeof(TSF);
  static constexpr uint32_t sfb_bytes = SFB_ELEMS * sizeof(TSF);
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes + sfa_bytes + sfb_bytes;
  static constexpr uint32_t sfa_stride = detail::round_up(sfa_bytes, ScaleAlign) / sizeof(TSF);
  static constexpr uint32_t sfb_stride = detail::round_up(sfb_bytes, ScaleAlign) / sizeof(TSF);
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0, "tile size vs alignment");
  static_assert(sfa_bytes % 16 == 0 && sfb_bytes % 16 == 0, "bulk copies move multiples of 16 bytes");

  alignas(Align) TA a[Stages][A_ELEMS];             // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];             // (STAGES, B_ELEMS)
  alignas(ScaleAlign) TSF sfa[Stages][sfa_stride];  // (STAGES, SFA_ELEMS padded)
  alignas(ScaleAlign) TSF sfb[Stages][sfb_stride];  // (STAGES, SFB_ELEMS padded)

  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
  JAX_SM100_HD TSF* sfa_tile(uint32_t stage) { return sfa[stage]; }
  JAX_SM100_HD TSF* sfb_tile(uint32_t stage) { return sfb[stage]; }
};

}  // namespace jax_sm100::pipeline
