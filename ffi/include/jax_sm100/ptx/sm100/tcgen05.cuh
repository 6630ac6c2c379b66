// Thin device wrappers for tcgen05 (Blackwell sm_100a tensor memory and UMMA commit).
//
// COMPILE-ONLY in this project: no sm_100 machine is available, so nothing here has
// been run. Bodies exist only when compiling for __CUDA_ARCH__ >= 1000; on other
// architectures they trap so that a misuse fails loudly instead of silently.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda/ptx>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define JAX_SM100_TCGEN05_BODY(...) __VA_ARGS__
#else
#define JAX_SM100_TCGEN05_BODY(...) __trap()
#endif

namespace jax_sm100::ptx {

/// tcgen05.alloc.cta_group::1: the whole warp allocates `ncols` TMEM columns (power of
/// two, 32..512); the TMEM address is written to `*dst_smem` (shared memory).
__device__ __forceinline__ void tmem_alloc(uint32_t* dst_smem, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_alloc(cuda::ptx::cta_group_1, dst_smem, ncols));
}

/// tcgen05.alloc.cta_group::2 (pair of CTAs allocates together).
__device__ __forceinline__ void tmem_alloc_2sm(uint32_t* dst_smem, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_alloc(cuda::ptx::cta_group_2, dst_smem, ncols));
}

/// tcgen05.dealloc.cta_group::1: the warp that allocated frees `ncols` columns at `taddr`.
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_dealloc(cuda::ptx::cta_group_1, taddr, ncols));
}

/// tcgen05.relinquish_alloc_permit.cta_group::1: this CTA will allocate no more TMEM.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_relinquish_alloc_permit(cuda::ptx::cta_group_1));
}

/// tcgen05.commit.cta_group::1 ... mbarrier::arrive::one: arrive once on `bar` when all
/// previously issued UMMA of this thread have completed.
__device__ __forceinline__ void umma_commit(uint64_t* bar) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit(cuda::ptx::cta_group_1, bar));
}

/// tcgen05.commit ... multicast::cluster: arrive on `bar` in every CTA of `cta_mask`.
__device__ __forceinline__ void umma_commit_multicast(uint64_t* bar, uint16_t cta_mask) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit_multicast(cuda::ptx::cta_group_1, bar, cta_mask));
}

/// tcgen05.commit.cta_group::2 multicast (2-SM UMMA: arrive in the CTAs of `cta_mask`).
__device__ __forceinline__ void umma_commit_2sm_multicast(uint64_t* bar, uint16_t cta_mask) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit_multicast(cuda::ptx::cta_group_2, bar, cta_mask));
}

/// tcgen05.fence::before_thread_sync: order prior tcgen05 ops before a thread sync.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_fence_before_thread_sync());
}

/// tcgen05.fence::after_thread_sync: order later tcgen05 ops after a thread sync.
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_fence_after_thread_sync());
}

/// tcgen05.wait::ld: wait for this thread's outstanding tcgen05.ld.
__device__ __forceinline__ void tcgen05_wait_ld() { JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_wait_ld()); }

/// tcgen05.wait::st: wait for this thread's outstanding tcgen05.st.
__device__ __forceinline__ void tcgen05_wait_st() { JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_wait_st()); }

}  // namespace jax_sm100::ptx

#undef JAX_SM100_TCGEN05_BODY
#endif  // __CUDACC__
