// Hardware check of the shared-memory descriptor model (tests/emu/smem_desc_model.h) on
// sm_90a: the sm_100 emulator decodes tcgen05 descriptors with that model, and wgmma
// descriptors describe the same canonical layouts and swizzles (only the field encoding
// differs), so Hopper's tensor cores can confirm it.
//
// Each case puts one operand of wgmma.mma_async m64n128k16 f32.bf16.bf16 behind a
// descriptor over shared memory whose 2-byte slots all hold distinct bf16 values (a
// value read back names its byte), times a one-hot selector so D shows it element-wise:
//   B cases: A from registers (.RS), A(m, k) = [k == m % 16]: D(m, n) = B(n, m % 16);
//   A cases: B(n, k) = [k == n % 16] in shared memory (K-major, no swizzle: the first B
//            case's layout): D(m, n) = A(m, n % 16).
// The host decodes the descriptors the kernel used with the model, predicts D (exact:
// one non-zero product per sum) and requires an exact match. The required wrong models
// (XOR dropped, XOR of the offset only, LBO/SBO swapped) must predict another D and must
// not match; on a failure the program names the wrong models the hardware agrees with and
// the byte it read for the first mismatches.
//
// Usage: smem_desc_model_gpu [--host-only] [--simulate MODEL] [--only SUBSTRING]
//   --host-only  no CUDA calls: case table, descriptor round trips (decode_sm90,
//                decode_sm100, the project's sm_100 encoder), fragment maps, and a simulated
//                device (the model passes, each required wrong model fails).
//   --simulate   host-only full report against a device that follows MODEL.
// Prints a line per case and "ALL PASSED"; exit 0 pass, 1 failed check, 2 no sm_90 device
// or CUDA error. Build: nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O2
//   -I ffi/include -I tests tests/cuda/smem_desc_model_gpu.cu -o smem_desc_model_gpu
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "emu/smem_desc_model.h"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/sm100/umma_desc.h"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace {

namespace emu = jax_sm100::emu;
namespace ptx = jax_sm100::ptx;
using emu::Major;
using emu::SmemLayout;

constexpr int kM = 64, kN = 128, kK = 16, kElem = 2, kThreads = 128;
constexpr uint32_t kMaxImageBytes = 200 * 1024;  // shared-memory image, with room to align
constexpr uint16_t kOneBf16 = 0x3F80;

// ----------------------------------------------------------------- fragment maps

/// wgmma m64nNk16 register fragments: element i of thread t holds X(row, col). The bf16
/// A fragment (i < 8, col = k) and the f32 accumulator (i < N/2, col = n) share the map.
__host__ __device__ inline void frag_coord(int t, int i, int& row, int& col) {
  const int lane = t % 32;
  row = 16 * (t / 32) + lane / 4 + 8 * ((i / 2) % 2);
  col = 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
}

// ----------------------------------------------------------------- device side

/// wgmma m64n128k16 f32.bf16.bf16 with A from registers (.RS form), B from `desc_b`.
template <int kTransB>
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[64], const uint32_t (&a)[4],
                                                    uint64_t desc_b, int scale_d) {
#if JAX_SM100_SM90A_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
#else
  (void)d; (void)a; (void)desc_b; (void)scale_d;
  __trap();
#endif
}

struct ProbeArgs {
  const uint4* image;   ///< shared-memory image (operand, selector, guard), 16-byte units
  uint32_t image_bytes;
  uint64_t desc_a;      ///< start relative to the 1024-aligned image base (unused for .RS)
  uint64_t desc_b;
  float* d;             ///< kM x kN, row-major
  uint64_t* used;       ///< [2]: the descriptors wgmma was given (absolute start)
  uint32_t* info;       ///< [0]: image base (shared address), [1]: 1 if a start overflowed
};

/// Adds the image base to the descriptor's 14-bit start field; false if it would overflow.
__device__ __forceinline__ bool rebase(uint64_t& desc, uint32_t base) {
  const uint64_t start = (desc & 0x3FFFull) + (base >> 4);
  desc = (desc & ~0x3FFFull) | (start & 0x3FFFull);
  return start <= 0x3FFFull;
}

/// One warpgroup: copy the image into shared memory, one wgmma, write D.
/// kRegA: A is the identity selector in registers (B cases); otherwise A and B are both
/// read through descriptors (A cases, B = selector, K-major).
template <bool kRegA, int kTransA, int kTransB>
__global__ void __launch_bounds__(kThreads, 1) probe_kernel(ProbeArgs args) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;  // swizzle patterns repeat every 1024 B
  uint4* smem = reinterpret_cast<uint4*>(smem_raw + (base - raw));
  for (uint32_t i = threadIdx.x; i < args.image_bytes / 16; i += kThreads) smem[i] = args.image[i];
  ptx::fence_proxy_async_shared_cta();  // generic-proxy stores -> async-proxy (wgmma) reads
  __syncthreads();

  uint64_t da = args.desc_a, db = args.desc_b;
  const bool ok = rebase(da, base) && rebase(db, base);  // uniform across the CTA
  if (threadIdx.x == 0) args.used[0] = da, args.used[1] = db, args.info[0] = base, args.info[1] = !ok;
  if (!ok) return;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  if constexpr (kRegA) {
    uint32_t a[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      int m0, k0, m1, k1;
      frag_coord(threadIdx.x, 2 * r, m0, k0);
      frag_coord(threadIdx.x, 2 * r + 1, m1, k1);
      const uint32_t lo = (k0 == m0 % kK) ? kOneBf16 : 0u, hi = (k1 == m1 % kK) ? kOneBf16 : 0u;
      a[r] = lo | (hi << 16);
    }
    ptx::wgmma_fence();
    wgmma_rs_m64n128k16<kTransB>(acc, a, db, 0);
  } else {
    ptx::wgmma_fence();
    ptx::Wgmma<128, __nv_bfloat16, kTransA, kTransB>::mma(acc, da, db, 0);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < 64; ++i) ptx::fence_operand(acc[i]);
  int m, n;
#pragma unroll
  for (int i = 0; i < 64; ++i) frag_coord(threadIdx.x, i, m, n), args.d[m * kN + n] = acc[i];
}

// ----------------------------------------------------------------- encoders

/// This test's own encoder: start, LBO, SBO (>> 4, 14 bits each) and the swizzle span as
/// sm_90 codes it at [62,64) (1 = 128B, 2 = 64B, 3 = 32B) or sm_100 at [61,64) (2, 4, 6)
/// with the version field [46,48) = 1.
uint64_t encode(uint32_t start, uint32_t lbo, uint32_t sbo, uint32_t span, bool sm100) {
  const uint64_t code = span == 0 ? 0 : span == 128 ? 1 : span == 64 ? 2 : 3;
  return ((start >> 4) & 0x3FFFull) | (((lbo >> 4) & 0x3FFFull) << 16) | (((sbo >> 4) & 0x3FFFull) << 32) |
         (sm100 ? (1ull << 46) | ((2 * code) << 61) : code << 62);
}

ptx::UmmaSwizzle umma_swizzle(uint32_t span) {
  return span == 0 ? ptx::UmmaSwizzle::kNone : span == 128 ? ptx::UmmaSwizzle::k128B
         : span == 64 ? ptx::UmmaSwizzle::k64B : ptx::UmmaSwizzle::k32B;
}

// ----------------------------------------------------------------- cases

struct Case {
  const char* name;
  bool test_a;      ///< A read through its descriptor (B = selector); else B (A = identity)
  Major major;
  uint32_t swizzle;  ///< span in bytes: 0, 32, 64, 128
  uint32_t start, lbo, sbo;  ///< bytes; start relative to the 1024-aligned operand region
  uint32_t region;   ///< operand region bytes (multiple of 1024)
};

const Major K = Major::kK, MN = Major::kMN;
// B cases: N = 128 rows of B; A cases: M = 64 rows of A; K = 16 bf16 = 32 bytes.
// The "kernel" cases use the sm_90 GEMM's own values (K-major: start + 32*s, LBO 16,
// SBO 1024; MN-major: start + 2048*s, LBO 8192, SBO 1024, all 128B swizzle).
const Case kCases[] = {
    {"B K-major none lbo128 sbo256", false, K, 0, 0, 128, 256, 4096},
    {"B K-major none lbo2048 sbo128", false, K, 0, 0, 2048, 128, 4096},
    {"B K-major sw32 sbo256", false, K, 32, 0, 16, 256, 4096},
    {"B K-major sw64 sbo512 start+0", false, K, 64, 0, 16, 512, 8192},
    {"B K-major sw64 sbo512 start+32", false, K, 64, 32, 16, 512, 8192},
    {"B K-major sw128 sbo1024 start+0 (kernel)", false, K, 128, 0, 16, 1024, 16384},
    {"B K-major sw128 sbo1024 start+32 (kernel)", false, K, 128, 32, 16, 1024, 16384},
    {"B K-major sw128 sbo1024 start+64 (kernel)", false, K, 128, 64, 16, 1024, 16384},
    {"B K-major sw128 sbo1024 start+96 (kernel)", false, K, 128, 96, 16, 1024, 16384},
    {"B K-major sw128 sbo2048 start+32", false, K, 128, 32, 16, 2048, 32768},
    {"B K-major sw128 lbo-ignored(2064) start+64", false, K, 128, 64, 2064, 1024, 16384},
    {"B MN-major none lbo128 sbo256", false, MN, 0, 0, 128, 256, 4096},
    {"B MN-major none lbo2048 sbo128", false, MN, 0, 0, 2048, 128, 4096},
    {"B MN-major sw32 lbo256 sbo2048", false, MN, 32, 0, 256, 2048, 4096},
    {"B MN-major sw64 lbo512 sbo2048", false, MN, 64, 0, 512, 2048, 4096},
    {"B MN-major sw128 lbo2048 sbo1024", false, MN, 128, 0, 2048, 1024, 4096},
    {"B MN-major sw128 lbo8192 sbo1024 start+2048 (kernel)", false, MN, 128, 2048, 8192, 1024, 16384},
    {"A K-major none lbo128 sbo256", true, K, 0, 0, 128, 256, 2048},
    {"A K-major none lbo1024 sbo128", true, K, 0, 0, 1024, 128, 2048},
    {"A K-major sw32 sbo256", true, K, 32, 0, 16, 256, 2048},
    {"A K-major sw64 sbo512 start+32", true, K, 64, 32, 16, 512, 4096},
    {"A K-major sw128 sbo1024 start+0 (kernel)", true, K, 128, 0, 16, 1024, 8192},
    {"A K-major sw128 sbo1024 start+96 (kernel)", true, K, 128, 96, 16, 1024, 8192},
    {"A MN-major none lbo128 sbo256", true, MN, 0, 0, 128, 256, 2048},
    {"A MN-major sw32 lbo256 sbo1024", true, MN, 32, 0, 256, 1024, 2048},
    {"A MN-major sw64 lbo512 sbo1024", true, MN, 64, 0, 512, 1024, 2048},
    {"A MN-major sw128 lbo8192 sbo1024 start+2048 (kernel)", true, MN, 128, 2048, 8192, 1024, 4096},
};
// The selector B of the A cases: K-major, no swizzle, LBO 128, SBO 256 (as case 0).
constexpr uint32_t kSelLbo = 128, kSelSbo = 256, kSelBytes = 4096;

// Every operand slot j holds a distinct normal bf16: sign j&1, mantissa (j>>1)&127,
// biased exponent 64 + (j>>8); j < 32768 (64 KiB of operand).
uint16_t pattern_bits(uint32_t j) {
  return static_cast<uint16_t>(((j & 1u) << 15) | ((64u + (j >> 8)) << 7) | ((j >> 1) & 127u));
}
float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// The operand byte whose pattern value is `v`, or -1.
int64_t pattern_byte(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (u & 0xFFFFu) return -1;
  const uint32_t b = u >> 16, e = (b >> 7) & 0xFFu;
  if (e < 64 || e >= 192) return -1;
  return 2 * static_cast<int64_t>(((e - 64) << 8) | ((b & 127u) << 1) | (b >> 15));
}

// ----------------------------------------------------------------- models and prediction

/// An address function: the byte a model says holds element (mn, k); -1 if it has none.
using AddrFn = std::function<int64_t(const SmemLayout&, Major, uint32_t, uint32_t)>;
struct Model { std::string name; AddrFn addr; };

int64_t model_addr(const SmemLayout& l, Major major, uint32_t mn, uint32_t k) {
  try {
    return emu::element_address(l, major, mn, k, kElem);
  } catch (const std::exception&) {
    return -1;
  }
}

/// The model and the wrong models worth telling apart for a case of swizzle span S.
std::vector<Model> models_for(const Case& c) {
  std::vector<Model> v{{"model", model_addr}};
  const uint32_t S = c.swizzle;
  if (S) {
    v.push_back({"no-xor", [S](const SmemLayout& l, Major mj, uint32_t mn, uint32_t k) -> int64_t {
                   const int64_t a = model_addr(l, mj, mn, k);  // the XOR is an involution
                   return a < 0 ? a : emu::swizzle_address(static_cast<uint32_t>(a), S);
                 }});
    if (c.start % 1024)
      v.push_back({"xor-offset-only", [](const SmemLayout& l, Major mj, uint32_t mn, uint32_t k) -> int64_t {
                     SmemLayout l0 = l;
                     l0.start = l.start & ~1023u;  // swizzle from the atom, add the rest unswizzled
                     const int64_t a = model_addr(l0, mj, mn, k);
                     return a < 0 ? a : a + (l.start & 1023u);
                   }});
  }
  using L = SmemLayout;
  v.push_back({"lbo<->sbo", [](L l, Major j, uint32_t mn, uint32_t k) {
                 return std::swap(l.lbo, l.sbo), model_addr(l, j, mn, k); }});
  for (uint32_t o : {0u, 32u, 64u, 128u})
    if (o != S)
      v.push_back({"span" + std::to_string(o), [o](L l, Major j, uint32_t mn, uint32_t k) {
                     return l.swizzle = o, model_addr(l, j, mn, k); }});
  v.push_back({"other-major", [](const L& l, Major j, uint32_t mn, uint32_t k) {
                 return model_addr(l, j == K ? MN : K, mn, k); }});
  return v;
}

/// Shared-memory image of one case and the descriptors relative to its base.
struct Setup {
  std::vector<uint16_t> image;  // operand region, selector region (A cases) after it, guard
  uint64_t desc_a = 0, desc_b = 0;  // sm90, start relative to the image base
  uint64_t desc100 = 0;             // the tested operand's descriptor in sm_100 form
};

Setup make_setup(const Case& c) {
  Setup s;
  const uint32_t used = c.region + (c.test_a ? kSelBytes : 0);
  // Zeros after the operands, up to the furthest byte any listed model would read, so a
  // wrong layout on the device reads zeros instead of faulting (capped below 227 KiB).
  const uint64_t desc = encode(c.start, c.lbo, c.sbo, c.swizzle, false);
  int64_t top = used;
  for (const Model& m : models_for(c))
    for (uint32_t mn = 0; mn < static_cast<uint32_t>(c.test_a ? kM : kN); ++mn)
      for (uint32_t k = 0; k < kK; ++k) top = std::max(top, m.addr(emu::decode_sm90(desc), c.major, mn, k) + 2);
  s.image.assign(std::min<int64_t>((top + 4095) / 4096 * 4096, kMaxImageBytes) / 2, 0);
  for (uint32_t j = 0; j < c.region / 2; ++j) s.image[j] = pattern_bits(j);
  s.desc100 = encode(c.start, c.lbo, c.sbo, c.swizzle, true);
  if (c.test_a) {
    s.desc_a = desc;
    s.desc_b = encode(c.region, kSelLbo, kSelSbo, 0, false);
    const SmemLayout sel = emu::decode_sm90(s.desc_b);
    for (uint32_t n = 0; n < kN; ++n)
      s.image[emu::element_address(sel, K, n, n % kK, kElem) / 2] = kOneBf16;
  } else {
    s.desc_b = desc;
  }
  return s;
}

/// D predicted from the descriptors wgmma used (absolute start, image at `base`), with
/// `fn` for the tested operand and the model for the selector; NaN where an element
/// falls outside the image.
std::vector<double> predict(const Case& c, const Setup& s, uint64_t used_a, uint64_t used_b,
                            uint32_t base, const AddrFn& fn) {
  const int64_t image_bytes = static_cast<int64_t>(s.image.size()) * 2;
  auto value = [&](int64_t addr) -> double {
    const int64_t rel = addr - base;
    if (addr < 0 || rel < 0 || rel >= image_bytes || (rel & 1)) return NAN;
    return bf16_to_float(s.image[rel / 2]);
  };
  const SmemLayout la = emu::decode_sm90(used_a), lb = emu::decode_sm90(used_b);
  std::vector<double> A(kM * kK), B(kN * kK), D(kM * kN, 0.0);
  for (int m = 0; m < kM; ++m)
    for (int k = 0; k < kK; ++k)
      A[m * kK + k] = c.test_a ? value(fn(la, c.major, m, k)) : (k == m % kK ? 1.0 : 0.0);
  for (int n = 0; n < kN; ++n)
    for (int k = 0; k < kK; ++k)
      B[n * kK + k] = c.test_a ? value(model_addr(lb, K, n, k)) : value(fn(lb, c.major, n, k));
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n)
      for (int k = 0; k < kK; ++k) D[m * kN + n] += A[m * kK + k] * B[n * kK + k];
  return D;
}

struct Compare {
  int mismatches = 0;
  double max_abs_diff = 0.0;  // over the elements both sides have; inf if one is NaN
};
Compare compare(const std::vector<float>& hw, const std::vector<double>& pred) {
  Compare r;
  for (size_t i = 0; i < hw.size(); ++i) {
    const double diff = (std::isnan(pred[i]) || std::isnan(hw[i]))
                            ? INFINITY
                            : std::fabs(static_cast<double>(hw[i]) - pred[i]);
    if (diff != 0.0) ++r.mismatches;
    r.max_abs_diff = std::max(r.max_abs_diff, diff);
  }
  return r;
}

bool has(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// ----------------------------------------------------------------- static checks

int g_failures = 0;
#define HOST_CHECK(cond, ...) \
  do { if (!(cond)) { std::printf("  CHECK FAILED (%s): ", #cond); std::printf(__VA_ARGS__); \
                      std::printf("\n"); ++g_failures; } } while (0)

void check_fragment_maps() {  // each map must be a bijection onto its matrix
  std::vector<int> a_hits(kM * kK, 0), d_hits(kM * kN, 0);
  int row, col;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < 8; ++i) frag_coord(t, i, row, col), ++a_hits[row * kK + col];
    for (int i = 0; i < kN / 2; ++i) frag_coord(t, i, row, col), ++d_hits[row * kN + col];
  }
  for (int h : a_hits) HOST_CHECK(h == 1, "A fragment map is not a bijection onto 64x16");
  for (int h : d_hits) HOST_CHECK(h == 1, "D fragment map is not a bijection onto 64x128");
}

/// Descriptor round trips, addresses in range and distinct, wrong models distinguishable.
/// Returns the names of the wrong models that must not match.
std::vector<std::string> check_case(const Case& c, const Setup& s) {
  const int before = g_failures;
  const uint64_t desc = c.test_a ? s.desc_a : s.desc_b;
  const SmemLayout l90 = emu::decode_sm90(desc);
  HOST_CHECK(l90.start == c.start && l90.lbo == c.lbo && l90.sbo == c.sbo && l90.swizzle == c.swizzle,
             "%s: sm90 descriptor does not round-trip", c.name);
  bool same = false;
  try {
    const SmemLayout l100 = emu::decode_sm100(s.desc100);  // five uint32 fields, no padding
    same = std::memcmp(&l90, &l100, sizeof(SmemLayout)) == 0;
  } catch (const std::exception& e) {
    std::printf("  decode_sm100 threw: %s\n", e.what());
  }
  HOST_CHECK(same, "%s: sm90 and sm100 descriptors decode differently", c.name);
  HOST_CHECK(s.desc100 == ptx::make_umma_smem_desc(c.start, c.lbo, c.sbo, umma_swizzle(c.swizzle)),
             "%s: the project's sm_100 encoder disagrees with this test's", c.name);
  HOST_CHECK(c.region % 1024 == 0 && c.region <= 65536, "%s: bad region", c.name);

  const uint32_t rows = c.test_a ? kM : kN;
  std::vector<uint8_t> seen(c.region, 0);
  for (uint32_t mn = 0; mn < rows; ++mn)
    for (uint32_t k = 0; k < kK; ++k) {
      const int64_t a = model_addr(l90, c.major, mn, k);
      if (a < 0 || a >= c.region || (a & 1) || seen[a]) {
        HOST_CHECK(false, "%s: element (%u,%u) at byte %lld (out of range, odd or shared)", c.name, mn, k,
                   static_cast<long long>(a));
        return {};
      }
      seen[a] = 1;
    }
  for (uint32_t n = 0; c.test_a && n < kN; ++n)
    for (uint32_t k = 0; k < kK; ++k) {
      const int64_t a = model_addr(emu::decode_sm90(s.desc_b), K, n, k);
      HOST_CHECK(a >= c.region && a < c.region + kSelBytes, "%s: selector outside its region", c.name);
    }

  // Which strides does the model use here? (a stride is used if changing it moves an element)
  auto stride_used = [&](bool lbo) {
    SmemLayout l = l90;
    (lbo ? l.lbo : l.sbo) += 4096;
    for (uint32_t mn = 0; mn < rows; ++mn)
      for (uint32_t k = 0; k < kK; ++k)
        if (model_addr(l, c.major, mn, k) != model_addr(l90, c.major, mn, k)) return true;
    return false;
  };
  std::vector<std::string> required;
  if (c.swizzle) required.push_back("no-xor");
  if (c.swizzle && c.start % 1024) required.push_back("xor-offset-only");
  if (stride_used(true) && stride_used(false)) required.push_back("lbo<->sbo");
  if (!stride_used(false)) HOST_CHECK(false, "%s: SBO is not exercised", c.name);

  const std::vector<double> ref = predict(c, s, s.desc_a, s.desc_b, 0, model_addr);
  const std::vector<float> ref_f(ref.begin(), ref.end());  // exact: bf16 values and zeros
  HOST_CHECK(std::none_of(ref.begin(), ref.end(), [](double v) { return std::isnan(v); }),
             "%s: model prediction leaves the image", c.name);
  for (const Model& m : models_for(c)) {  // a wrong layout must read zeros, not fault
    int64_t top = 0;
    for (uint32_t mn = 0; mn < rows; ++mn)
      for (uint32_t k = 0; k < kK; ++k) top = std::max(top, m.addr(l90, c.major, mn, k));
    HOST_CHECK(top < static_cast<int64_t>(s.image.size() * 2), "%s: model '%s' reads byte %lld, past the image",
               c.name, m.name.c_str(), static_cast<long long>(top));
  }
  for (const Model& m : models_for(c))
    if (has(required, m.name))
      HOST_CHECK(compare(ref_f, predict(c, s, s.desc_a, s.desc_b, 0, m.addr)).mismatches > 0,
                 "%s: wrong model '%s' predicts the same D as the model", c.name, m.name.c_str());
  return g_failures == before ? required : std::vector<std::string>{};
}

// ----------------------------------------------------------------- report one case

/// Compares `hw` (D as read back) with the model and the wrong models; prints the case line.
bool report(const Case& c, const Setup& s, const std::vector<std::string>& required,
            const std::vector<float>& hw, uint64_t used_a, uint64_t used_b, uint32_t base, bool quiet) {
  const std::vector<double> ref = predict(c, s, used_a, used_b, base, model_addr);
  const Compare r = compare(hw, ref);
  std::string caught, agrees;
  bool wrong_matched = false;
  for (const Model& m : models_for(c)) {
    if (m.name == "model") continue;
    const std::vector<double> p = predict(c, s, used_a, used_b, base, m.addr);
    const bool matches = compare(hw, p).mismatches == 0;
    (matches ? agrees : caught) += " " + m.name;
    wrong_matched |= matches && has(required, m.name);
  }
  const bool pass = r.mismatches == 0 && !wrong_matched;
  if (quiet) return pass;
  std::printf("[%s] %-52s desc90=0x%016llx desc100=0x%016llx mismatches=%d/%d max_abs_diff=%g\n",
              pass ? "PASS" : "FAIL", c.name, static_cast<unsigned long long>(c.test_a ? used_a : used_b),
              static_cast<unsigned long long>(s.desc100), r.mismatches, kM * kN, r.max_abs_diff);
  std::printf("       wrong models that differ from the hardware:%s\n", caught.empty() ? " (none)" : caught.c_str());
  if (!agrees.empty())  // on a pass these are equivalent to the model for this case
    std::printf("       %s:%s\n", pass ? "models indistinguishable here" : "HARDWARE AGREES WITH", agrees.c_str());
  if (!pass) {
    const SmemLayout l = emu::decode_sm90(c.test_a ? used_a : used_b);
    int shown = 0;
    for (int m = 0; m < kM && shown < 8; ++m)
      for (int n = 0; n < kN && shown < 8; ++n) {
        const int i = m * kN + n;
        if (static_cast<double>(hw[i]) == ref[i]) continue;
        const uint32_t mn = c.test_a ? m : n, k = c.test_a ? n % kK : m % kK;
        const int64_t model_byte = model_addr(l, c.major, mn, k) - base;
        const int64_t hw_byte = pattern_byte(hw[i]);
        std::printf("       D(%d,%d) = %g: element (mn=%u, k=%u) read from byte %lld, model says byte %lld\n", m,
                    n, hw[i], mn, k, static_cast<long long>(hw_byte), static_cast<long long>(model_byte));
        ++shown;
      }
  }
  return pass;
}

// ----------------------------------------------------------------- GPU run

#define CUDA_CHECK(expr)                                                                          \
  do {                                                                                            \
    const cudaError_t err_ = (expr);                                                              \
    if (err_ != cudaSuccess)                                                                      \
      std::printf("CUDA ERROR %s at %s:%d (%s): %s\n", cudaGetErrorName(err_), __FILE__, __LINE__, \
                  #expr, cudaGetErrorString(err_)), std::exit(2);                                  \
  } while (0)

using KernelFn = void (*)(ProbeArgs);
KernelFn kernel_for(const Case& c) {
  if (c.test_a) return c.major == K ? probe_kernel<false, 0, 0> : probe_kernel<false, 1, 0>;
  return c.major == K ? probe_kernel<true, 0, 0> : probe_kernel<true, 0, 1>;
}

bool run_on_gpu(const Case& c, const Setup& s, const std::vector<std::string>& required) {
  // One allocation: image | D (kM*kN floats) | used descriptors (2 x u64) | info (2 x u32).
  const size_t bytes = s.image.size() * 2, d_off = bytes, used_off = d_off + kM * kN * 4,
               info_off = used_off + 16, total = info_off + 8;
  uint8_t* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, total));
  CUDA_CHECK(cudaMemset(dev, 0xFF, total));  // D reads NaN, info reads "unset" until written
  CUDA_CHECK(cudaMemcpy(dev, s.image.data(), bytes, cudaMemcpyHostToDevice));
  const KernelFn kernel = kernel_for(c);
  const uint32_t smem = static_cast<uint32_t>(bytes) + 1024;  // room to align the base to 1024
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const ProbeArgs args{reinterpret_cast<const uint4*>(dev), static_cast<uint32_t>(bytes), s.desc_a, s.desc_b,
                       reinterpret_cast<float*>(dev + d_off), reinterpret_cast<uint64_t*>(dev + used_off),
                       reinterpret_cast<uint32_t*>(dev + info_off)};
  kernel<<<1, kThreads, smem>>>(args);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> back(total - d_off);
  CUDA_CHECK(cudaMemcpy(back.data(), dev + d_off, back.size(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dev));
  std::vector<float> hw(kM * kN);
  uint64_t used[2];
  uint32_t info[2];
  std::memcpy(hw.data(), back.data(), hw.size() * 4), std::memcpy(used, back.data() + (used_off - d_off), 16);
  std::memcpy(info, back.data() + (info_off - d_off), 8);
  if (info[1] != 0 || info[0] % 1024 != 0) {
    std::printf("[FAIL] %s: image base 0x%x not usable (start overflow flag %u)\n", c.name, info[0], info[1]);
    return false;
  }
  return report(c, s, required, hw, used[0], used[1], info[0], false);
}

/// Host-only: a simulated device that reads the operand through `fn` (image base at
/// 3 KiB, so the rebasing is exercised); returns whether the case passes against it.
bool simulated_run(const Case& c, const Setup& s, const std::vector<std::string>& required, const AddrFn& fn,
                   bool quiet) {
  const uint32_t base = 3 * 1024;
  const uint64_t used_a = s.desc_a + (c.test_a ? base >> 4 : 0), used_b = s.desc_b + (base >> 4);
  const std::vector<double> p = predict(c, s, used_a, used_b, base, fn);
  return report(c, s, required, std::vector<float>(p.begin(), p.end()), used_a, used_b, base, quiet);
}

}  // namespace

int main(int argc, char** argv) {
  bool host_only = false;
  std::string only, simulate;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--host-only")) {
      host_only = true;
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--simulate") && i + 1 < argc) {
      simulate = argv[++i];
      host_only = true;
    } else {
      std::printf("usage: %s [--host-only] [--simulate MODEL] [--only SUBSTRING]\n", argv[0]);
      return 1;
    }
  }
  std::printf("shared-memory descriptor model vs wgmma (m64n128k16 bf16), %s\n",
              host_only ? "host-only checks" : "sm_90a device");
  check_fragment_maps();
  if (!host_only) {
    int count = 0, dev = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      std::printf("NO CUDA DEVICE (%s)\n", e == cudaSuccess ? "count 0" : cudaGetErrorString(e));
      return 2;
    }
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    std::printf("device %d: %s, compute capability %d.%d\n", dev, prop.name, prop.major, prop.minor);
    if (prop.major != 9 || prop.minor != 0) {
      std::printf("NO SM90 DEVICE: wgmma needs compute capability 9.0\n");
      return 2;
    }
  }

  int total = 0, passed = 0;
  for (const Case& c : kCases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    ++total;
    const int before = g_failures;
    const Setup s = make_setup(c);
    const std::vector<std::string> required = check_case(c, s);
    bool ok = g_failures == before;
    if (!ok) {
      std::printf("[FAIL] %s: case table check failed\n", c.name);
    } else if (!simulate.empty()) {  // full report against a device that follows one model
      bool found = false;
      for (const Model& m : models_for(c))
        if (m.name == simulate) ok = simulated_run(c, s, required, m.addr, false), found = true;
      if (!found) std::printf("[FAIL] %s: no model '%s' here\n", c.name, simulate.c_str()), ok = false;
    } else if (host_only) {
      // The model as the simulated truth must pass; each required wrong model must fail.
      ok = simulated_run(c, s, required, model_addr, true);
      HOST_CHECK(ok, "%s: the model does not pass against itself", c.name);
      std::string req;
      for (const Model& m : models_for(c))
        if (has(required, m.name)) {
          const bool p = simulated_run(c, s, required, m.addr, true);
          HOST_CHECK(!p, "%s: a device that follows '%s' would pass", c.name, m.name.c_str());
          ok = ok && !p, req += " " + m.name;
        }
      std::printf("[%s] %-52s desc90=0x%016llx desc100=0x%016llx image=%zu must-catch:%s\n",
                  ok ? "PASS" : "FAIL", c.name, static_cast<unsigned long long>(c.test_a ? s.desc_a : s.desc_b),
                  static_cast<unsigned long long>(s.desc100), s.image.size() * 2, req.c_str());
    } else {
      ok = run_on_gpu(c, s, required);
    }
    passed += ok ? 1 : 0;
  }
  const bool all = passed == total && g_failures == 0 && total > 0;
  std::printf("SUMMARY cases=%d passed=%d failed=%d\n", total, passed, total - passed);
  if (all) std::printf(host_only ? "HOST CHECKS PASSED\n" : "ALL PASSED\n");
  return all ? 0 : 1;
}
