// Harness shared by the host protocol tests of the pipeline library (pipeline_host_*.cc):
// the CHECK macro and its failure count, run-size scaling, random delays, a spin barrier
// standing in for warp convergence, a thread runner that fails fast, the ring slot and
// the values producers write. The test functions of each case file are declared at the
// end; pipeline_host_test.cc runs them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jax_sm100/pipeline/all.h"

namespace jp = jax_sm100::pipeline;

// ---------------------------------------------------------------- tiny test harness
inline double g_scale = 1.0;
inline uint64_t g_seed = 12345;
inline std::atomic<int> g_check_failures{0};

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      if (g_check_failures.fetch_add(1) < 20) {                               \
        std::fprintf(stderr, "CHECK failed %s:%d: %s | ", __FILE__, __LINE__, \
                     #cond);                                                  \
        std::fprintf(stderr, __VA_ARGS__);                                    \
        std::fprintf(stderr, "\n");                                           \
      }                                                                       \
    }                                                                         \
  } while (0)

inline int rounds(int base) {
  int r = static_cast<int>(base * g_scale);
  return r < 64 ? 64 : r;
}

// Random delays: mostly nothing, sometimes a yield, rarely a short sleep, so the
// threads interleave in many different ways.
struct Jitter {
  std::mt19937_64 rng;
  explicit Jitter(uint64_t seed) : rng(seed) {}
  void operator()() {
    const uint32_t r = static_cast<uint32_t>(rng() % 256);
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 50));
    } else if (r < 24) {
      std::this_thread::yield();
    } else if (r < 48) {
      for (volatile int i = 0; i < static_cast<int>(rng() % 200); ++i) {
      }
    }
  }
};

// Reusable spin barrier among a fixed set of threads: models the warp convergence that
// makes a lane-guarded arrive cover the reads of every lane.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const int gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (gen_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<int> gen_{0};
};

// Run `fn(i)` on n threads. An exception in a worker (a bounded wait that ran out, an
// over-arrival) means the protocol broke and the other threads may be stuck for good:
// report it and end the process at once with a failure.
inline void run_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FATAL: thread %d threw: %s\n", i, e.what());
        std::printf("FAILED: protocol broke (thread exception)\n");
        std::fflush(stdout);
        std::_Exit(1);
      }
    });
  }
  for (auto& t : ts) t.join();
}

// A ring slot of the stress tests: what the producer writes and each consumer checks.
constexpr int kMaxConsumers = 8;
struct Slot {
  uint64_t seq;                 // item number written by the producer
  uint64_t data[6];             // f(seq, k)
  uint64_t done[kMaxConsumers]; // last item each consumer finished with (its own entry)
};
inline uint64_t payload_value(uint64_t seq, int k) { return seq * 0x9E3779B97F4A7C15ull + k; }

// ---------------------------------------------------------------- test cases
// pipeline_host_pc.cc
void test_pipeline_state();
void test_host_barrier_semantics();
void test_stress_stages();
// pipeline_host_tiles.cc
void test_input_tile_pipeline();
void test_epi_load_pipeline();
void test_output_tile_pipeline();
