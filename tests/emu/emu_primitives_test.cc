// Primitive tests of the sm_100a CPU emulator (emu_ops.h, emu_runtime.h), each against a
// straightforward reference written here from the PTX field layouts, on fresh random
// data (--seed N reproduces a run). Built and run by tests/test_emu_primitives.py.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "emu/emu_ops.h"

namespace emu = jax_sm100::emu;
namespace jp = jax_sm100::pipeline;
using jax_sm100::kernels::sm100::MapSpec;
using Ops = emu::EmuOps;
using Bar = Ops::Barrier;

static std::atomic<int> g_failures{0};
#define CHECK(cond, ...)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      if (g_failures.fetch_add(1) < 30) {                                                 \
        std::fprintf(stderr, "CHECK failed %s:%d: %s | ", __FILE__, __LINE__, #cond);     \
        std::fprintf(stderr, __VA_ARGS__);                                                \
        std::fprintf(stderr, "\n");                                                       \
      }                                                                                   \
    }                                                                                     \
  } while (0)

static std::mt19937_64 g_rng;

struct Buf {  // 64-byte aligned global memory
  uint8_t* p;
  size_t n;
  explicit Buf(size_t bytes) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))), n(bytes) {}
  ~Buf() { std::free(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  template <class T> T* as() { return reinterpret_cast<T*>(p); }
};

static MapSpec map_spec(const void* base, uint32_t e, uint64_t inner, uint64_t outer, uint64_t batch,
                        uint64_t row_pitch, uint64_t batch_pitch, uint32_t bi, uint32_t bo, uint32_t sw) {
  MapSpec s;
  s.base = base, s.elem_bytes = e, s.inner = inner, s.outer = outer, s.batch = batch;
  s.row_pitch = row_pitch, s.batch_pitch = batch_pitch, s.box_inner = bi, s.box_outer = bo;
  s.swizzle_bytes = sw;
  return s;
}

/// Runs a grid that must fail; returns the failure's message ("" if it did not fail).
template <class F>
static std::string fails_with(const emu::GridSpec& g, F fn) {
  try {
    emu::run_grid(g, fn);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
#define CHECK_FAILS(msg, needle) CHECK((msg).find(needle) != std::string::npos, "expected '%s', got '%s'", needle, (msg).c_str())

// ------------------------------------------------------------------------- TMA
// Independent byte position of box row r, byte j under a span-S swizzle (rows of S bytes,
// box at a multiple of 8*S): 16-byte chunk j/16 is XORed with the row's bits above 128 B.
static uint32_t swz_pos(uint32_t r, uint32_t j, uint32_t S) {
  if (S == 0) return 0xffffffffu;
  return r * S + (((j / 16) ^ ((r * S / 128) % (S / 16))) * 16) + j % 16;
}

static void test_tma(uint32_t e, uint32_t sw) {
  const uint32_t bi = sw / e, bo = 32, box = bi * bo * e;
  const uint64_t inner = 2 * bi + 7, outer = 77, batch = 3;
  const uint64_t rp = (inner * e + 16 + 15) / 16 * 16, bp = outer * rp + 64, bytes = batch * bp;
  Buf in(bytes), out(bytes), out2(bytes);
  for (size_t i = 0; i < bytes; ++i) in.p[i] = static_cast<uint8_t>(g_rng());
  std::memset(out.p, 0xAB, bytes);
  std::memset(out2.p, 0xAB, bytes);
  const emu::TensorMap min(map_spec(in.p, e, inner, outer, batch, rp, bp, bi, bo, sw));
  const emu::TensorMap mout(map_spec(out.p, e, inner, outer, batch, rp, bp, bi, bo, sw));
  const emu::TensorMap mout2(map_spec(out2.p, e, inner, outer, batch, rp, bp, bi, bo, sw));
  const int c0s[] = {-int(bi) / 2, 0, int(bi), int(2 * bi), int(inner) + 3};
  const int c1s[] = {-5, 0, 64, 200};
  const int c2s[] = {-1, 0, 1, 2, 3};
  const uint32_t bar_off = 2 * box;
  emu::run_grid(emu::GridSpec{1, 1, 1, bar_off + 1024, 1}, [&] {
    uint8_t* smem = Ops::dynamic_smem();
    Bar* bar = new (smem + bar_off) Bar();
    bar->init(1);
    uint32_t phase = 0;
    int bad = 0;
    for (int c0 : c0s) for (int c1 : c1s) for (int c2 : c2s) {
      std::memset(smem, 0xEE, box);
      bar->arrive_expect_tx(box);
      Ops::tma_load(smem, &min, bar, c0, c1, c2);
      bar->wait(phase);
      phase ^= 1;
      for (uint32_t r = 0; r < bo; ++r) for (uint32_t i = 0; i < bi; ++i) {
        const int64_t gi = c0 + int64_t(i), gr = c1 + int64_t(r);
        const bool inb = gi >= 0 && gi < int64_t(inner) && gr >= 0 && gr < int64_t(outer) && c2 >= 0 && c2 < int(batch);
        for (uint32_t b = 0; b < e; ++b) {
          const uint8_t want = inb ? in.p[c2 * bp + gr * rp + gi * e + b] : 0;
          bad += smem[swz_pos(r, i * e + b, sw)] != want;
        }
      }
    }
    CHECK(bad == 0, "TMA load e=%u sw=%u: %d bytes differ from the reference", e, sw, bad);
    // Round trip through two staging buffers: wait_group.read 1 frees the older one.
    uint32_t k = 0;
    for (uint64_t b = 0; b < batch; ++b) for (uint64_t r0 = 0; r0 < outer; r0 += bo) for (uint64_t i0 = 0; i0 < inner; i0 += bi) {
      uint8_t* buf = smem + (k++ % 2) * box;
      Ops::tma_store_wait_read_1();
      bar->arrive_expect_tx(box);
      Ops::tma_load(buf, &min, bar, int(i0), int(r0), int(b));
      bar->wait(phase);
      phase ^= 1;
      Ops::fence_async_shared();
      Ops::tma_store(&mout, buf, int(i0), int(r0), int(b));
      Ops::tma_store_commit();
    }
    // A box hanging off the top-left corner: only its in-bounds part is stored.
    Ops::tma_store_wait_all();
    bar->arrive_expect_tx(box);
    Ops::tma_load(smem, &min, bar, -int(bi) / 2, -3, 1);
    bar->wait(phase);
    phase ^= 1;
    Ops::tma_store(&mout, smem, -int(bi) / 2, -3, 1);
    Ops::tma_store_commit();
    Ops::tma_store_wait_all();
    // The store reads shared memory no earlier than its wait: overwriting the staging
    // buffer before wait_group.read is visible in the output (a kernel bug caught).
    std::memset(smem, 0x11, box);
    Ops::tma_store(&mout2, smem, 0, 0, 0);
    Ops::tma_store_commit();
    std::memset(smem, 0x5A, box);
    Ops::tma_store_wait_all();
  });
  int bad = 0, pad = 0, early = 0;
  for (uint64_t b = 0; b < batch; ++b) for (uint64_t r = 0; r < outer; ++r) for (uint64_t x = 0; x < rp; ++x) {
    const size_t o = b * bp + r * rp + x;
    if (x < inner * e) bad += out.p[o] != in.p[o]; else pad += out.p[o] != 0xAB;
    if (x < inner * e && r < bo && x < bi * e && b == 0) early += out2.p[o] != 0x5A;
  }
  for (uint64_t b = 0; b < batch; ++b) for (uint64_t x = outer * rp; x < bp; ++x) pad += out.p[b * bp + x] != 0xAB;
  CHECK(bad == 0 && pad == 0, "TMA store round trip e=%u sw=%u: %d data bytes wrong, %d padding bytes written", e, sw, bad, pad);
  CHECK(early == 0, "TMA store read shared memory before its wait_group (%d bytes)", early);
}

// ------------------------------------------------------------------------- UMMA
// 16-bit values drawn from their bit fields (normal numbers in [2^-3, 4)), decoded here
// independently of the emulator.
static uint16_t rand_half(bool bf16) {
  const uint64_t r = g_rng();
  const uint32_t sign = r & 1, ex = (r >> 1) % 5;
  return bf16 ? uint16_t(sign << 15 | (124 + ex) << 7 | ((r >> 8) & 0x7f))
              : uint16_t(sign << 15 | (12 + ex) << 10 | ((r >> 8) & 0x3ff));
}
static double half_value(uint16_t h, bool bf16) {
  const double s = (h >> 15) ? -1.0 : 1.0;
  return bf16 ? s * std::ldexp(1.0 + (h & 0x7f) / 128.0, int((h >> 7) & 0xff) - 127)
              : s * std::ldexp(1.0 + (h & 0x3ff) / 1024.0, int((h >> 10) & 0x1f) - 15);
}

// Shared-memory descriptor from the PTX tcgen05 field layout: start, LBO, SBO (>> 4),
// version 1 at bit 46, 128B swizzle = 2 at bits 61..63.
static uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t(addr >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32 | 1ull << 46 | 2ull << 61;
}
// Instruction descriptor, kind::f16: D f32 (bit 4), A/B format (7, 10: 1 = bf16), major
// bits 15/16 (1 = MN-major), N >> 3 at 17, M >> 4 at 24.
static uint32_t make_idesc(bool bf16, bool a_mn, bool b_mn, uint32_t M, uint32_t N) {
  return 1u << 4 | uint32_t(bf16) << 7 | uint32_t(bf16) << 10 | uint32_t(a_mn) << 15 | uint32_t(b_mn) << 16 |
         (N >> 3) << 17 | (M >> 4) << 24;
}

/// One operand (rows x K logical, rows split over `nctas` CTAs) in global memory as the
/// chosen major order, loaded into a CTA's smem by the TMA model, read by descriptors.
struct Operand {
  uint32_t rows, K = 64;
  bool mn, bf16;
  std::vector<uint16_t> v;  // logical [row][k]
  Buf g;
  emu::TensorMap map;
  Operand(uint32_t rows_, bool mn_, bool bf16_, uint32_t nctas)
      : rows(rows_), mn(mn_), bf16(bf16_), v(size_t(rows_) * 64), g(size_t(rows_) * 64 * 2) {
    for (auto& x : v) x = rand_half(bf16);
    uint16_t* p = g.as<uint16_t>();
    for (uint32_t r = 0; r < rows; ++r) for (uint32_t k = 0; k < K; ++k) (mn ? p[k * rows + r] : p[r * K + k]) = v[r * K + k];
    map = mn ? emu::TensorMap(map_spec(g.p, 2, rows, K, 1, rows * 2, 0, 64, 64, 128))
             : emu::TensorMap(map_spec(g.p, 2, K, rows, 1, K * 2, 0, 64, rows / nctas, 128));
  }
  uint32_t bytes_per_cta(uint32_t nctas) const { return rows / nctas * K * 2; }
  // Loads this CTA's share (rows [part*rows/nctas, ...)) to smem; returns the tx bytes.
  template <bool Pair> void load(uint8_t* smem, Bar* bar, uint32_t part, uint32_t nctas) const {
    const uint32_t share = rows / nctas;
    auto issue = Pair ? Ops::tma_load_pair : Ops::tma_load;
    if (!mn) { issue(smem, &map, bar, 0, int(part * share), 0); return; }
    for (uint32_t j = 0; j < share / 64; ++j) issue(smem + j * 8192, &map, bar, int(part * share + 64 * j), 0, 0);
  }
  // Descriptor of instruction kk (K slice 16kk..16kk+15): K-major advances the start by
  // 32 bytes inside the 128-byte swizzled row; MN-major by 16 K-rows (2048 bytes).
  uint64_t desc(uint32_t saddr, uint32_t kk, uint32_t sbo = 1024) const {
    return mn ? make_desc(saddr + kk * 2048, 8192, sbo) : make_desc(saddr + kk * 32, 16, sbo);
  }
};

/// Mismatches of D (M x N fp32) against factor * A Bᵀ in float64, tolerance relative to
/// sum |a b| (a handful of fp32 roundings).
static int mismatches(const std::vector<float>& D, const Operand& A, const Operand& B, double factor) {
  std::vector<double> a(A.v.size()), b(B.v.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = half_value(A.v[i], A.bf16);
  for (size_t i = 0; i < b.size(); ++i) b[i] = half_value(B.v[i], B.bf16);
  int bad = 0;
  for (uint32_t m = 0; m < A.rows; ++m) for (uint32_t n = 0; n < B.rows; ++n) {
    double ref = 0, mag = 0;
    for (uint32_t k = 0; k < 64; ++k) {
      const double p = a[m * 64 + k] * b[n * 64 + k];
      ref += p, mag += std::fabs(p);
    }
    bad += !(std::fabs(D[size_t(m) * B.rows + n] - factor * ref) <= factor * mag * 1e-6 + 1e-30);
  }
  return bad;
}

/// Every thread of warp w reads its TMEM lane (32w + lane) for columns 0..N-1 into D's row
/// row_base + 32w + lane.
static void read_tmem_rows(uint32_t taddr, uint32_t N, uint32_t row_base, std::vector<float>& D) {
  const uint32_t w = Ops::thread_idx() / 32, row = 32 * w + Ops::thread_idx() % 32;
  Ops::tcgen05_fence_after();
  for (uint32_t c = 0; c < N; c += 16) {
    uint32_t v[16];
    Ops::tmem_load_32x32b_x16(taddr + ((32 * w) << 16) + c, v);
    Ops::tmem_wait_ld();
    for (uint32_t j = 0; j < 16; ++j) std::memcpy(&D[size_t(row_base + row) * N + c + j], &v[j], 4);
  }
}

enum class Fault { kNone, kSboOff, kOverwriteBeforeCommit };

/// M = 128, K = 64 (4 instructions) in one CTA: a "garbage" MMA first, then the product
/// with accumulate off for the first slice (must overwrite), then again accumulating
/// (2 A Bᵀ). Returns the mismatch counts of both passes.
static std::pair<int, int> umma_single(bool bf16, bool a_mn, bool b_mn, uint32_t N, Fault fault) {
  const uint32_t M = 128;
  Operand A(M, a_mn, bf16, 1), B(N, b_mn, bf16, 1), A2(M, a_mn, bf16, 1);
  const uint32_t offB = 16384, offBar = offB + 32768, tx = A.bytes_per_cta(1) + B.bytes_per_cta(1);
  std::vector<float> D1(size_t(M) * N), D2(size_t(M) * N);
  const uint32_t idesc = make_idesc(bf16, a_mn, b_mn, M, N);
  emu::run_grid(emu::GridSpec{1, 1, 128, offBar + 1024, 1}, [&] {
    uint8_t* smem = Ops::dynamic_smem();
    Bar* full = reinterpret_cast<Bar*>(smem + offBar);
    Bar* done = full + 1;
    auto* slot = reinterpret_cast<uint32_t*>(smem + offBar + 64);
    if (Ops::thread_idx() == 0) {
      new (full) Bar();
      new (done) Bar();
      full->init(1);
      done->init(1);
    }
    if (Ops::thread_idx() < 32) Ops::tmem_alloc(slot, N, false);
    Ops::sync_cta();
    const uint32_t taddr = *slot, sA = Ops::smem_u32(smem), sB = Ops::smem_u32(smem + offB);
    const uint32_t sbo_a = fault == Fault::kSboOff ? 512 : 1024;
    if (Ops::thread_idx() == 0) {
      full->arrive_expect_tx(tx);
      A.load<false>(smem, full, 0, 1);
      B.load<false>(smem + offB, full, 0, 1);
      full->wait(0);
      Ops::umma_f16(taddr, A.desc(sA, 1), B.desc(sB, 1), idesc, false, false);
      Ops::umma_commit(done);
      done->wait(0);
      for (uint32_t kk = 0; kk < 4; ++kk) Ops::umma_f16(taddr, A.desc(sA, kk, sbo_a), B.desc(sB, kk), idesc, kk > 0, false);
      if (fault == Fault::kOverwriteBeforeCommit) {  // stage reused before the commit
        full->arrive_expect_tx(A.bytes_per_cta(1));
        A2.load<false>(smem, full, 0, 1);
        full->wait(1);
      }
      Ops::umma_commit(done);
      done->wait(1);
      Ops::tcgen05_fence_before();
    }
    Ops::sync_cta();
    read_tmem_rows(taddr, N, 0, D1);
    Ops::sync_cta();
    if (Ops::thread_idx() == 0) {
      for (uint32_t kk = 0; kk < 4; ++kk) Ops::umma_f16(taddr, A.desc(sA, kk, sbo_a), B.desc(sB, kk), idesc, true, false);
      Ops::umma_commit(done);
      done->wait(0);
    }
    Ops::sync_cta();
    read_tmem_rows(taddr, N, 0, D2);
    Ops::sync_cta();
    if (Ops::thread_idx() < 32) Ops::tmem_dealloc(taddr, N, false);
  });
  if (fault == Fault::kOverwriteBeforeCommit) {
    const int vs_new = mismatches(D1, A2, B, 1.0), vs_old = mismatches(D1, A, B, 1.0);
    CHECK(vs_new == 0 && vs_old > 0, "MMA must read smem at its commit: %d mismatches vs the new data, %d vs the old",
          vs_new, vs_old);
    return {vs_new, 0};
  }
  return {mismatches(D1, A, B, 1.0), mismatches(D2, A, B, 2.0)};
}

/// cta_group::2, M = 256: A rows 0..127 in CTA 0, 128..255 in CTA 1; B rows split in
/// halves the same way; D rows 128r.. in CTA r's TMEM.
static int umma_pair(bool bf16, bool a_mn, bool b_mn, uint32_t N) {
  const uint32_t M = 256;
  Operand A(M, a_mn, bf16, 2), B(N, b_mn, bf16, 2);
  const uint32_t offB = 16384, offBar = offB + 16384, tx = 2 * (A.bytes_per_cta(2) + B.bytes_per_cta(2));
  std::vector<float> D(size_t(M) * N);
  const uint32_t idesc = make_idesc(bf16, a_mn, b_mn, M, N);
  emu::run_grid(emu::GridSpec{1, 2, 128, offBar + 1024, 1}, [&] {
    uint8_t* smem = Ops::dynamic_smem();
    Bar* full = reinterpret_cast<Bar*>(smem + offBar);
    Bar* done = full + 1;
    auto* slot = reinterpret_cast<uint32_t*>(smem + offBar + 64);
    const uint32_t rank = Ops::cta_rank();
    if (Ops::thread_idx() == 0) {
      new (full) Bar();
      new (done) Bar();
      full->init(1);
      done->init(1);
      if (rank == 0) full->arrive_expect_tx(tx);  // both CTAs' bytes land on the leader's
    }
    if (Ops::thread_idx() < 32) Ops::tmem_alloc(slot, N, true);
    Ops::cluster_sync();
    const uint32_t taddr = *slot, sA = Ops::smem_u32(smem), sB = Ops::smem_u32(smem + offB);
    if (Ops::thread_idx() == 0) {
      A.load<true>(smem, full, rank, 2);
      B.load<true>(smem + offB, full, rank, 2);
      if (rank == 0) {
        full->wait(0);
        for (uint32_t kk = 0; kk < 4; ++kk) Ops::umma_f16(taddr, A.desc(sA, kk), B.desc(sB, kk), idesc, kk > 0, true);
        Ops::umma_commit_pair(done, 0b11);
      }
      done->wait(0);
    }
    Ops::sync_cta();
    read_tmem_rows(taddr, N, 128 * rank, D);
    Ops::cluster_sync();
    if (Ops::thread_idx() < 32) Ops::tmem_dealloc(taddr, N, true);
  });
  return mismatches(D, A, B, 1.0);
}

static void test_umma() {
  for (bool bf16 : {true, false}) for (int majors = 0; majors < 4; ++majors) for (uint32_t N : {64u, 128u, 256u}) {
    const bool a_mn = majors & 1, b_mn = majors & 2;
    const auto r = umma_single(bf16, a_mn, b_mn, N, Fault::kNone);
    CHECK(r.first == 0 && r.second == 0, "UMMA %s A %s B %s N=%u: %d / %d mismatches (overwrite / accumulate)",
          bf16 ? "bf16" : "f16", a_mn ? "MN" : "K", b_mn ? "MN" : "K", N, r.first, r.second);
  }
  for (int majors = 0; majors < 4; ++majors) {
    const int bad = umma_pair(majors & 1, majors & 1, majors & 2, majors < 2 ? 128 : 256);
    CHECK(bad == 0, "pair UMMA majors=%d: %d mismatches", majors, bad);
  }
  // Planted faults: a wrong SBO reads the wrong rows; a stage overwritten before the
  // commit changes the answer (checked inside).
  for (bool a_mn : {false, true}) {
    const auto r = umma_single(true, a_mn, false, 128, Fault::kSboOff);
    CHECK(r.first > 1000, "a wrong A SBO (A %s) went undetected (%d mismatches)", a_mn ? "MN" : "K", r.first);
  }
  umma_single(false, false, true, 64, Fault::kOverwriteBeforeCommit);
  std::printf("PASS umma (single M=128 x 24, pair M=256 x 4, planted SBO fault detected)\n");
}

// ------------------------------------------------------------------------- TMEM rules
static void test_tmem_rules() {
  const emu::GridSpec one{1, 1, 64, 4096, 1};
  auto* s = +[] { return reinterpret_cast<uint32_t*>(Ops::dynamic_smem() + 1024); };
  // First fit over 32-column steps; warp 1 may read lanes 32..63.
  std::vector<uint32_t> got;
  emu::run_grid(one, [&] {
    if (Ops::thread_idx() < 32) {
      uint32_t* d = s();
      Ops::tmem_alloc(d, 128, false); const uint32_t a = d[0];
      Ops::tmem_alloc(d, 64, false); const uint32_t b = d[0];
      Ops::tmem_dealloc(a, 128, false);
      Ops::tmem_alloc(d, 32, false); const uint32_t c = d[0];
      Ops::tmem_alloc(d, 256, false); const uint32_t e = d[0];
      if (Ops::elect_one()) got = {a, b, c, e};
      Ops::tmem_relinquish(false);
    }
    Ops::sync_cta();
    if (Ops::thread_idx() >= 32) { uint32_t v[16]; Ops::tmem_load_32x32b_x16(32u << 16 | 128, v); }
    Ops::sync_cta();
    if (Ops::thread_idx() < 32) { Ops::tmem_dealloc(128, 64, false); Ops::tmem_dealloc(0, 32, false); Ops::tmem_dealloc(192, 256, false); }
  });
  CHECK((got == std::vector<uint32_t>{0, 128, 0, 192}), "first-fit addresses %u %u %u %u", got[0], got[1], got[2], got[3]);
  auto warp0_alloc = [&](uint32_t n) { if (Ops::thread_idx() < 32) Ops::tmem_alloc(s(), n, false); Ops::sync_cta(); };
  std::string m = fails_with(one, [&] { warp0_alloc(32); if (Ops::thread_idx() >= 32) { uint32_t v[16]; Ops::tmem_load_32x32b_x16(0, v); } });
  CHECK_FAILS(m, "tcgen05.ld: warp 1 may access TMEM lanes 32..63");
  m = fails_with(one, [&] { warp0_alloc(48); });
  CHECK_FAILS(m, "power of two");
  m = fails_with(one, [&] { warp0_alloc(32); if (Ops::thread_idx() < 32) { uint32_t v[16]; Ops::tmem_load_32x32b_x16(32, v); } });
  CHECK_FAILS(m, "TMEM column overlap/unallocated");
  m = fails_with(one, [&] {
    warp0_alloc(64);
    if (Ops::thread_idx() == 0) Ops::umma_f16(*s(), make_desc(0x400, 16, 1024), make_desc(0x400, 16, 1024), make_idesc(true, false, false, 128, 128), false, false);
  });
  CHECK_FAILS(m, "TMEM column overlap/unallocated");
  m = fails_with(one, [&] { if (Ops::thread_idx() < 32) { Ops::tmem_relinquish(false); Ops::tmem_alloc(s(), 32, false); } });
  CHECK_FAILS(m, "after tcgen05.relinquish_alloc_permit");
  m = fails_with(one, [&] { warp0_alloc(32); });
  CHECK_FAILS(m, "not deallocated before the CTA exited");
  m = fails_with(one, [&] { warp0_alloc(32); if (Ops::thread_idx() == 0) Ops::umma_commit_pair(reinterpret_cast<Bar*>(Ops::dynamic_smem()), 1); });
  CHECK_FAILS(m, ".cta_group::2 and ::1");
  m = fails_with(one, [&] { if (Ops::thread_idx() == 0) Ops::sync_warp(); else if (Ops::thread_idx() < 32) (void)Ops::elect_one(); });
  CHECK_FAILS(m, "different collectives");
  std::printf("PASS tmem_rules\n");
}

// ------------------------------------------------------------------------- CLC
static void test_clc() {
  const uint32_t kClusters = 12;
  std::vector<std::atomic<int>> seen(2 * kClusters);
  const emu::GridResult res = emu::run_grid(emu::GridSpec{kClusters, 2, 64, 1024, 3}, [&] {
    uint8_t* smem = Ops::dynamic_smem();
    auto* resp = reinterpret_cast<Ops::ClcResponse*>(smem);
    Bar* bar = reinterpret_cast<Bar*>(smem + 64);
    const uint32_t tid = Ops::thread_idx(), rank = Ops::cta_rank();
    if (tid == 0) { new (bar) Bar(); bar->init(1); seen[2 * Ops::cluster_idx() + rank]++; }
    for (uint32_t phase = 0;; phase ^= 1) {
      if (tid == 0) bar->arrive_expect_tx(16);
      Ops::cluster_sync();  // both barriers armed, the previous response consumed everywhere
      if (rank == 0 && tid == 0) Ops::clc_try_cancel(resp, bar, true);
      if (tid == 0) bar->wait(phase);
      Ops::sync_cta();
      uint32_t first = 0;
      if (!Ops::clc_decode(*resp, &first)) break;
      CHECK(first % 2 == 0 && first / 2 < kClusters, "CLC first CTA id %u", first);
      if (tid == 0) seen[first + rank]++;
    }
  });
  int wrong = 0;
  for (auto& s : seen) wrong += s.load() != 1;
  CHECK(wrong == 0, "CLC: %d (cluster, rank) work items not run exactly once", wrong);
  CHECK(res.launched + res.canceled == kClusters && res.launched >= 1 && res.launched <= 3,
        "CLC: launched %u canceled %u", res.launched, res.canceled);
  // Non-multicast, one CTA per cluster, all four resident: each CTA ends on "none".
  std::atomic<int> nones{0}, items{0};
  const emu::GridResult res2 = emu::run_grid(emu::GridSpec{4, 1, 1, 1024, 4}, [&] {
    auto* resp = reinterpret_cast<Ops::ClcResponse*>(Ops::dynamic_smem());
    Bar* bar = new (Ops::dynamic_smem() + 64) Bar();
    bar->init(1);
    items++;
    for (uint32_t phase = 0;; phase ^= 1) {
      bar->arrive_expect_tx(16);
      Ops::clc_try_cancel(resp, bar, false);
      bar->wait(phase);
      uint32_t first;
      if (!Ops::clc_decode(*resp, &first)) { nones++; break; }
      items++;
    }
  });
  CHECK(nones == int(res2.launched) && items == 4, "CLC non-multicast: %d nones (launched %u), %d items",
        nones.load(), res2.launched, items.load());
  const emu::GridSpec one{1, 1, 1, 1024, 1};
  std::string m = fails_with(one, [&] {
    auto* resp = reinterpret_cast<Ops::ClcResponse*>(Ops::dynamic_smem());
    Bar* bar = new (Ops::dynamic_smem() + 64) Bar();
    bar->init(1);
    uint32_t first;
    bar->arrive_expect_tx(16);
    Ops::clc_try_cancel(resp, bar, false);
    bar->wait(0);
    CHECK(!Ops::clc_decode(*resp, &first), "a single-cluster grid has nothing to cancel");
    Ops::clc_try_cancel(resp, bar, false);
  });
  CHECK_FAILS(m, "after this CTA observed a failed response");
  m = fails_with(one, [&] { uint32_t f; Ops::clc_decode(*reinterpret_cast<Ops::ClcResponse*>(Ops::dynamic_smem()), &f); });
  CHECK_FAILS(m, "decoded before try_cancel wrote it");
  std::printf("PASS clc (launched %u, canceled %u)\n", res.launched, res.canceled);
}

// ------------------------------------------------------------------------- hangs and aborts
static void test_hangs_and_aborts() {
  auto& timeout = jp::debug::host_wait_timeout_ms();
  const long long saved = timeout.load();
  timeout = 300;
  // A missing commit: the waiter's bounded wait reports it instead of hanging.
  const auto t0 = std::chrono::steady_clock::now();
  bool pipeline_error = false;
  std::string what;
  try {
    emu::run_grid(emu::GridSpec{1, 1, 32, 4096, 1}, [&] {
      uint8_t* smem = Ops::dynamic_smem();
      Bar* done = reinterpret_cast<Bar*>(smem + 2048);
      if (Ops::thread_idx() == 0) { new (done) Bar(); done->init(1); }
      Ops::tmem_alloc(reinterpret_cast<uint32_t*>(smem + 2048 + 64), 128, false);
      if (Ops::elect_one()) {
        Ops::umma_f16(0, make_desc(0x400, 16, 1024), make_desc(0x400, 16, 1024), make_idesc(true, false, false, 128, 128), false, false);
        done->wait(0, jp::WaitSite{"emu_test", "epilogue waits for the accumulator", 0});
      }
      Ops::sync_warp();
    });
  } catch (const jp::PipelineError& e) {
    what = e.what();
    pipeline_error = what.find("epilogue waits for the accumulator") != std::string::npos;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected: %s\n", e.what());
  }
  const double s1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(pipeline_error && s1 < 5.0, "missing commit: PipelineError %d after %.2f s: %s", int(pipeline_error), s1,
        what.c_str());
  // A thread that fails makes the others leave their runtime waits at once.
  timeout = 3000;
  const auto t1 = std::chrono::steady_clock::now();
  const std::string m = fails_with(emu::GridSpec{2, 2, 64, 1024, 2}, [&] {
    if (Ops::cluster_idx() == 1 && Ops::cta_rank() == 1 && Ops::thread_idx() == 37) throw std::runtime_error("planted failure");
    Ops::cluster_sync();
  });
  const double s2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  CHECK_FAILS(m, "planted failure");
  CHECK(s2 < 1.5, "abort took %.2f s (the bound is 3 s)", s2);
  // A runtime wait that nobody completes (a missing thread at a named barrier) is bounded.
  timeout = 300;
  const std::string m2 = fails_with(emu::GridSpec{1, 1, 64, 1024, 1}, [&] { if (Ops::thread_idx() < 32) Ops::named_sync(3, 64); });
  CHECK_FAILS(m2, "exceeded the debug wait bound");
  // A livelock (no wait ever runs out) is ended by the grid watchdog.
  emu::GridSpec spin{1, 1, 32, 1024, 1};
  spin.watchdog_ms = 300;
  const std::string m3 = fails_with(spin, [&] { for (;;) (void)Ops::thread_idx(); });
  CHECK_FAILS(m3, "ran past its watchdog");
  timeout = saved;
  std::printf("PASS hangs_and_aborts (missing commit reported after %.2f s, abort in %.2f s)\n", s1, s2);
}

// ------------------------------------------------------------------------- addresses
static void test_addresses() {
  std::atomic<int> ok{0};
  emu::run_grid(emu::GridSpec{1, 2, 32, 4096, 1}, [&] {
    uint8_t* smem = Ops::dynamic_smem();
    const uint32_t tid = Ops::thread_idx(), rank = Ops::cta_rank();
    CHECK(reinterpret_cast<uintptr_t>(smem) % 1024 == 0, "window not 1024-aligned");
    CHECK(Ops::smem_u32(smem) == 0x400 && Ops::smem_u32(smem + 100) == 0x464, "smem_u32");
    int local = 0;
    try { Ops::smem_u32(&local); } catch (const emu::ModelViolation&) { ok++; }
    try { Ops::smem_u32(smem + 4096); } catch (const emu::ModelViolation&) { ok++; }
    Bar* bar = reinterpret_cast<Bar*>(smem + 512);
    if (tid == 0) { new (bar) Bar(); bar->init(1); }
    Ops::cluster_sync();
    if (rank == 0 && tid == 0) {
      *Ops::peer(reinterpret_cast<uint32_t*>(smem + 256), 1) = 0xC0FFEEu;
      Ops::arrive_remote(bar, 1);
    }
    if (rank == 1 && tid == 0) {
      bar->wait(0);
      CHECK(*reinterpret_cast<uint32_t*>(smem + 256) == 0xC0FFEEu, "peer write not seen");
    }
    Ops::cluster_sync();
  });
  CHECK(ok == 128, "smem_u32 outside the window must throw (%d)", ok.load());
  std::printf("PASS addresses\n");
}

// -------------------------------------------------------- shfl.sync.bfly, red.global
// Two warps exchange across every lane bit (each lane must see its partner's value of
// that round, never a later one); 128 threads of two clusters add 1 .. 128 into one float
// (integer partial sums: exact in any order); a red on shared memory, a shuffle in a
// partial warp and a lane mask past 31 are model violations.
static void test_shfl_red() {
  Buf sum(sizeof(float));
  *sum.as<float>() = 0.f;
  emu::run_grid(emu::GridSpec{2, 1, 64, 1024, 2}, [&] {
    const uint32_t tid = Ops::thread_idx(), lane = tid % 32;
    for (uint32_t mask = 1; mask < 32; ++mask) {
      const float v = static_cast<float>(1000 * mask + 32 * (tid / 32) + lane);
      const float got = Ops::shfl_xor(v, mask);
      const float want = static_cast<float>(1000 * mask + 32 * (tid / 32) + (lane ^ mask));
      CHECK(got == want, "shfl_xor lane %u mask %u: %g, want %g", lane, mask, got, want);
    }
    Ops::red_add_f32(sum.as<float>(), static_cast<float>(tid + 1 + 64 * Ops::cluster_idx()));
  });
  CHECK(*sum.as<float>() == 8256.f, "red_add_f32 total %g, want 8256 (1 + ... + 128)", *sum.as<float>());
  const std::string on_smem = fails_with(emu::GridSpec{1, 1, 32, 1024, 1}, [] {
    Ops::red_add_f32(reinterpret_cast<float*>(Ops::dynamic_smem()), 1.f);
  });
  CHECK_FAILS(on_smem, "shared-memory address");
  const std::string partial = fails_with(emu::GridSpec{1, 1, 48, 1024, 1}, [] {
    if (Ops::thread_idx() >= 32) Ops::shfl_xor(1.f, 1);
  });
  CHECK_FAILS(partial, "partial warp");
  const std::string wide = fails_with(emu::GridSpec{1, 1, 32, 1024, 1}, [] { Ops::shfl_xor(1.f, 32); });
  CHECK_FAILS(wide, "lane mask past 31");
  std::printf("PASS shfl_xor (31 lane masks, 2 warps), red_add_f32 (128 threads, 2 clusters), misuse caught\n");
}

int main(int argc, char** argv) {
  uint64_t seed = 12345;
  for (int i = 1; i + 1 < argc; ++i) if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
  g_rng.seed(seed);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  jp::debug::host_wait_timeout_ms() = 3000;
  try {
    test_addresses();
    for (uint32_t e : {2u, 4u}) test_tma(e, 128);
    test_tma(2, 64);
    test_tma(4, 32);
    std::printf("PASS tma (2/4-byte, 128B/64B/32B swizzle, partial boxes, 3 batch entries)\n");
    test_umma();
    test_tmem_rules();
    test_clc();
    test_shfl_red();
    test_hangs_and_aborts();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    return 1;
  }
  if (g_failures.load() != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures.load());
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
