// ld.shared from a 32-bit shared-window address (CCCL's cuda::ptx wraps ld for the
// global space only). Lets a kernel keep shared addresses as 32-bit integers computed
// once, instead of generic pointers the compiler re-derives (S2UR of the CTA's window)
// inside a hot loop.
#pragma once

#include <stdint.h>

namespace jax_sm100::ptx {

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

/// ldmatrix .x4 (b16): four 8 x 16-byte sub-tiles; lane l gives the row address of
/// sub-tile l / 8, row l % 8, and receives in r[i] the 4 bytes (l % 4) of row l / 4 of
/// sub-tile i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

}  // namespace jax_sm100::ptx
