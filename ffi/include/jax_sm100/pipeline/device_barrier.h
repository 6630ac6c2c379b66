// DeviceBarrier: the shared-memory mbarrier as a pipeline Barrier (see host_barrier.h
// for the Barrier concept and its CPU twin).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"

#if defined(__CUDACC__)
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#else
#include <cstdlib>
#endif

namespace jax_sm100::pipeline {

/// One mbarrier (8 bytes) that must live in shared memory. Trivially constructible so an
/// array of them can be carved out of dynamic shared memory; init() arms it.
/// Host compilations see the type (pipelines default to it) but must not call it.
struct alignas(8) DeviceBarrier {
  uint64_t storage;  ///< the mbarrier object itself

  /// Arm with the number of arrivals that complete a phase. One thread; then fence_init().
  JAX_SM100_HD void init(uint32_t arrive_count) {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_init(&storage, arrive_count);
#else
    (void)arrive_count;
    std::abort();
#endif
  }

  /// Make the init of all barriers visible to other threads, the async proxy and the cluster.
  static JAX_SM100_HD void fence_init() {
#if defined(__CUDA_ARCH__)
    ptx::fence_barrier_init();
#else
    std::abort();
#endif
  }

  /// One arrival (release semantics, CTA scope).
  JAX_SM100_HD void arrive() {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_arrive(&storage);
#else
    std::abort();
#endif
  }

  /// `count` arrivals from this thread.
  JAX_SM100_HD void arrive(uint32_t count) {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_arrive(&storage, count);
#else
    (void)count;
    std::abort();
#endif
  }

  /// Expect `bytes` more transaction bytes (TMA completes them), then arrive once.
  JAX_SM100_HD void arrive_expect_tx(uint32_t bytes) {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_arrive_expect_tx(&storage, bytes);
#else
    (void)bytes;
    std::abort();
#endif
  }

  /// Expect `bytes` more transaction bytes without arriving.
  JAX_SM100_HD void expect_tx(uint32_t bytes) {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_expect_tx(&storage, bytes);
#else
    (void)bytes;
    std::abort();
#endif
  }

  /// Arrive on the barrier at this one's shared-memory offset in cluster CTA `cta_rank`.
  JAX_SM100_HD void arrive_cluster(uint32_t cta_rank) {
#if defined(__CUDA_ARCH__)
    ptx::mbarrier_arrive_cluster(&storage, cta_rank);
#else
    (void)cta_rank;
    std::abort();
#endif
  }

  /// True once the phase with parity `phase` has completed. May suspend the thread for a
  /// system-dependent time (microseconds) before answering false: the building block
  /// of wait(), not a poll.
  JAX_SM100_HD bool try_wait(uint32_t phase) {
#if defined(__CUDA_ARCH__)
    return ptx::mbarrier_try_wait_parity(&storage, phase);
#else
    (void)phase;
    std::abort();
#endif
  }

  /// Has the phase with parity `phase` completed? Answers at once (mbarrier.test_wait).
  JAX_SM100_HD bool test_wait(uint32_t phase) {
#if defined(__CUDA_ARCH__)
    return ptx::mbarrier_test_wait_parity(&storage, phase);
#else
    (void)phase;
    std::abort();
#endif
  }

  /// Wait for the phase with parity `phase` to complete. Unbounded in release builds;
  /// with JAX_SM100_PIPELINE_DEBUG bounded by JAX_SM100_PIPELINE_DEBUG_TIMEOUT_NS of
  /// %globaltimer, then printf naming `site` and trap.
  JAX_SM100_HD void wait(uint32_t phase, const WaitSite& site = WaitSite{}) {
#if defined(__CUDA_ARCH__)
#if defined(JAX_SM100_PIPELINE_DEBUG)
    if (try_wait(phase)) return;
    const uint64_t start = ptx::globaltimer_ns();
    while (!try_wait(phase)) {
      if (ptx::globaltimer_ns() - start > JAX_SM100_PIPELINE_DEBUG_TIMEOUT_NS) {
        debug::report_hang(site, phase);
      }
    }
#else
    (void)site;
    while (!try_wait(phase)) {
    }
#endif
#else
    (void)phase;
    (void)site;
    std::abort();
#endif
  }

  /// The raw mbarrier, for TMA loads and tcgen05.commit.
  JAX_SM100_HD uint64_t* ptr() { return &storage; }

#if defined(__CUDACC__)
  /// 32-bit shared-memory address of the mbarrier (for inline PTX).
  __device__ __forceinline__ uint32_t smem_addr() const { return ptx::smem_addr(&storage); }
#endif
};

static_assert(sizeof(DeviceBarrier) == 8, "an mbarrier is 8 bytes");

}  // namespace jax_sm100::pipeline
