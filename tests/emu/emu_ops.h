// EmuOps: the CPU emulator's side of the sm_100a seam (kernels/sm100/ops_concept.h), and
// emu::TensorMap, the model of a CUtensorMap built from the same MapSpec the CUDA
// launcher encodes. The kernel's role functions, instantiated with EmuOps, run on the
// host threads of emu::run_grid (emu_runtime.h).
//
// Modelled PTX semantics and the choices made where the ISA leaves room (each is the
// strictest reading that a correct kernel must survive):
//  * TMA load: the box lands in shared memory row after row (row bytes = box_inner *
//    elem_bytes), each byte at Swizzle<b,4,3>(shared address), i.e. bits [4,4+b) ^=
//    bits [7,7+b) of the *shared address* (smem_desc_model.h swizzle_address); elements
//    outside the tensor load as zero; then complete_tx(box bytes, zero fill included)
//    on the barrier. The whole box is written at issue: the earliest legal completion.
//  * TMA store (cp.async.bulk.tensor shared->global): the latest legal moment instead.
//    A store reads shared memory and writes global memory only when a
//    cp.async.bulk.wait_group{.read} that covers its bulk group executes (read_1: all but
//    the newest committed group; wait_all: every committed group). A kernel that reuses
//    the staging buffer before wait_group.read therefore stores wrong data here.
//    Stores not yet committed are in no group and no wait covers them. Only in-bounds
//    elements are written. In flight at thread exit: a ModelViolation.
//  * tcgen05.mma: decoded at issue (instruction and shared-memory descriptors, every
//    check), but *executed* only at the issuing thread's next tcgen05.commit, the latest
//    moment the hardware may still read shared memory; then the commit arrives. A
//    kernel that frees an input stage without a commit, or overwrites it too early,
//    computes a wrong answer here. Arithmetic: the 16 products of one instruction
//    (exact) are summed in fp64, added to the fp32 accumulator (or 0 when !accumulate)
//    and rounded once to fp32 (RNE); the hardware's internal order/precision is not
//    specified by PTX, so tests compare with a tolerance.
//  * TMEM: tcgen05.alloc is warp-collective: every lane calls, lane 0 performs, the others
//    wait for it; first fit over 32-column steps; ncols a power of two in [32, 512];
//    blocks (bounded) while no range is free. cta_group::2 alloc/dealloc/relinquish are
//    collective over one warp in each CTA of the pair (the first blocks for the second)
//    and act on both CTAs with the same columns. Reading or MMA-writing columns that are
//    not allocated throws "TMEM column overlap/unallocated". Alloc after relinquish
//    throws; allocations left at CTA exit throw. tcgen05.ld executes at issue, so
//    tcgen05.wait::ld and the tcgen05 fences are no-ops (the kernel's mbarriers order
//    TMEM like shared memory).
//  * All tcgen05 instructions of a kernel must use one .cta_group (PTX rule): checked.
//  * elect.sync: lane 0 (the hardware may pick any one lane; the kernels must not care).
//  * CLC: try_cancel takes the next not-yet-launched cluster id (it is then never
//    launched), or fails when none is left; after a failure every later request fails.
//    Issuing try_cancel from a CTA that already decoded a failed response is undefined
//    in PTX and throws here. Response encoding: w[0] = 0x434c4300 | canceled,
//    w[1] = first CTA x id (cluster id * cluster size); clc_decode throws on a response
//    that was never written (no magic).
//  * fence.proxy.async, prefetch.tensormap: no-ops (the emulator has a single proxy).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "emu/emu_runtime.h"
#include "emu/smem_desc_model.h"
#include "jax_sm100/kernels/sm100/map_spec.h"
#include "jax_sm100/pipeline/host_barrier.h"

namespace jax_sm100::emu {

/// Model of one rank-3 tiled CUtensorMap, validated as cuTensorMapEncodeTiled would.
class TensorMap {
 public:
  TensorMap() = default;
  explicit TensorMap(const kernels::sm100::MapSpec& s) : s_(s) {
    auto bad = [](const std::string& w) { throw ModelViolation("emu::TensorMap: " + w); };
    const uint64_t e = s.elem_bytes, row = uint64_t(s.box_inner) * e;
    if (s.base == nullptr || reinterpret_cast<uintptr_t>(s.base) % 16 != 0) bad("base must be 16-byte aligned");
    if (e != 1 && e != 2 && e != 4 && e != 8) bad("element size must be 1, 2, 4 or 8 bytes");
    if (s.inner == 0 || s.outer == 0 || s.batch == 0 || s.inner > (1ull << 32) ||
        s.outer > (1ull << 32) || s.batch > (1ull << 32)) {
      bad("extents must be in [1, 2^32]");
    }
    if (s.row_pitch % 16 != 0 || s.row_pitch < s.inner * e || s.row_pitch >= (1ull << 40)) {
      bad("row pitch must be a multiple of 16 bytes, >= a row, < 2^40");
    }
    if (s.batch > 1 && (s.batch_pitch == 0 || s.batch_pitch % 16 != 0 || s.batch_pitch >= (1ull << 40))) {
      bad("batch pitch must be a nonzero multiple of 16 bytes below 2^40 when batch > 1");
    }
    if (s.box_inner == 0 || s.box_outer == 0 || s.box_inner > 256 || s.box_outer > 256) {
      bad("box dimensions must be in [1, 256]");
    }
    if (row % 16 != 0) bad("box row (box_inner * elem_bytes) must be a multiple of 16 bytes");
    const uint32_t sw = s.swizzle_bytes;
    if (sw != 0 && sw != 32 && sw != 64 && sw != 128) bad("swizzle must be 0, 32, 64 or 128 bytes");
    if (sw != 0 && row > sw) bad("box row bytes exceed the swizzle span");
    // Rows narrower than the span are legal for the TMA, but their shared-memory layout
    // is not pinned down by the documentation this model follows: refuse, do not guess.
    if (sw != 0 && row < sw) bad("box rows narrower than the swizzle span are not modelled");
    valid_ = true;
  }
  const kernels::sm100::MapSpec& spec() const { return s_; }
  bool valid() const { return valid_; }
  uint32_t box_bytes() const { return s_.box_inner * s_.box_outer * s_.elem_bytes; }

 private:
  kernels::sm100::MapSpec s_{};
  bool valid_ = false;
};

namespace detail {

/// Checks a TMA shared-memory box [smem, smem + box bytes) and returns its shared address:
/// inside this CTA's window, 128-byte aligned (TMA rule) and, when swizzled, aligned to
/// the pattern's 8 * span repeat (the descriptors' base-offset field 0 relies on it).
inline uint32_t check_box_smem(const void* smem, const TensorMap* map, const char* what) {
  if (map == nullptr || !map->valid()) violation(std::string(what) + ": tensor map not built from a MapSpec");
  const uint32_t addr = kSmemBase + smem_offset(smem, map->box_bytes(), what);
  const uint32_t sw = map->spec().swizzle_bytes, align = sw ? 8 * sw : 128;
  if (addr % align != 0) {
    violation(std::string(what) + ": shared destination must be " + std::to_string(align) + "-byte aligned");
  }
  return addr;
}

/// Calls f(shared byte*, global byte* or nullptr when out of bounds) for every box element.
template <class F>
void for_each_box_elem(Cta& cta, uint32_t saddr, const TensorMap& map, int c0, int c1, int c2, F f) {
  const kernels::sm100::MapSpec& s = map.spec();
  const uint32_t e = s.elem_bytes, row = s.box_inner * e;
  auto* base = static_cast<uint8_t*>(const_cast<void*>(s.base));
  const bool b_in = c2 >= 0 && uint64_t(c2) < s.batch;
  for (uint32_t r = 0; r < s.box_outer; ++r) {
    const int64_t gr = int64_t(c1) + r;
    const bool r_in = b_in && gr >= 0 && uint64_t(gr) < s.outer;
    for (uint32_t i = 0; i < s.box_inner; ++i) {
      const int64_t gi = int64_t(c0) + i;
      const uint32_t addr = swizzle_address(saddr + r * row + i * e, s.swizzle_bytes);
      uint8_t* sp = cta.smem + (addr - kSmemBase);
      uint8_t* gp = nullptr;
      if (r_in && gi >= 0 && uint64_t(gi) < s.inner) {
        gp = base + uint64_t(c2) * s.batch_pitch + uint64_t(gr) * s.row_pitch + uint64_t(gi) * e;
      }
      f(sp, gp, e);
    }
  }
}

inline void tma_box_load(void* smem, const TensorMap* map, int c0, int c1, int c2, const char* what) {
  const uint32_t saddr = check_box_smem(smem, map, what);
  for_each_box_elem(*ctx().cta, saddr, *map, c0, c1, c2, [](uint8_t* sp, const uint8_t* gp, uint32_t e) {
    if (gp != nullptr) {
      std::memcpy(sp, gp, e);
    } else {
      std::memset(sp, 0, e);
    }
  });
}

template <class Barrier>
void check_barrier(const Barrier* bar, const char* what) {
  const uint32_t off = smem_offset(bar, sizeof(Barrier), what);
  if (off % 8 != 0) violation(std::string(what) + ": mbarrier must be 8-byte aligned");
}

inline void check_tmem_cols(Cta& cta, uint32_t col0, uint32_t ncols, const char* what) {
  std::lock_guard<std::mutex> lk(cta.tmem.m);
  for (uint32_t c = col0; c < col0 + ncols; ++c) {
    if (c >= kTmemCols || cta.tmem.owner[c] == 0) {
      violation(std::string("TMEM column overlap/unallocated: ") + what + " touches column " +
                std::to_string(c) + " of CTA " + std::to_string(cta.rank) + ", which is not allocated");
    }
  }
}

inline bool is_pow2_cols(uint32_t n) { return n >= 32 && n <= kTmemCols && (n & (n - 1)) == 0; }

/// The CTAs a cta_group::2 instruction of this thread acts on (its pair) and their rendezvous.
inline PairRendezvous& pair_of(ThreadCtx& c, Cta* both[2]) {
  if (c.cluster->ctas.size() % 2 != 0) violation("cta_group::2 needs an even cluster size");
  both[0] = c.cluster->ctas[c.cta->rank & ~1u].get();
  both[1] = c.cluster->ctas[c.cta->rank | 1u].get();
  return c.cluster->pairs[c.cta->rank / 2];
}

/// Runs f() with the TMEM locks of `n` CTAs held.
template <class F>
auto with_tmem_locks(Cta* const* ctas, uint32_t n, F f) {
  if (n == 1) {
    std::lock_guard<std::mutex> lk(ctas[0]->tmem.m);
    return f();
  }
  std::scoped_lock lk(ctas[0]->tmem.m, ctas[1]->tmem.m);
  return f();
}

inline uint32_t tmem_alloc_cols(Cta* const* ctas, uint32_t n, uint32_t ncols) {
  uint32_t result = 0;
  bounded_poll(
      [&] {
        return with_tmem_locks(ctas, n, [&] {
          for (uint32_t i = 0; i < n; ++i) {
            if (ctas[i]->tmem.relinquished) {
              violation("tcgen05.alloc after tcgen05.relinquish_alloc_permit in CTA " +
                        std::to_string(ctas[i]->rank));
            }
          }
          for (uint32_t start = 0; start + ncols <= kTmemCols; start += 32) {
            bool free = true;
            for (uint32_t i = 0; i < n && free; ++i) {
              for (uint32_t c = start; c < start + ncols && free; ++c) free = ctas[i]->tmem.owner[c] == 0;
            }
            if (!free) continue;
            for (uint32_t i = 0; i < n; ++i) {
              Tmem& t = ctas[i]->tmem;
              const uint16_t id = ++t.serial == 0 ? ++t.serial : t.serial;
              for (uint32_t c = start; c < start + ncols; ++c) t.owner[c] = id;
              t.allocs[start] = ncols;
            }
            result = start;  // lane 0 << 16 | column
            return true;
          }
          return false;  // the hardware blocks until columns are freed
        });
      },
      "tcgen05.alloc (waiting for free TMEM columns)");
  return result;
}

inline uint32_t tmem_free_cols(Cta* const* ctas, uint32_t n, uint32_t taddr, uint32_t ncols) {
  if ((taddr >> 16) != 0) violation("tcgen05.dealloc: the address's lane field must be 0");
  const uint32_t col = taddr & 0xffffu;
  return with_tmem_locks(ctas, n, [&] {
    for (uint32_t i = 0; i < n; ++i) {
      auto it = ctas[i]->tmem.allocs.find(col);
      if (it == ctas[i]->tmem.allocs.end() || it->second != ncols) {
        violation("tcgen05.dealloc: columns [" + std::to_string(col) + ", " + std::to_string(col + ncols) +
                  ") are not one live allocation of CTA " + std::to_string(ctas[i]->rank));
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      ctas[i]->tmem.allocs.erase(col);
      for (uint32_t c = col; c < col + ncols; ++c) ctas[i]->tmem.owner[c] = 0;
    }
    return 0u;
  });
}

inline float f16_bits_to_float(uint16_t h) {
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) {
    v = std::ldexp(float(m), -24);
  } else if (e == 31) {
    v = m ? NAN : INFINITY;
  } else {
    v = std::ldexp(float(m | 0x400u), int(e) - 25);
  }
  return (h & 0x8000u) ? -v : v;
}

inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// One decoded tcgen05.mma.kind::f16, executed at the issuing thread's next commit.
struct MmaJob {
  Cta* ctas[2] = {nullptr, nullptr};  ///< [0] issuing CTA, [1] its peer (cta_group::2)
  uint32_t nctas = 1;
  uint32_t tmem_d = 0;
  SmemLayout la, lb;
  InstrDescF16 id{};
  bool accumulate = false;

  // Operand row `row` (M or N index inside CTA c's share) and k of one operand.
  static float load(Cta& cta, const SmemLayout& l, Major major, uint32_t row, uint32_t k, uint32_t fmt,
                    bool neg) {
    const uint32_t addr = element_address(l, major, row, k, 2);
    uint16_t bits;
    std::memcpy(&bits, smem_at(cta, addr, 2, "tcgen05.mma operand"), 2);
    const float v = fmt == 1 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits);
    return neg ? -v : v;
  }

  void operator()() const {
    const uint32_t M = id.m, N = id.n, mloc = M / nctas, nloc = N / nctas, K = 16;
    const uint32_t lane0 = tmem_d >> 16, col0 = tmem_d & 0xffffu;
    if (nctas == 2 && ctas[1]->exited.load()) violation("cta_group::2 tcgen05.mma: the peer CTA has exited");
    std::vector<float> a(size_t(M) * K), b(size_t(N) * K);
    for (uint32_t c = 0; c < nctas; ++c) {
      for (uint32_t m = 0; m < mloc; ++m) {
        for (uint32_t k = 0; k < K; ++k) {
          a[(c * mloc + m) * K + k] = load(*ctas[c], la, id.a_major, m, k, id.a_format, id.negate_a);
        }
      }
      for (uint32_t n = 0; n < nloc; ++n) {
        for (uint32_t k = 0; k < K; ++k) {
          b[(c * nloc + n) * K + k] = load(*ctas[c], lb, id.b_major, n, k, id.b_format, id.negate_b);
        }
      }
      check_tmem_cols(*ctas[c], col0, N, "tcgen05.mma (D)");
    }
    for (uint32_t m = 0; m < M; ++m) {
      Tmem& t = ctas[m / mloc]->tmem;
      const float* ar = &a[size_t(m) * K];
      for (uint32_t n = 0; n < N; ++n) {
        const float* br = &b[size_t(n) * K];
        double s = 0.0;
        for (uint32_t k = 0; k < K; ++k) s += double(ar[k]) * double(br[k]);
        uint32_t& cell = t.cell(lane0 + m % mloc, col0 + n);
        float prev = 0.0f;
        if (accumulate) std::memcpy(&prev, &cell, 4);
        const float out = static_cast<float>(double(prev) + s);
        std::memcpy(&cell, &out, 4);
      }
    }
  }
};

/// Runs the calling thread's pending MMAs (in issue order): what a commit waits for.
inline void run_pending_mma(ThreadCtx& c) {
  std::vector<std::function<void()>> jobs;
  jobs.swap(c.mma_pending);
  for (auto& j : jobs) j();
}

inline void run_store_groups(ThreadCtx& c, size_t keep) {
  while (c.store_groups.size() > keep) {
    std::vector<std::function<void()>> g = std::move(c.store_groups.front());
    c.store_groups.pop_front();
    for (auto& s : g) s();
  }
}

}  // namespace detail

/// The emulator's Ops (see kernels/sm100/ops_concept.h for the contract of each member).
struct EmuOps {
  using Barrier = pipeline::HostBarrier;
  using TensorMap = emu::TensorMap;
  struct alignas(16) ClcResponse {
    uint32_t w[4];
  };
  static constexpr uint32_t kClcMagic = 0x434c4300u;

  // ---- identity
  static uint32_t thread_idx() { return emu::thread_idx(); }
  static uint32_t cta_rank() { return emu::cta_rank(); }
  static uint32_t cluster_idx() { return emu::cluster_idx(); }
  static bool elect_one() {
    detail::warp_collective("elect.sync");
    return detail::ctx().tid % 32 == 0;
  }
  /// Not in the concept: the CTA's dynamic shared memory (extern __shared__ on the GPU).
  static uint8_t* dynamic_smem() { return emu::dynamic_smem(); }

  // ---- synchronisation
  static void sync_cta() {
    detail::Cta& cta = *detail::ctx().cta;
    cta.named[0].arrive_and_wait(cta.nthreads, "bar.sync");
  }
  static void cluster_sync() {
    detail::ThreadCtx& c = detail::ctx();
    c.cluster->barrier.arrive_and_wait(uint32_t(c.cluster->ctas.size()) * c.cta->nthreads,
                                       "barrier.cluster.arrive+wait");
  }
  static void named_sync(uint32_t id, uint32_t nthreads) {
    detail::Cta& cta = *detail::ctx().cta;
    if (id >= kNamedBarriers) detail::violation("bar.sync: barrier id must be below 16");
    if (nthreads == 0 || nthreads % 32 != 0 || nthreads > cta.nthreads) {
      detail::violation("bar.sync: thread count must be a nonzero multiple of 32, at most the CTA's");
    }
    cta.named[id].arrive_and_wait(nthreads, "bar.sync");
  }
  static void sync_warp() { detail::warp_collective("__syncwarp"); }
  template <class T>
  static T* peer(T* p, uint32_t rank) {
    const uint32_t off = detail::smem_offset(p, 1, "mapa (peer)");
    return reinterpret_cast<T*>(detail::cta_of_rank(rank).smem + off);
  }
  static void arrive_remote(Barrier* b, uint32_t rank) {
    detail::check_barrier(b, "remote arrive");
    if (detail::cta_of_rank(rank).exited.load()) detail::violation("remote arrive on an exited CTA");
    peer(b, rank)->arrive();
  }

  // ---- across lanes and CTAs
  static float shfl_xor(float v, uint32_t lane_mask) {
    detail::ThreadCtx& c = detail::ctx();
    const uint32_t w = c.tid / 32, lane = c.tid % 32;
    if (c.cta->nthreads < 32 * (w + 1)) detail::violation("shfl.sync with the full mask in a partial warp");
    if (lane_mask > 31) detail::violation("shfl.sync.bfly: lane mask past 31");
    float* slots = c.cta->shfl_slots.get() + 32 * w;
    slots[lane] = v;
    detail::warp_collective("shfl.sync.bfly (write)");
    const float got = slots[lane ^ lane_mask];
    detail::warp_collective("shfl.sync.bfly (read)");  // no lane overwrites a slot still to be read
    return got;
  }
  static void red_add_f32(float* gmem, float v) {
    detail::ThreadCtx& c = detail::ctx();
    if (detail::in_smem_window(gmem)) detail::violation("red.global.add.f32 on a shared-memory address");
    std::lock_guard<std::mutex> lk(c.grid->red_m);
    *gmem += v;
  }

  // ---- TMA
  static void prefetch_map(const TensorMap* map) {
    if (map == nullptr || !map->valid()) detail::violation("prefetch.tensormap: invalid tensor map");
  }
  static void tma_load(void* smem, const TensorMap* map, Barrier* bar, int c0, int c1, int c2) {
    detail::tma_box_load(smem, map, c0, c1, c2, "tma_load");
    detail::check_barrier(bar, "tma_load");
    bar->complete_tx(map->box_bytes());
  }
  static void tma_load_pair(void* smem, const TensorMap* map, Barrier* bar, int c0, int c1, int c2) {
    detail::tma_box_load(smem, map, c0, c1, c2, "tma_load_pair");
    detail::check_barrier(bar, "tma_load_pair");
    if (detail::ctx().cluster->ctas.size() < 2) detail::violation("tma_load_pair needs a cluster of >= 2");
    peer(bar, cta_rank() & ~1u)->complete_tx(map->box_bytes());
  }
  static void tma_store(const TensorMap* map, const void* smem, int c0, int c1, int c2) {
    const uint32_t saddr = detail::check_box_smem(smem, map, "tma_store");
    detail::Cta* cta = detail::ctx().cta;
    const TensorMap m = *map;
    detail::ctx().store_open.push_back([cta, saddr, m, c0, c1, c2] {
      detail::for_each_box_elem(*cta, saddr, m, c0, c1, c2, [](const uint8_t* sp, uint8_t* gp, uint32_t e) {
        if (gp != nullptr) std::memcpy(gp, sp, e);
      });
    });
  }
  static void tma_store_commit() {
    detail::ThreadCtx& c = detail::ctx();
    c.store_groups.push_back(std::move(c.store_open));  // an empty group when nothing is open
    c.store_open.clear();
  }
  static void tma_store_wait_read_1() { detail::run_store_groups(detail::ctx(), 1); }
  static void tma_store_wait_all() { detail::run_store_groups(detail::ctx(), 0); }
  static void fence_async_shared() {}

  // ---- shared-memory addresses
  static uint32_t smem_u32(const void* p) { return kSmemBase + detail::smem_offset(p, 1, "smem_u32"); }

  // ---- TMEM
  static void tmem_alloc(uint32_t* dst_smem, uint32_t ncols, bool pair) {
    detail::ThreadCtx& c = detail::ctx();
    detail::warp_collective("tcgen05.alloc", (uint64_t(pair) << 32) | ncols, true);
    if (c.tid % 32 == 0) {
      detail::use_cta_group(pair ? 2 : 1);
      if (!detail::is_pow2_cols(ncols)) {
        detail::violation("tcgen05.alloc: ncols must be a power of two in [32, 512], got " + std::to_string(ncols));
      }
      detail::smem_offset(dst_smem, 4, "tcgen05.alloc destination");
      uint32_t col;
      if (pair) {
        detail::Cta* both[2];
        detail::PairRendezvous& r = detail::pair_of(c, both);
        col = r.run("tcgen05.alloc.cta_group::2", ncols, [&] { return detail::tmem_alloc_cols(both, 2, ncols); });
      } else {
        col = detail::tmem_alloc_cols(&c.cta, 1, ncols);
      }
      *dst_smem = col;
    }
    detail::warp_collective("tcgen05.alloc (result written)");
  }
  static void tmem_relinquish(bool pair) {
    detail::ThreadCtx& c = detail::ctx();
    detail::warp_collective("tcgen05.relinquish_alloc_permit", pair, true);
    if (c.tid % 32 != 0) return;
    detail::use_cta_group(pair ? 2 : 1);
    auto perform = [](detail::Cta* const* ctas, uint32_t n) {
      return detail::with_tmem_locks(ctas, n, [&] {
        for (uint32_t i = 0; i < n; ++i) ctas[i]->tmem.relinquished = true;
        return 0u;
      });
    };
    if (pair) {
      detail::Cta* both[2];
      detail::pair_of(c, both).run("tcgen05.relinquish_alloc_permit.cta_group::2", 0, [&] { return perform(both, 2); });
    } else {
      perform(&c.cta, 1);
    }
  }
  static void tmem_dealloc(uint32_t taddr, uint32_t ncols, bool pair) {
    detail::ThreadCtx& c = detail::ctx();
    detail::warp_collective("tcgen05.dealloc", (uint64_t(pair) << 62) | (uint64_t(ncols) << 32) | taddr, true);
    if (c.tid % 32 != 0) return;
    detail::use_cta_group(pair ? 2 : 1);
    if (!detail::is_pow2_cols(ncols)) detail::violation("tcgen05.dealloc: ncols must be a power of two in [32, 512]");
    if (pair) {
      detail::Cta* both[2];
      detail::pair_of(c, both).run("tcgen05.dealloc.cta_group::2", (uint64_t(ncols) << 32) | taddr,
                                   [&] { return detail::tmem_free_cols(both, 2, taddr, ncols); });
    } else {
      detail::tmem_free_cols(&c.cta, 1, taddr, ncols);
    }
  }
  static void tmem_load_32x32b_x16(uint32_t taddr, uint32_t (&v)[16]) {
    detail::ThreadCtx& c = detail::ctx();
    detail::warp_collective("tcgen05.ld.32x32b.x16", taddr, true);
    const uint32_t warp = c.tid / 32, lane = (taddr >> 16) + c.tid % 32, col = taddr & 0xffffu;
    const uint32_t lo = 32 * (warp % 4);
    if (lane < lo || lane >= lo + 32) {
      detail::violation("tcgen05.ld: warp " + std::to_string(warp) + " may access TMEM lanes " + std::to_string(lo) +
                        ".." + std::to_string(lo + 31) + " only, this lane reads lane " + std::to_string(lane));
    }
    detail::check_tmem_cols(*c.cta, col, 16, "tcgen05.ld");
    for (uint32_t j = 0; j < 16; ++j) v[j] = c.cta->tmem.cell(lane, col + j);
  }
  static void tmem_wait_ld() {}
  static void tcgen05_fence_before() {}
  static void tcgen05_fence_after() {}

  // ---- UMMA
  static void umma_f16(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, bool accumulate,
                       bool pair) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(pair ? 2 : 1);
    detail::MmaJob j;
    j.id = decode_idesc_f16(idesc);
    j.la = decode_sm100(desc_a);
    j.lb = decode_sm100(desc_b);
    j.tmem_d = tmem_d;
    j.accumulate = accumulate;
    j.ctas[0] = c.cta;
    if (j.id.d_format != 1) detail::violation("tcgen05.mma: D format must be F32 (the kernels accumulate in fp32)");
    if (pair) {
      if (c.cta->rank % 2 != 0) detail::violation("cta_group::2 tcgen05.mma must be issued by the even CTA of the pair");
      j.ctas[1] = &detail::cta_of_rank(c.cta->rank + 1);
      j.nctas = 2;
      if (j.ctas[1]->exited.load()) detail::violation("cta_group::2 tcgen05.mma: the peer CTA has exited");
      if (j.id.m != 256) detail::violation("cta_group::2 tcgen05.mma: only M = 256 is modelled");
    } else if (j.id.m != 128) {
      detail::violation("cta_group::1 tcgen05.mma: only M = 128 is modelled, idesc says " + std::to_string(j.id.m));
    }
    if (j.id.n % 16 != 0 || j.id.n < 16 || j.id.n > 256) {
      detail::violation("tcgen05.mma: N must be a multiple of 16 in [16, 256], idesc says " + std::to_string(j.id.n));
    }
    if ((tmem_d >> 16) != 0) detail::violation("tcgen05.mma: D must start at TMEM lane 0 (M = 128 per CTA)");
    for (uint32_t i = 0; i < j.nctas; ++i) {
      detail::smem_at(*j.ctas[i], j.la.start, 2, "tcgen05.mma A descriptor start");
      detail::smem_at(*j.ctas[i], j.lb.start, 2, "tcgen05.mma B descriptor start");
      detail::check_tmem_cols(*j.ctas[i], tmem_d & 0xffffu, j.id.n, "tcgen05.mma (D)");
    }
    c.mma_pending.push_back(j);
  }
  static void umma_commit(Barrier* bar) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(1);
    detail::check_barrier(bar, "tcgen05.commit");
    detail::run_pending_mma(c);
    bar->arrive();
  }
  static void umma_commit_pair(Barrier* bar, uint16_t cta_mask) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(2);
    detail::check_barrier(bar, "tcgen05.commit.multicast");
    detail::run_pending_mma(c);
    for (uint32_t r = 0; r < 16; ++r) {
      if (cta_mask & (1u << r)) arrive_remote(bar, r);
    }
  }

  // ---- cluster launch control
  static void clc_try_cancel(ClcResponse* resp, Barrier* bar, bool multicast) {
    detail::ThreadCtx& c = detail::ctx();
    const uint32_t roff = detail::smem_offset(resp, 16, "clusterlaunchcontrol.try_cancel response");
    if (roff % 16 != 0) detail::violation("clusterlaunchcontrol.try_cancel: response must be 16-byte aligned");
    detail::check_barrier(bar, "clusterlaunchcontrol.try_cancel");
    const uint32_t boff = detail::smem_offset(bar, sizeof(Barrier), "clusterlaunchcontrol.try_cancel");
    if (c.cta->clc_failure_seen.load()) {
      detail::violation("clusterlaunchcontrol.try_cancel after this CTA observed a failed response (undefined)");
    }
    uint32_t id = 0;
    const bool ok = c.grid->take_next_cluster(&id);
    ClcResponse r{};
    r.w[0] = kClcMagic | (ok ? 1u : 0u);
    r.w[1] = ok ? id * c.grid->spec.cluster_size : 0u;
    const uint32_t n = multicast ? uint32_t(c.cluster->ctas.size()) : 1;
    for (uint32_t i = 0; i < n; ++i) {
      detail::Cta& t = multicast ? *c.cluster->ctas[i] : *c.cta;
      if (t.exited.load()) detail::violation("clusterlaunchcontrol.try_cancel multicast to an exited CTA");
      std::memcpy(t.smem + roff, &r, sizeof r);
      reinterpret_cast<Barrier*>(t.smem + boff)->complete_tx(sizeof r);
    }
  }
  static bool clc_decode(const ClcResponse& r, uint32_t* first_cta_x) {
    if ((r.w[0] & ~1u) != kClcMagic) detail::violation("CLC response decoded before try_cancel wrote it");
    if (r.w[0] & 1u) {
      *first_cta_x = r.w[1];
      return true;
    }
    if (detail::t_ctx != nullptr) detail::ctx().cta->clc_failure_seen.store(true);
    return false;
  }
};

}  // namespace jax_sm100::emu
