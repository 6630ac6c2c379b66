// ld.shared (and ld.shared::cluster) from a 32-bit shared-window address (CCCL's cuda::ptx wraps ld for the
// global space only). Lets a kernel keep shared addresses as 32-bit integers computed
// once, instead of generic pointers the compiler re-derives (S2UR of the CTA's window)
// inside a hot loop.
#pragma once

#include <stdint.h>
#include <vector_types.h>

namespace jax_sm100::ptx {

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

/// Two floats at this CTA's shared address `addr` as seen in cluster CTA `cta_rank`
/// (mapa + ld.shared::cluster): distributed shared memory. Volatile so that it stays
/// after the cluster barrier that publishes the peer's data; no memory clobber, so that
/// several of these issue back to back.
__device__ __forceinline__ float2 ld_shared_cluster_f32x2(uint32_t addr, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(cta_rank));
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(remote));
  return v;
}

}  // namespace jax_sm100::ptx
