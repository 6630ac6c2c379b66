// Thin device wrappers for the mbarrier PTX family (sm_90+).
//
// An mbarrier is a 64-bit object in shared memory with an expected arrival count,
// a pending arrival count, a transaction (tx) byte count and a phase bit. A phase
// completes when every expected thread has arrived and the tx count is back at 0;
// the barrier then flips its phase and re-arms. Waiting is by phase *parity*:
// try_wait_parity(bar, p) is true once the phase with parity p has completed.
//
// Wrappers go through CCCL's cuda::ptx where it has the instruction; the remote
// (cluster) arrive uses inline asm because it needs `mapa` on a 32-bit
// shared::cluster address.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda/ptx>

namespace jax_sm100::ptx {

/// 32-bit shared-state-space address of a generic pointer into this CTA's shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// mbarrier.init: arm `bar` to complete a phase after `arrive_count` arrivals.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrive_count) {
  cuda::ptx::mbarrier_init(bar, arrive_count);
}

/// Make barrier initialisation visible to the async proxy (TMA) and to the cluster.
/// Call once after the init of all barriers, before any other thread uses them.
__device__ __forceinline__ void fence_barrier_init() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

/// mbarrier.arrive (release, CTA scope): one arrival.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  (void)cuda::ptx::mbarrier_arrive(bar);
}

/// mbarrier.arrive with a count: `count` arrivals from one thread.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar, uint32_t count) {
  (void)cuda::ptx::mbarrier_arrive(bar, count);
}

/// mbarrier.arrive.expect_tx: raise the tx count by `bytes`, then arrive once.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, bar, bytes);
}

/// mbarrier.expect_tx: raise the tx count by `bytes` without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_expect_tx(cuda::ptx::sem_relaxed, cuda::ptx::scope_cta,
                                cuda::ptx::space_shared, bar, bytes);
}

/// mbarrier.try_wait.parity: true once the phase with parity `parity` has completed.
/// The hardware may suspend the thread for a system-dependent time before returning false.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  return cuda::ptx::mbarrier_try_wait_parity(bar, parity);
}

/// mbarrier.test_wait.parity: true if the phase with parity `parity` has completed, at
/// once (never suspends). For polls whose answer only picks a path, where try_wait's
/// suspension would be a wait in the wrong place.
__device__ __forceinline__ bool mbarrier_test_wait_parity(uint64_t* bar, uint32_t parity) {
  return cuda::ptx::mbarrier_test_wait_parity(bar, parity);
}

/// try_wait.parity with a suspend-time hint (nanoseconds the thread may sleep in the wait).
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity,
                                                         uint32_t suspend_time_hint_ns) {
  return cuda::ptx::mbarrier_try_wait_parity(bar, parity, suspend_time_hint_ns);
}

/// Spin until the phase with parity `parity` has completed (unbounded).
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

/// Arrive on the barrier at the same shared-memory offset in cluster CTA `cta_rank`
/// (mapa + mbarrier.arrive.shared::cluster, i.e. the default .release.cta semantics, as
/// CUTLASS's ClusterBarrier::arrive). `bar` is this CTA's copy.
/// Why not .release.cluster: a consumer frees a stage only after the reads it signals
/// (wgmma / ld.shared) have retired, so no cluster-wide release fence is needed, and on
/// an H200 the .release.cluster form cost the 2-CTA GEMM ~30% (docs/sm90_gemm.md, v4).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smem_addr(bar)), "r"(cta_rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];"
               :
               : "r"(remote)
               : "memory");
}

}  // namespace jax_sm100::ptx
#endif  // __CUDACC__
