// The column sums of the dact epilogue (GemmDactConfig in gemm.cuh: the bias gradient,
// GemmParams::dbias) from a warp's fp32 accumulator fragments: per thread and 64-column
// chunk 16 partial sums laid out as the wgmma fragments are, value 2 j + e of lane l
// being column 8 j + 2 (l % 4) + e summed over the thread's own rows.
#pragma once

#include <cuda_runtime.h>

namespace jax_sm100::kernels::sm90 {

/// The dact epilogue's bias gradient (GemmDactConfig, GemmParams::dbias), in three steps
/// per warpgroup tile:
///   1. reduce_column_sums: `s[2 j + e]` holds this thread's sum over its (live) fragment
///      rows of column 8 j + 2 (lane % 4) + e of one epilogue chunk; the 8 lanes of each
///      lane % 4 class hold the same columns for other rows. Three halving steps across
///      lane bits 16, 8, 4 (the lane with the bit clear keeps the lower half of its window
///      and sends the upper, its partner the other way, each adding what it receives)
///      leave s[0..1] with the warp's 16-row sums of columns 8 j + 2 (lane % 4) + {0, 1},
///      j = (lane >> 2) & 7: 14 shuffles where a full reduction of all 16 takes 48;
///   2. stage_column_sums: every lane writes its two to the warp's row of the warpgroup's
///      (4, kWgTileN) f32 shared-memory area (each (warp, column) written once per tile);
///   3. flush_column_sums, after a warpgroup barrier: each thread adds the 4 warps' sums
///      of its columns and sends one f32 reduction (red.global.add) per column to dbias,
///      columns past n skipped: one global atomic per column per 64-row warpgroup tile
///      (a quarter of one per warp; measured 20 us of a 405 us 8192x4096x4096 launch with
///      one per warp).
template <int kVals>
__device__ __forceinline__ void reduce_column_sums(float (&s)[kVals], int lane) {
  static_assert(kVals == 16, "16 values per thread and chunk: 8 fragments of 2 columns");
#pragma unroll
  for (int step = 0; step < 3; ++step) {
    const int h = 8 >> step, bit = 2 * h;
    const bool upper = (lane & bit) != 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // constant bounds: both loops unroll, s stays in registers
      if (i >= h) continue;
      const float send = upper ? s[i] : s[i + h];
      const float keep = upper ? s[i + h] : s[i];
      s[i] = keep + __shfl_xor_sync(0xffffffffu, send, bit);
    }
  }
}

/// Step 2: `part_warp` is the warp's (kWgTileN,) row, `col` the chunk's first column in
/// the warpgroup tile.
template <int kVals>
__device__ __forceinline__ void stage_column_sums(float* part_warp, const float (&s)[kVals],
                                                  int col, int lane) {
  const int c = col + 8 * ((lane >> 2) & 7) + 2 * (lane % 4);
  *reinterpret_cast<float2*>(part_warp + c) = make_float2(s[0], s[1]);
}

/// Step 3 for the warpgroup tile at column col0 (`part`: the (4, kWgTileN) area).
template <int kWgTileN>
__device__ __forceinline__ void flush_column_sums(const float* part, float* dbias, int col0,
                                                  int n, int tid_wg) {
#pragma unroll
  for (int c = tid_wg; c < kWgTileN; c += 128) {
    const float sum = part[c] + part[kWgTileN + c] + part[2 * kWgTileN + c] + part[3 * kWgTileN + c];
    if (col0 + c < n) atomicAdd(dbias + col0 + c, sum);
  }
}

}  // namespace jax_sm100::kernels::sm90
