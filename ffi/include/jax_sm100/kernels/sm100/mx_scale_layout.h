// The tiled layout of the MXFP8 GEMM's scale factors in global memory: the one
// definition the sm100 launcher and kernel (mx_gemm_plan.h, mx_gemm_roles.h), the CPU
// handler (ffi/src/cpu/mxfp8_gemm_cpu.cc), the handlers' validation
// (ffi/src/common/mxfp8_problem.h) and the emulator's harness use; the Python layer
// (jax_sm100/_mxfp8.py, tile_scales) writes the same layout. CUDA-free.
//
// The tensor core reads scales from TMEM, where tcgen05.cp puts them from 512-byte
// shared-memory chunks (ptx/sm100/tcgen05_block_scale.cuh): one chunk per 128 rows x 4
// K blocks of 32 (128 elements of K), byte (r % 32) * 16 + (r / 32) * 4 + j for row r
// and K block j of the chunk. In global memory the chunks of an operand with R rows
// (M for a, N for b) and K elements are stored K-tile major,
//   chunk (kt, rt) at byte (kt * RT + rt) * 512,  RT = round_up(ceil(R / 128), 2),
// KT = ceil(K / 128) K tiles: as an array, (KT, RT, 32, 16) bytes. A stage of one CTA
// (one K tile) then finds its A chunk and its one or two B chunks (a 256-wide tile)
// contiguous: one bulk copy per operand. RT is even so that a 256-row chunk pair never
// runs past the array. Rows and K blocks beyond the operand are padding (any code but
// 0xFF, NaN: they meet zero elements).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/ptx/sm100/tcgen05_block_scale.cuh"

namespace jax_sm100::kernels::sm100 {

/// Elements per UE8M0 scale, and K elements per K tile of the layout.
constexpr int64_t kMxBlock = 32, kMxKTile = 128;

/// Row tiles (of 128 rows, rounded up to even) of an operand with `rows` rows.
JAX_SM100_HD constexpr int64_t mx_scale_row_tiles(int64_t rows) { return ((rows + 127) / 128 + 1) / 2 * 2; }
/// K tiles (of 128 elements) of an operand with `k` elements of K.
JAX_SM100_HD constexpr int64_t mx_scale_k_tiles(int64_t k) { return (k + kMxKTile - 1) / kMxKTile; }
/// Bytes of the tiled layout of an operand (rows, k).
JAX_SM100_HD constexpr int64_t mx_scale_tiled_bytes(int64_t rows, int64_t k) {
  return mx_scale_k_tiles(k) * mx_scale_row_tiles(rows) * int64_t{ptx::kMxScaleChunkBytes};
}
/// Byte offset of the scale of (row r, 32-element K block kb) in the tiled layout of an
/// operand whose layout has `row_tiles` = mx_scale_row_tiles(rows) row tiles.
JAX_SM100_HD constexpr int64_t mx_scale_tiled_offset(int64_t r, int64_t kb, int64_t row_tiles) {
  return ((kb / 4) * row_tiles + r / 128) * int64_t{ptx::kMxScaleChunkBytes} +
         ptx::mx_scale_chunk_offset(static_cast<uint32_t>(r % 128), static_cast<uint32_t>(kb % 4));
}

}  // namespace jax_sm100::kernels::sm100
