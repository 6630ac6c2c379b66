// Named barriers (bar.sync with an id and a thread count): the one helper every kernel
// uses to synchronise a subset of its warps. Id 0 is __syncthreads'.
#pragma once

#include <cstdint>

namespace jax_sm100::kernels {

/// Blocks until `threads` threads (a multiple of 32) have arrived at barrier `id` (1..15).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace jax_sm100::kernels
