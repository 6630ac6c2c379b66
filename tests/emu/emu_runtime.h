// CPU runtime of the sm_100a emulator: the grid runner, per-CTA / per-thread state and
// the blocking CTA-level synchronisation. The PTX semantics on top of it (TMA, TMEM,
// tcgen05.mma, CLC) are in emu_ops.h.
//
// Model (each choice is the strict reading of the PTX ISA / CUDA programming guide):
//  * one std::thread per CUDA thread; thread-local pointers give each its identity
//    (thread index, CTA rank in the cluster, cluster index);
//  * clusters are launched in order 0, 1, 2, ... with at most max_resident_clusters
//    resident at once; a cluster id taken by clusterlaunchcontrol.try_cancel is never
//    launched (the launcher and try_cancel draw from the same counter, under one lock);
//  * every CTA has its own zeroed shared-memory window. Its shared addresses
//    (smem_u32) are kSmemBase + offset, kSmemBase = 0x400: address 0 never appears and
//    the window start keeps the 1024-byte alignment that the 128B swizzle pattern
//    (and the descriptors' base-offset field 0) rely on. Host pointers into the window
//    are what the kernel code handles;
//  * TMEM: one 128-lane x 512-column array of 32-bit cells per CTA, i.e. as if each CTA
//    had its SM to itself (the hardware shares the SM's TMEM among co-resident CTAs);
//  * CTA barriers (bar.sync / __syncthreads, barrier.cluster, __syncwarp and the
//    warp-collective .sync.aligned instructions) block on a mutex + condition variable
//    with generations. All threads named by the barrier must arrive: an exited thread
//    does not count as arrived (strict reading), so a kernel whose warps leave before a
//    CTA-wide barrier fails here rather than relying on unspecified behaviour;
//  * every blocking wait of the runtime is bounded by 1.5x
//    pipeline::debug::host_wait_timeout_ms() and throws pipeline::PipelineError past it;
//    once any emulated thread has failed, the others leave their runtime waits at once
//    (emu::Aborted, which is not reported) and HostBarrier waits run out by themselves.
//    run_grid joins every thread, then rethrows the first real failure.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::emu {

/// A kernel broke a rule of the modelled PTX semantics (or used something not modelled).
class ModelViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown out of runtime waits after another emulated thread failed; never reported.
class Aborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Launch shape. Clusters are (cluster_size, 1, 1); blockIdx.x = cluster * size + rank.
struct GridSpec {
  uint32_t num_clusters = 1;
  uint32_t cluster_size = 1;
  uint32_t threads_per_cta = 32;
  uint32_t smem_bytes = 0;             ///< dynamic shared memory per CTA
  uint32_t max_resident_clusters = 1;  ///< how many clusters run at once
  /// Wall-clock bound of the whole grid (livelock guard); 0: 20x host_wait_timeout_ms().
  uint32_t watchdog_ms = 0;
};

/// What run_grid did: clusters launched, and cluster ids taken by try_cancel instead.
struct GridResult {
  uint32_t launched = 0;
  uint32_t canceled = 0;
};

constexpr uint32_t kSmemBase = 0x400;        ///< shared address of every window's byte 0
constexpr uint32_t kMaxSmemBytes = 232448;   ///< sm_100 opt-in maximum per CTA (227 KiB)
constexpr uint32_t kTmemLanes = 128;
constexpr uint32_t kTmemCols = 512;
constexpr uint32_t kNamedBarriers = 16;

namespace detail {

struct Grid;
struct Cluster;
struct Cta;

/// Per emulated thread: identity plus its in-flight asynchronous operations.
struct ThreadCtx {
  Grid* grid = nullptr;
  Cluster* cluster = nullptr;
  Cta* cta = nullptr;
  uint32_t tid = 0;
  const std::atomic<bool>* abort = nullptr;
  std::vector<std::function<void()>> mma_pending;           ///< issued, not yet committed
  std::vector<std::function<void()>> store_open;            ///< bulk stores not yet in a group
  std::deque<std::vector<std::function<void()>>> store_groups;  ///< committed groups
};

inline thread_local ThreadCtx* t_ctx = nullptr;

/// The calling emulated thread's state. Once the grid has failed (or its watchdog fired)
/// every Ops call leaves with Aborted, so even a kernel spinning in a loop gets out.
inline ThreadCtx& ctx() {
  if (t_ctx == nullptr) {
    throw ModelViolation("emu: an Ops member was called outside an emulated thread (use emu::run_grid)");
  }
  if (t_ctx->abort->load(std::memory_order_relaxed)) throw Aborted("emu: aborted because the grid failed");
  return *t_ctx;
}

std::string where();  // "emu (cluster c, CTA r, thread t): "

[[noreturn]] inline void violation(const std::string& what) { throw ModelViolation(where() + what); }

/// Waits on `cv` until done(), bounded by the debug wait limit; leaves with Aborted when
/// another emulated thread has failed. Short slices, so the abort is seen quickly.
template <class Done>
void bounded_wait(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Done done,
                  const char* what) {
  // 1.5x the mbarrier bound: a collective usually hangs because some lane is stuck in
  // an mbarrier wait, and that wait's report (pipeline, role, stage) is the useful one.
  const long long bound = pipeline::debug::host_wait_timeout_ms().load() * 3 / 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound);
  while (!done()) {
    if (t_ctx != nullptr && t_ctx->abort->load(std::memory_order_relaxed)) {
      throw Aborted("emu: aborted because another emulated thread failed");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw pipeline::PipelineError(where() + what + " exceeded the debug wait bound (" + std::to_string(bound) +
                                    " ms): a thread that should arrive never does");
    }
    cv.wait_for(lk, std::chrono::milliseconds(2));
  }
}

/// Polls try_once() (which takes its own locks) until it returns true; bounded like above.
template <class Try>
void bounded_poll(Try try_once, const char* what) {
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lk(m);
  bounded_wait(lk, cv, try_once, what);
}

/// Generation barrier for a fixed set of threads (per arrival generation). Arrivals of
/// one generation must agree on the count, the collective's name and (optionally) a key:
/// lanes of one warp at different collectives are a divergent warp (undefined on the GPU).
class GenBarrier {
 public:
  void arrive_and_wait(uint32_t expected, const char* what, uint64_t key = 0, bool check_key = false) {
    std::unique_lock<std::mutex> lk(m_);
    if (arrived_ == 0) {
      expected_ = expected;
      tag_ = what;
      key_ = key;
    } else {
      if (std::strcmp(tag_, what) != 0) {
        violation(std::string("threads of one barrier/warp are at different collectives ('") + tag_ +
                  "' vs '" + what + "'): divergent .sync.aligned code");
      }
      if (expected != expected_) {
        violation(std::string(what) + ": arrivals disagree on the thread count (" +
                  std::to_string(expected_) + " vs " + std::to_string(expected) + ")");
      }
      if (check_key && key != key_) {
        violation(std::string(what) + ": lanes pass different operands (all lanes must agree)");
      }
    }
    if (++arrived_ == expected_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    const uint64_t g = gen_;
    bounded_wait(lk, cv_, [&] { return gen_ != g; }, what);
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  uint32_t arrived_ = 0, expected_ = 0;
  uint64_t gen_ = 0, key_ = 0;
  const char* tag_ = "";
};

/// Rendezvous of the two warps (one per CTA) of a cta_group::2 TMEM management
/// instruction: the first to arrive blocks until the second has; the second performs
/// the operation for both CTAs (PTX: "issue from two warps ... collectively").
struct PairRendezvous {
  std::mutex m;
  std::condition_variable cv;
  uint32_t arrived = 0;
  uint64_t gen = 0, key = 0;
  const char* op = "";
  uint32_t result = 0;
  std::exception_ptr error;

  uint32_t run(const char* what, uint64_t k, const std::function<uint32_t()>& perform) {
    std::unique_lock<std::mutex> lk(m);
    if (arrived == 0) {
      arrived = 1;
      op = what;
      key = k;
      error = nullptr;
      const uint64_t g = gen;
      bounded_wait(lk, cv, [&] { return gen != g; }, what);
      if (error) std::rethrow_exception(error);
      return result;
    }
    arrived = 0;
    ++gen;
    try {
      if (std::strcmp(op, what) != 0 || key != k) {
        violation(std::string("the two CTAs of a pair issued different cta_group::2 operations ('") + op +
                  "' vs '" + what + "', or different operands)");
      }
      result = perform();
    } catch (...) {
      error = std::current_exception();
      cv.notify_all();
      throw;
    }
    cv.notify_all();
    return result;
  }
};

/// TMEM of one CTA. Cells are plain memory, ordered by the kernel's own mbarriers (as
/// on the GPU); the allocation metadata is under the mutex.
struct Tmem {
  std::mutex m;
  std::vector<uint32_t> cells = std::vector<uint32_t>(size_t(kTmemLanes) * kTmemCols, 0u);
  uint16_t owner[kTmemCols] = {};     ///< 0: free; else the allocation's serial number
  std::map<uint32_t, uint32_t> allocs;  ///< first column -> number of columns
  uint16_t serial = 0;
  bool relinquished = false;
  uint32_t& cell(uint32_t lane, uint32_t col) { return cells[size_t(lane) * kTmemCols + col]; }
};

struct Cta {
  Cluster* cluster = nullptr;
  uint32_t rank = 0;
  uint8_t* smem = nullptr;  ///< 1024-aligned, zeroed
  uint32_t smem_bytes = 0;
  uint32_t nthreads = 0;
  GenBarrier named[kNamedBarriers];  ///< bar.sync ids; id 0 with every thread = __syncthreads
  std::unique_ptr<GenBarrier[]> warps;
  std::unique_ptr<float[]> shfl_slots;  ///< 32 per warp: the values a shfl.sync exchanges
  Tmem tmem;
  std::atomic<uint32_t> live_threads{0};
  std::atomic<bool> exited{false};
  std::atomic<bool> clc_failure_seen{false};  ///< a failed try_cancel response was decoded here
  ~Cta() { std::free(smem); }
};

struct Cluster {
  uint32_t idx = 0;
  std::vector<std::unique_ptr<Cta>> ctas;
  GenBarrier barrier;  ///< barrier.cluster
  std::unique_ptr<PairRendezvous[]> pairs;
  std::vector<std::thread> threads;
  std::atomic<uint32_t> live_ctas{0};
  bool done = false;  ///< under Grid::m
};

struct Grid {
  GridSpec spec;
  std::mutex m;
  std::condition_variable cv;
  uint32_t next_cluster = 0, resident = 0, launched = 0, canceled = 0;  ///< under m
  std::exception_ptr error;                                              ///< under m
  std::atomic<bool> abort{false};
  std::atomic<int> cta_group{0};  ///< the .cta_group of the first tcgen05 op (1 or 2)
  std::mutex red_m;               ///< serialises red.global (the L2's atomic unit)
  std::vector<std::unique_ptr<Cluster>> clusters;

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(m);
    if (!error) error = e;
    abort.store(true);
    cv.notify_all();
  }
  /// clusterlaunchcontrol.try_cancel: the next cluster id that was not launched, if any.
  bool take_next_cluster(uint32_t* id) {
    std::lock_guard<std::mutex> lk(m);
    if (next_cluster >= spec.num_clusters) return false;
    *id = next_cluster++;
    ++canceled;
    return true;
  }
};

inline std::string where() {
  if (t_ctx == nullptr) return "emu: ";
  return "emu (cluster " + std::to_string(t_ctx->cluster->idx) + ", CTA " +
         std::to_string(t_ctx->cta->rank) + ", thread " + std::to_string(t_ctx->tid) + "): ";
}

inline Cta& cta_of_rank(uint32_t rank) {
  ThreadCtx& c = ctx();
  if (rank >= c.cluster->ctas.size()) {
    violation("CTA rank " + std::to_string(rank) + " is outside the cluster of " +
              std::to_string(c.cluster->ctas.size()));
  }
  return *c.cluster->ctas[rank];
}

/// Offset of [p, p + bytes) inside this CTA's window; throws when it is not inside.
inline uint32_t smem_offset(const void* p, uint32_t bytes, const char* what) {
  const Cta& cta = *ctx().cta;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(cta.smem);
  if (a < lo || a - lo >= cta.smem_bytes || a - lo + bytes > cta.smem_bytes) {
    violation(std::string(what) + ": pointer is not inside this CTA's shared-memory window");
  }
  return static_cast<uint32_t>(a - lo);
}

/// True when p points into this CTA's shared-memory window (not global memory).
inline bool in_smem_window(const void* p) {
  const Cta& cta = *ctx().cta;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(cta.smem);
  return a >= lo && a - lo < cta.smem_bytes;
}

/// Host pointer of shared address range [addr, addr + bytes) of `cta`; throws outside.
inline uint8_t* smem_at(Cta& cta, uint32_t addr, uint32_t bytes, const char* what) {
  if (addr < kSmemBase || addr - kSmemBase + uint64_t(bytes) > cta.smem_bytes) {
    violation(std::string(what) + ": shared address 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%x", addr);
      return std::string(b);
    }() + " is outside the window");
  }
  return cta.smem + (addr - kSmemBase);
}

/// Warp-collective rendezvous of the calling thread's warp (all lanes must call).
inline void warp_collective(const char* what, uint64_t key = 0, bool check_key = false) {
  ThreadCtx& c = ctx();
  const uint32_t w = c.tid / 32, lanes = std::min<uint32_t>(32, c.cta->nthreads - 32 * w);
  c.cta->warps[w].arrive_and_wait(lanes, what, key, check_key);
}

/// Every tcgen05 instruction of a kernel must use the same .cta_group (PTX ISA).
inline void use_cta_group(int g) {
  int expected = 0;
  std::atomic<int>& cg = ctx().grid->cta_group;
  if (!cg.compare_exchange_strong(expected, g) && expected != g) {
    violation("tcgen05 instructions with .cta_group::" + std::to_string(g) + " and ::" +
              std::to_string(expected) + " in one kernel (PTX requires one value)");
  }
}

/// End of one emulated thread: asynchronous work it still owns is a kernel bug.
inline void thread_exit_checks(ThreadCtx& c) {
  if (!c.mma_pending.empty()) {
    violation(std::to_string(c.mma_pending.size()) +
              " tcgen05.mma issued without a following tcgen05.commit before the thread exited");
  }
  if (!c.store_open.empty() || !c.store_groups.empty()) {
    violation("bulk tensor stores still in flight at thread exit (missing commit_group / wait_group)");
  }
}

/// End of one CTA (its last thread left): TMEM must have been deallocated.
inline void cta_exit_checks(Cta& cta) {
  std::lock_guard<std::mutex> lk(cta.tmem.m);
  if (!cta.tmem.allocs.empty()) {
    throw ModelViolation("emu (cluster " + std::to_string(cta.cluster->idx) + ", CTA " +
                         std::to_string(cta.rank) + "): " + std::to_string(cta.tmem.allocs.size()) +
                         " TMEM allocation(s) not deallocated before the CTA exited");
  }
}

inline void thread_main(Grid* g, Cluster* cl, Cta* cta, uint32_t tid, const std::function<void()>* fn) {
  ThreadCtx c;
  c.grid = g;
  c.cluster = cl;
  c.cta = cta;
  c.tid = tid;
  c.abort = &g->abort;
  t_ctx = &c;
  try {
    (*fn)();
    if (!g->abort.load()) thread_exit_checks(c);
  } catch (const Aborted&) {
  } catch (...) {
    g->fail(std::current_exception());
  }
  t_ctx = nullptr;
  if (cta->live_threads.fetch_sub(1) == 1) {
    if (!g->abort.load()) {
      try {
        cta_exit_checks(*cta);
      } catch (...) {
        g->fail(std::current_exception());
      }
    }
    cta->exited.store(true);
    if (cl->live_ctas.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lk(g->m);
      --g->resident;
      cl->done = true;
      g->cv.notify_all();
    }
  }
}

inline void launch_cluster(Grid& g, uint32_t idx, const std::function<void()>& fn) {
  const GridSpec& s = g.spec;
  auto cl = std::make_unique<Cluster>();
  cl->idx = idx;
  cl->pairs = std::make_unique<PairRendezvous[]>(s.cluster_size / 2 + 1);
  cl->live_ctas = s.cluster_size;
  const size_t window = (size_t(s.smem_bytes) + 1023) / 1024 * 1024 + 1024;
  for (uint32_t r = 0; r < s.cluster_size; ++r) {
    auto cta = std::make_unique<Cta>();
    cta->cluster = cl.get();
    cta->rank = r;
    cta->smem = static_cast<uint8_t*>(std::aligned_alloc(1024, window));
    if (cta->smem == nullptr) throw std::bad_alloc();
    std::memset(cta->smem, 0, window);
    cta->smem_bytes = s.smem_bytes;
    cta->nthreads = s.threads_per_cta;
    cta->warps = std::make_unique<GenBarrier[]>((s.threads_per_cta + 31) / 32);
    cta->shfl_slots = std::make_unique<float[]>((s.threads_per_cta + 31) / 32 * 32);
    cta->live_threads = s.threads_per_cta;
    cl->ctas.push_back(std::move(cta));
  }
  Cluster* raw = cl.get();
  {
    std::lock_guard<std::mutex> lk(g.m);
    g.clusters.push_back(std::move(cl));
  }
  for (uint32_t r = 0; r < s.cluster_size; ++r) {
    for (uint32_t t = 0; t < s.threads_per_cta; ++t) {
      raw->threads.emplace_back(thread_main, &g, raw, raw->ctas[r].get(), t, &fn);
    }
  }
}

/// Joins the threads of finished clusters and frees their memory.
inline void reap_clusters(Grid& g, bool all) {
  std::vector<Cluster*> ready;
  {
    std::lock_guard<std::mutex> lk(g.m);
    for (auto& cl : g.clusters) {
      if (!cl->threads.empty() && (all || cl->done)) ready.push_back(cl.get());
    }
  }
  for (Cluster* cl : ready) {
    for (auto& t : cl->threads) t.join();
    cl->threads.clear();
    cl->ctas.clear();
  }
}

}  // namespace detail

/// Runs `fn` in every thread of every CTA of the grid (see the model at the top).
/// Rethrows the first failure of any emulated thread after all of them have ended.
inline GridResult run_grid(const GridSpec& spec, const std::function<void()>& fn) {
  if (spec.num_clusters == 0 || spec.cluster_size == 0 || spec.cluster_size > 8 ||
      spec.threads_per_cta == 0 || spec.threads_per_cta > 1024 || spec.max_resident_clusters == 0 ||
      spec.smem_bytes > kMaxSmemBytes) {
    throw ModelViolation("emu::run_grid: invalid GridSpec (clusters >= 1, cluster size 1..8, threads "
                         "1..1024, max resident >= 1, smem <= 232448 bytes)");
  }
  detail::Grid g;
  g.spec = spec;
  const long long limit_ms =
      spec.watchdog_ms ? spec.watchdog_ms : 20 * pipeline::debug::host_wait_timeout_ms().load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  // Launch when a slot is free; leave when everything ran, on failure, or at the deadline.
  auto ready = [&] {
    return g.abort.load() || (g.next_cluster < spec.num_clusters && g.resident < spec.max_resident_clusters) ||
           (g.next_cluster >= spec.num_clusters && g.resident == 0);
  };
  std::unique_lock<std::mutex> lk(g.m);
  for (;;) {
    if (!g.cv.wait_until(lk, deadline, ready)) {
      if (!g.error) {
        g.error = std::make_exception_ptr(pipeline::PipelineError(
            "emu::run_grid: the grid ran past its watchdog (" + std::to_string(limit_ms) +
            " ms) without failing a bounded wait: a livelock (e.g. a work loop that never ends)"));
      }
      g.abort.store(true);
      break;
    }
    if (g.abort.load() || g.next_cluster >= spec.num_clusters) break;
    const uint32_t id = g.next_cluster++;
    ++g.resident;
    ++g.launched;
    lk.unlock();
    try {
      detail::launch_cluster(g, id, fn);
    } catch (...) {  // e.g. no more threads: fail the grid, then join what runs
      g.fail(std::current_exception());
    }
    detail::reap_clusters(g, false);
    lk.lock();
  }
  lk.unlock();
  detail::reap_clusters(g, true);
  if (g.error) std::rethrow_exception(g.error);
  return GridResult{g.launched, g.canceled};
}

/// Identity and shared memory of the calling emulated thread.
inline uint32_t thread_idx() { return detail::ctx().tid; }
inline uint32_t cta_rank() { return detail::ctx().cta->rank; }
inline uint32_t cluster_idx() { return detail::ctx().cluster->idx; }
inline const GridSpec& grid_spec() { return detail::ctx().grid->spec; }
/// The CTA's dynamic shared memory (extern __shared__ on the GPU): 1024-aligned, zeroed.
inline uint8_t* dynamic_smem() { return detail::ctx().cta->smem; }

}  // namespace jax_sm100::emu
