// Thin device wrappers for fences and cluster barriers (sm_90+), via CCCL cuda::ptx.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda/ptx>

namespace jax_sm100::ptx {

/// fence.proxy.async.shared::cta: order this thread's generic-proxy shared-memory
/// writes (st.shared, stmatrix) before later async-proxy reads (TMA store, wgmma/UMMA
/// operand reads). Each writing thread issues it before the barrier that hands off.
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
}

/// CUTLASS's name for the same fence (shared memory written, async proxy reads next).
__device__ __forceinline__ void fence_view_async_shared() { fence_proxy_async_shared_cta(); }

/// fence.proxy.async (all state spaces).
__device__ __forceinline__ void fence_proxy_async() { cuda::ptx::fence_proxy_async(); }

/// fence.acq_rel.cta.
__device__ __forceinline__ void fence_acq_rel_cta() {
  cuda::ptx::fence(cuda::ptx::sem_acq_rel, cuda::ptx::scope_cta);
}

/// fence.acq_rel.cluster.
__device__ __forceinline__ void fence_acq_rel_cluster() {
  cuda::ptx::fence(cuda::ptx::sem_acq_rel, cuda::ptx::scope_cluster);
}

/// barrier.cluster.arrive.relaxed: arrive without ordering memory (e.g. right after init,
/// when fence_barrier_init already ordered the barrier writes).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_relaxed);
}

/// barrier.cluster.arrive (release semantics).
__device__ __forceinline__ void cluster_arrive() { cuda::ptx::barrier_cluster_arrive(); }

/// barrier.cluster.wait (acquire semantics).
__device__ __forceinline__ void cluster_wait() { cuda::ptx::barrier_cluster_wait(); }

/// Full cluster barrier: every thread of every CTA of the cluster.
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

/// This CTA's rank inside its cluster (%cluster_ctarank).
__device__ __forceinline__ uint32_t block_rank_in_cluster() {
  return cuda::ptx::get_sreg_cluster_ctarank();
}

/// %globaltimer in nanoseconds (used by the pipeline's debug-mode bounded waits).
__device__ __forceinline__ uint64_t globaltimer_ns() { return cuda::ptx::get_sreg_globaltimer(); }

}  // namespace jax_sm100::ptx
#endif  // __CUDACC__
