// ldmatrix (sm_75+): a warp loads 8x8 tiles of 16-bit elements from shared memory into
// the mma fragment layout, one instruction per four tiles (CCCL's cuda::ptx does not
// wrap it). The FP8 GEMM uses it for wgmma's A-from-registers form: a tile row of 8
// b16 is 16 e4m3 bytes, and the four tiles of an x4 load are exactly one warp's
// m16 x k32 fragment.
#pragma once

#include <stdint.h>

namespace jax_sm100::ptx {

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8j .. 8j + 7 give the shared addresses
/// of tile j's rows (16 bytes each, 16-byte aligned); register j of lane l receives row
/// l / 4 of tile j, bytes 4 * (l % 4) .. + 3.
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#else
  (void)addr;
  r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/// Keeps the compiler from reusing a register a wgmma reads asynchronously (A from
/// registers) before the wgmma has been waited for.
__device__ __forceinline__ void fence_operand(uint32_t& r) {
  asm volatile("" : "+r"(r)::"memory");
}

}  // namespace jax_sm100::ptx
