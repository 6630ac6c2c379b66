// Warp-level helpers: elect.sync (sm_90+), lane and warp indices.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
namespace jax_sm100::ptx {

/// elect.sync over the full warp: true in exactly one active lane. All 32 lanes must
/// execute it convergently (like any .sync.aligned warp instruction).
__device__ __forceinline__ bool elect_one_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t pred = 0;
  asm volatile(
      "{\n\t"
      ".reg .b32 %%rx;\n\t"
      ".reg .pred %%px;\n\t"
      "elect.sync %%rx|%%px, %1;\n\t"
      "@%%px mov.s32 %0, 1;\n\t"
      "}"
      : "+r"(pred)
      : "r"(0xffffffffu));
  return pred != 0;
#else
  return (threadIdx.x % 32) == 0;
#endif
}

/// Lane index inside the warp (%laneid).
__device__ __forceinline__ uint32_t lane_id() {
  uint32_t lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/// Warp index inside the block, made warp-uniform with a shuffle so the compiler
/// knows role branches on it do not diverge inside a warp.
__device__ __forceinline__ uint32_t warp_idx_sync() {
  return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
}

}  // namespace jax_sm100::ptx
#endif  // __CUDACC__
