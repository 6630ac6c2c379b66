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

}  // namespace jax_sm100::ptx
