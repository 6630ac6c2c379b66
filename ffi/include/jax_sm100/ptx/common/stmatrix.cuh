// stmatrix (sm_90+): a warp stores 8x8 tiles of 16-bit elements from the mma/wgmma
// accumulator fragment layout to shared memory, one instruction per four tiles (CCCL's
// cuda::ptx does not wrap it).
#pragma once

#include <stdint.h>

namespace jax_sm100::ptx {

/// stmatrix.sync.aligned.m8n8.x4.shared.b16: register j of every lane goes to tile j
/// (lane l holds row l / 4, elements 2 * (l % 4) and + 1, the lower column in the low
/// half); lanes 8j .. 8j + 7 give the shared addresses of tile j's rows (16 bytes each,
/// 16-byte aligned).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  (void)addr; (void)r0; (void)r1; (void)r2; (void)r3;
#endif
}

}  // namespace jax_sm100::ptx
