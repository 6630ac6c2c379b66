// HostBarrier: a CPU (std::atomic) model of the mbarrier, so the very same pipeline
// templates run in host threads and the protocol can be tested (and run under TSan).
//
// Barrier concept (what the pipeline templates call; DeviceBarrier and HostBarrier
// both provide it):
//   init(arrive_count)          arm: a phase completes after arrive_count arrivals
//                               and with the transaction count back at 0
//   static fence_init()         make init visible (device: fence.mbarrier_init)
//   arrive() / arrive(count)    arrivals (release)
//   arrive_expect_tx(bytes)     tx += bytes, then one arrival
//   expect_tx(bytes)            tx += bytes
//   try_wait(phase) -> bool     has the phase with parity `phase` completed? (acquire;
//                               the device's may first suspend the thread a while)
//   test_wait(phase) -> bool    the same, answered at once (the pipelines' polls)
//   wait(phase, site)           block until it has (bounded in debug builds)
//   complete_tx(bytes)          [host only] tx -= bytes: stands in for the TMA engine
//   arrive_cluster(rank), ptr() [device only] remote arrive; raw mbarrier pointer
//
// Semantics copied from PTX: parity waiting (the producer's first wait on an empty
// barrier with parity 1 passes at once, since "the phase before phase 0" counts as
// complete), the transaction count may go negative transiently, and a phase completes
// in whichever operation brings both pending arrivals and tx to zero. Over-arrival
// (more arrivals than armed in one phase) is undefined on the GPU; here it throws.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "jax_sm100/pipeline/config.h"

// The public methods are JAX_SM100_HD so that pipeline templates (host-device) can call
// them without nvcc warnings when a .cu file uses HostBarrier in host code; their
// bodies exist only in host compilation, and device code that touches one traps.
#if defined(__CUDA_ARCH__)
#define JAX_SM100_HOST_BODY(...) __trap()
#else
#define JAX_SM100_HOST_BODY(...) __VA_ARGS__
#endif

namespace jax_sm100::pipeline {

/// std::atomic model of one mbarrier. State word: bits 0..23 pending arrivals,
/// 24..47 signed tx count, 48..63 completed-phase counter (parity = bit 48).
class HostBarrier {
 public:
  HostBarrier() = default;
  HostBarrier(const HostBarrier&) = delete;
  HostBarrier& operator=(const HostBarrier&) = delete;

  /// Arm with the number of arrivals that complete a phase (one thread, before sharing).
  JAX_SM100_HD void init(uint32_t arrive_count) { JAX_SM100_HOST_BODY(init_host(arrive_count)); }

  /// Host twin of fence.mbarrier_init. Nothing to do: init() stores with release, and
  /// the threads that use the barriers are started (or synchronised) after it.
  static JAX_SM100_HD void fence_init() {}

  /// One arrival (release).
  JAX_SM100_HD void arrive() { JAX_SM100_HOST_BODY(update(1, 0, "arrive")); }
  /// `count` arrivals.
  JAX_SM100_HD void arrive(uint32_t count) { JAX_SM100_HOST_BODY(update(count, 0, "arrive(count)")); }
  /// tx += bytes, then one arrival, atomically.
  JAX_SM100_HD void arrive_expect_tx(uint32_t bytes) {
    JAX_SM100_HOST_BODY(update(1, static_cast<int32_t>(bytes), "arrive_expect_tx"));
  }
  /// tx += bytes.
  JAX_SM100_HD void expect_tx(uint32_t bytes) {
    JAX_SM100_HOST_BODY(update(0, static_cast<int32_t>(bytes), "expect_tx"));
  }
  /// tx -= bytes: what the TMA engine does when `bytes` of a load have landed.
  JAX_SM100_HD void complete_tx(uint32_t bytes) {
    JAX_SM100_HOST_BODY(update(0, -static_cast<int32_t>(bytes), "complete_tx"));
  }

  /// Has the phase with parity `phase` completed? (acquire)
  JAX_SM100_HD bool try_wait(uint32_t phase) const {
#if defined(__CUDA_ARCH__)
    __trap();
    return false;
#else
    return ((state_.load(std::memory_order_acquire) >> 48) & 1u) != (phase & 1u);
#endif
  }
  /// The same answer (the host model never suspends in try_wait).
  JAX_SM100_HD bool test_wait(uint32_t phase) const { return try_wait(phase); }

  /// Block until the phase with parity `phase` has completed. Spins, then yields.
  /// Debug builds: past debug::host_wait_timeout_ms() throws PipelineError naming `site`.
  JAX_SM100_HD void wait(uint32_t phase, const WaitSite& site = WaitSite{}) const {
    JAX_SM100_HOST_BODY(wait_host(phase, site));
  }

  /// Number of completed phases (mod 2^16), for tests.
  uint32_t completed_phases() const {
    return static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 48);
  }
  /// Arrivals still missing in the current phase, for tests.
  uint32_t pending_arrivals() const {
    return static_cast<uint32_t>(state_.load(std::memory_order_acquire) & 0xffffffu);
  }

 private:
  void init_host(uint32_t arrive_count) {
    if (arrive_count == 0 || arrive_count >= (1u << 24)) {
      throw PipelineError("HostBarrier::init: arrive count must be in [1, 2^24)");
    }
    expected_ = arrive_count;
    state_.store(pack(arrive_count, 0, 0), std::memory_order_release);
  }

  void wait_host(uint32_t phase, const WaitSite& site) const {
    if (try_wait(phase)) return;
#if defined(JAX_SM100_PIPELINE_DEBUG)
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::milliseconds(debug::host_wait_timeout_ms().load());
#else
    (void)site;
#endif
    for (uint64_t spin = 1;; ++spin) {
      if (try_wait(phase)) return;
      if (spin > 64) std::this_thread::yield();
#if defined(JAX_SM100_PIPELINE_DEBUG)
      if ((spin & 255) == 0 && std::chrono::steady_clock::now() - start > limit) {
        debug::report_hang(site, phase);
      }
#endif
    }
  }

  static uint64_t pack(uint32_t pending, int32_t tx, uint32_t phases) {
    return (uint64_t(pending) & 0xffffffu) | ((uint64_t(uint32_t(tx)) & 0xffffffu) << 24) |
           (uint64_t(phases & 0xffffu) << 48);
  }
  static int32_t tx_of(uint64_t s) {
    int32_t v = static_cast<int32_t>((s >> 24) & 0xffffffu);
    return (v & 0x800000) ? v - 0x1000000 : v;  // sign-extend 24 bits
  }

  // One CAS loop per operation: every update is an acq_rel RMW on the same word, so a
  // waiter that observes a completed phase happens-after every arrival of that phase.
  void update(uint32_t arrivals, int32_t tx_delta, const char* what) {
    uint64_t old = state_.load(std::memory_order_relaxed);
    for (;;) {
      uint32_t pending = static_cast<uint32_t>(old & 0xffffffu);
      int32_t tx = tx_of(old);
      uint32_t phases = static_cast<uint32_t>(old >> 48);
      if (arrivals > pending) {
        throw PipelineError(std::string("HostBarrier::") + what +
                            ": more arrivals than the barrier was armed for in this phase");
      }
      pending -= arrivals;
      tx += tx_delta;
      if (tx <= -(1 << 23) || tx >= (1 << 23)) {
        throw PipelineError(std::string("HostBarrier::") + what + ": tx count out of range");
      }
      if (pending == 0 && tx == 0) {  // phase completes and the barrier re-arms
        pending = expected_;
        phases += 1;
      }
      const uint64_t next = pack(pending, tx, phases);
      if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
  }

  std::atomic<uint64_t> state_{0};
  uint32_t expected_ = 1;
};

}  // namespace jax_sm100::pipeline

#undef JAX_SM100_HOST_BODY
