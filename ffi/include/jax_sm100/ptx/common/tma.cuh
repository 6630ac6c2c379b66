// Thin device wrappers for the Tensor Memory Accelerator (cp.async.bulk.tensor) and
// the plain bulk copy, sm_90+. Loads land in this CTA's shared memory and complete
// transactions (bytes) on an mbarrier; stores are tracked with bulk groups.
//
// Tensor maps are built on the host (cuTensorMapEncodeTiled) and passed to kernels as
// `const __grid_constant__ CUtensorMap` parameters; these wrappers take a pointer to
// that parameter. Coordinates are in elements, innermost dimension first.
// Shared-memory destinations/sources must be 128-byte aligned (1024 for 128B swizzle).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda.h>  // CUtensorMap
#include <cuda/ptx>

namespace jax_sm100::ptx {

/// 2D tile load global -> shared; completes `box bytes` of tx on `bar`.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1) {
  const int32_t coords[2] = {c0, c1};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

/// 3D tile load global -> shared; completes tx on `bar`.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

/// 2D tile load multicast to every CTA in `cta_mask` (same smem offset and barrier offset
/// in each destination CTA; each destination barrier gets the tx bytes). sm_90a.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map,
                                                      uint64_t* bar, uint16_t cta_mask, int32_t c0,
                                                      int32_t c1) {
  const int32_t coords[2] = {c0, c1};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar, cta_mask);
}

/// 3D tile load multicast to every CTA in `cta_mask`. sm_90a.
__device__ __forceinline__ void tma_load_3d_multicast(void* smem_dst, const CUtensorMap* map,
                                                      uint64_t* bar, uint16_t cta_mask, int32_t c0,
                                                      int32_t c1, int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar, cta_mask);
}

/// 2D tile store shared -> global (out-of-bounds parts of the box are not written).
/// Issue fence_proxy_async_shared_cta() in every thread that wrote the tile, then a
/// barrier, before one thread calls this.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src, int32_t c0,
                                             int32_t c1) {
  const int32_t coords[2] = {c0, c1};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords,
                                  smem_src);
}

/// 3D tile store shared -> global.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* smem_src, int32_t c0,
                                             int32_t c1, int32_t c2) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords,
                                  smem_src);
}

/// Close the current bulk group of this thread's outstanding stores.
__device__ __forceinline__ void tma_store_commit_group() { cuda::ptx::cp_async_bulk_commit_group(); }

/// Wait until at most N bulk groups still *read* shared memory (the smem source may be
/// reused; global writes may still be in flight).
template <int N>
__device__ __forceinline__ void tma_store_wait_group_read() {
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<N>{});
}

/// Wait until at most N bulk groups are outstanding (global writes done).
template <int N>
__device__ __forceinline__ void tma_store_wait_group() {
  cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<N>{});
}

/// Prefetch a tensor map into the descriptor cache (one thread, early in the kernel).
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" : : "l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/// Plain bulk copy global -> shared of `bytes` (multiple of 16, both addresses 16-byte
/// aligned) completing tx on `bar`; no tensor map needed.
__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, uint32_t bytes,
                                          uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, gmem_src,
                           bytes, bar);
}

}  // namespace jax_sm100::ptx
#endif  // __CUDACC__
