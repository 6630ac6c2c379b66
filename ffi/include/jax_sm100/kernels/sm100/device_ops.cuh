// DeviceOps: the sm_100a side of the kernels' one seam (ops_concept.h). Every member is
// a thin call into the PTX wrappers (ptx/common, ptx/sm100); nothing here decides
// anything. Compiled for every CUDA arch in the build, but only the sm_100a code of the
// kernels that use it is ever launched (other archs get the wrappers' traps).
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>

#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/pipeline/device_barrier.h"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm100/clc.cuh"
#include "jax_sm100/ptx/sm100/tcgen05.cuh"

namespace jax_sm100::kernels::sm100 {

struct DeviceOps {
  using Barrier = pipeline::DeviceBarrier;
  using TensorMap = CUtensorMap;
  using ClcResponse = ptx::ClcResponse;

  // Identity
  static __device__ __forceinline__ uint32_t thread_idx() { return threadIdx.x; }
  static __device__ __forceinline__ uint32_t cta_rank() { return ptx::block_rank_in_cluster(); }
  static __device__ __forceinline__ uint32_t cluster_idx() {
    return blockIdx.x / cuda::ptx::get_sreg_cluster_nctarank();
  }
  static __device__ __forceinline__ bool elect_one() { return ptx::elect_one_sync(); }

  // Synchronisation
  static __device__ __forceinline__ void sync_cta() { __syncthreads(); }
  static __device__ __forceinline__ void cluster_sync() { ptx::cluster_sync(); }
  static __device__ __forceinline__ void named_sync(uint32_t id, uint32_t nthreads) {
    named_barrier_sync(id, nthreads);
  }
  static __device__ __forceinline__ void sync_warp() { __syncwarp(); }
  static __device__ __forceinline__ void arrive_remote(Barrier* b, uint32_t rank) { b->arrive_cluster(rank); }

  // Across lanes and CTAs (the dact epilogue's column sums)
  static __device__ __forceinline__ float shfl_xor(float v, uint32_t lane_mask) {
    return __shfl_xor_sync(0xffffffffu, v, static_cast<int>(lane_mask));
  }
  static __device__ __forceinline__ void red_add_f32(float* gmem, float v) { atomicAdd(gmem, v); }
  // TMA
  static __device__ __forceinline__ void prefetch_map(const TensorMap* map) { ptx::tma_prefetch_descriptor(map); }
  static __device__ __forceinline__ void tma_load(void* smem, const TensorMap* map, Barrier* bar, int c0, int c1,
                                                  int c2) {
    ptx::tma_load_3d(smem, map, bar->ptr(), c0, c1, c2);
  }
  static __device__ __forceinline__ void tma_load_pair(void* smem, const TensorMap* map, Barrier* bar, int c0,
                                                       int c1, int c2) {
    ptx::tma_load_3d_pair(smem, map, bar->ptr(), c0, c1, c2);
  }
  static __device__ __forceinline__ void tma_store(const TensorMap* map, const void* smem, int c0, int c1, int c2) {
    ptx::tma_store_3d(map, smem, c0, c1, c2);
  }
  static __device__ __forceinline__ void tma_store_commit() { ptx::tma_store_commit_group(); }
  static __device__ __forceinline__ void tma_store_wait_read_1() { ptx::tma_store_wait_group_read<1>(); }
  static __device__ __forceinline__ void tma_store_wait_all() { ptx::tma_store_wait_group<0>(); }
  static __device__ __forceinline__ void fence_async_shared() { ptx::fence_proxy_async_shared_cta(); }
  static __device__ __forceinline__ uint32_t smem_u32(const void* p) { return ptx::smem_addr(p); }

  // TMEM
  static __device__ __forceinline__ void tmem_alloc(uint32_t* dst, uint32_t ncols, bool pair) {
    if (pair) ptx::tmem_alloc_2sm(dst, ncols);
    else ptx::tmem_alloc(dst, ncols);
  }
  static __device__ __forceinline__ void tmem_relinquish(bool pair) {
    if (pair) ptx::tmem_relinquish_alloc_permit_2sm();
    else ptx::tmem_relinquish_alloc_permit();
  }
  static __device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols, bool pair) {
    if (pair) ptx::tmem_dealloc_2sm(taddr, ncols);
    else ptx::tmem_dealloc(taddr, ncols);
  }
  static __device__ __forceinline__ void tmem_load_32x32b_x16(uint32_t taddr, uint32_t (&v)[16]) {
    ptx::tmem_load_32x32b_x16(taddr, v);
  }
  static __device__ __forceinline__ void tmem_wait_ld() { ptx::tcgen05_wait_ld(); }
  static __device__ __forceinline__ void tcgen05_fence_before() { ptx::tcgen05_fence_before_thread_sync(); }
  static __device__ __forceinline__ void tcgen05_fence_after() { ptx::tcgen05_fence_after_thread_sync(); }

  // UMMA
  static __device__ __forceinline__ void umma_f16(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b,
                                                  uint32_t idesc, bool accumulate, bool pair) {
    if (pair) ptx::umma_f16_pair(tmem_d, desc_a, desc_b, idesc, accumulate);
    else ptx::umma_f16(tmem_d, desc_a, desc_b, idesc, accumulate);
  }
  // [blockwise FP8 GEMM] kind::f8f6f4, cta_group::1.
  static __device__ __forceinline__ void umma_f8f6f4(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b,
                                                     uint32_t idesc, bool accumulate) {
    ptx::umma_f8f6f4(tmem_d, desc_a, desc_b, idesc, accumulate);
  }
  static __device__ __forceinline__ void umma_commit(Barrier* bar) { ptx::umma_commit(bar->ptr()); }
  static __device__ __forceinline__ void umma_commit_pair(Barrier* bar, uint16_t cta_mask) {
    ptx::umma_commit_2sm_multicast(bar->ptr(), cta_mask);
  }

  // Cluster launch control
  static __device__ __forceinline__ void clc_try_cancel(ClcResponse* resp, Barrier* bar, bool multicast) {
    if (multicast) ptx::clc_try_cancel_multicast(resp, bar->ptr());
    else ptx::clc_try_cancel(resp, bar->ptr());
  }
  static __device__ __forceinline__ bool clc_decode(const ClcResponse& resp, uint32_t* first_cta_x) {
    if (!ptx::clc_query_is_canceled(resp)) return false;
    *first_cta_x = ptx::clc_query_first_ctaid(resp).x;
    return true;
  }
};

}  // namespace jax_sm100::kernels::sm100
