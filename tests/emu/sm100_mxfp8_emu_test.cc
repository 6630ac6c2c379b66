// The sm_100a MXFP8 GEMM's own role functions (kernels/sm100/mx_gemm_roles.h, with the
// bf16 GEMM's scheduler and epilogue roles they reuse) run on the CPU emulator
// (EmuMxOps, tests/emu/emu_mx_ops.h): every case builds its launch with the host plan
// the CUDA launcher uses (mx_gemm_plan.h), tiles the scales as the Python layer does
// (mx_scale_layout.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the CTAs that are not resident) and compares D with a float64
// reference of the dequantized operands on fresh random data.
//
//   sm100_mxfp8_emu_test [--seed S] [--quick] [--wait-ms MS]   the kernel cases
//   sm100_mxfp8_emu_test --primitives [--seed S]               the modelled instructions
//   sm100_mxfp8_emu_test --decoders                            e4m3 / e5m2 / e8m0 tables
// prints one line per case and "ALL PASSED", exit code 1 on any failure.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu/emu_mx_ops.h"
#include "emu/emu_driver.h"
#include "jax_sm100/kernels/sm100/mx_gemm_plan.h"
#include "jax_sm100/kernels/sm100/mx_gemm_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::unit_roundoff;
namespace emu = jax_sm100::emu;
namespace ptx = jax_sm100::ptx;
using emu::EmuMxOps;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k;
  bool a_e5m2, b_e5m2;
  int scale_spread;      ///< scale codes in center +- spread
  uint32_t resident;     ///< CTAs the emulated GPU runs at once (the rest are stolen)
  int nan_a_row = -1, nan_a_block = -1;  ///< a NaN (0xFF) scale of a at (row, K block)
  int nan_b_row = -1, nan_b_block = -1;
  int scale_center = 127;
  double max_abs = 1e9;  ///< elements of larger magnitude are not drawn (the f16 range)
};

/// The spacing of X's subnormals: the absolute rounding error near zero (unit_roundoff
/// is relative and vanishes there).
template <class X>
double subnormal_step() {
  if constexpr (std::is_same_v<X, float>) return std::ldexp(1.0, -149);
  else if constexpr (std::is_same_v<X, __half>) return std::ldexp(1.0, -24);
  else return std::ldexp(1.0, -133);
}

/// Random element codes of a format: finite (no NaN, no infinity), |value| <= max_abs.
std::vector<uint8_t> random_elements(size_t n, bool e5m2, double max_abs, std::mt19937& rng) {
  std::uniform_int_distribution<int> u(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    double val;
    do {
      x = static_cast<uint8_t>(u(rng));
      val = e5m2 ? emu::mx::e5m2_value(x) : emu::mx::e4m3_value(x);
    } while (!std::isfinite(val) || std::fabs(val) > max_abs);
  }
  return v;
}

/// The op's (rows, ceil(k/32)) scale codes -> the tiled layout (padding: code 127).
std::vector<uint8_t> tile_scales(const std::vector<uint8_t>& s, int64_t rows, int64_t k) {
  const int64_t kbs = (k + 31) / 32, rt = ks::mx_scale_row_tiles(rows);
  std::vector<uint8_t> t(static_cast<size_t>(ks::mx_scale_tiled_bytes(rows, k)), 127);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kb = 0; kb < kbs; ++kb) t[ks::mx_scale_tiled_offset(r, kb, rt)] = s[r * kbs + kb];
  return t;
}

template <class Cfg, class Out>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t kbs = (c.k + 31) / 32;
  std::vector<uint8_t> a = random_elements(size_t(c.m * c.k), c.a_e5m2, c.max_abs, rng);
  std::vector<uint8_t> b = random_elements(size_t(c.n * c.k), c.b_e5m2, c.max_abs, rng);
  std::uniform_int_distribution<int> us(c.scale_center - c.scale_spread, c.scale_center + c.scale_spread);
  std::vector<uint8_t> sa(size_t(c.m * kbs)), sb(size_t(c.n * kbs));
  for (auto& x : sa) x = static_cast<uint8_t>(us(rng));
  for (auto& x : sb) x = static_cast<uint8_t>(us(rng));
  if (c.nan_a_row >= 0) sa[c.nan_a_row * kbs + c.nan_a_block] = 0xff;
  if (c.nan_b_row >= 0) sb[c.nan_b_row * kbs + c.nan_b_block] = 0xff;
  // Global buffers 16-byte aligned, as XLA's are.
  std::vector<uint8_t> ta = tile_scales(sa, c.m, c.k), tb = tile_scales(sb, c.n, c.k);
  std::vector<Out> d(size_t(c.m * c.n), static_cast<Out>(NAN));  // unwritten elements show as NaN

  ks::MxGemmShape g;
  g.a = a.data();
  g.b = b.data();
  g.sfa = ta.data();
  g.sfb = tb.data();
  g.d = d.data();
  g.a_fmt = c.a_e5m2 ? ptx::MxFormat::kE5M2 : ptx::MxFormat::kE4M3;
  g.b_fmt = c.b_e5m2 ? ptx::MxFormat::kE5M2 : ptx::MxFormat::kE4M3;
  g.out_bytes = sizeof(Out);
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.group_m = 2;
  std::string err;
  const ks::MxGemmPlan plan = ks::plan_mx_gemm<Cfg>(g, &err);
  ks::MxGemmParams<EmuMxOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_mx_gemm_params<EmuMxOps>(g, plan, map, &params); });
  char label[256];
  std::snprintf(label, sizeof(label), "%-30s tile 128x%d %s x %s -> %s M=%lld N=%lld K=%lld", c.name, Cfg::kBlockN,
                c.a_e5m2 ? "e5m2" : "e4m3", c.b_e5m2 ? "e5m2" : "e4m3", jax_sm100::emu::type_name<Out>(), (long long)c.m,
                (long long)c.n, (long long)c.k);
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }
  emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas;
  spec.cluster_size = 1;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = static_cast<uint32_t>(sizeof(ks::GemmStorage<Cfg, EmuMxOps>)) + 1024;
  spec.max_resident_clusters = c.resident;
  emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuMxOps>, EmuMxOps>(
        spec, [&](auto& s) { ks::mx_gemm_cta<Cfg, EmuMxOps, Out>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference of the dequantized operands; per element, the tolerance is the
  // final rounding plus one fp32 rounding per 32-element block of the accumulation.
  auto elem = [](uint8_t x, bool e5m2) { return e5m2 ? emu::mx::e5m2_value(x) : emu::mx::e4m3_value(x); };
  double max_ratio = 0, max_err = 0;
  int64_t bad = -1, nan_mismatch = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = 0, absum = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double s = emu::mx::e8m0_value(sa[i * kbs + kk / 32]) * emu::mx::e8m0_value(sb[j * kbs + kk / 32]);
        const double p = elem(a[i * c.k + kk], c.a_e5m2) * elem(b[j * c.k + kk], c.b_e5m2) * s;
        ref += p;
        absum += std::fabs(p);
      }
      const double got = static_cast<double>(static_cast<float>(d[size_t(i * c.n + j)]));
      if (std::isnan(ref) || std::isnan(got)) {
        if (std::isnan(ref) != std::isnan(got)) {
          ++nan_mismatch;
          if (bad < 0) bad = i * c.n + j;
        }
        continue;
      }
      const double tol = 2 * unit_roundoff<Out>() * std::fabs(ref) +
                         (double(kbs) + 1) * std::ldexp(absum, -23) + subnormal_step<Out>();
      const double e = std::fabs(got - ref);
      if (e / tol > max_ratio) max_ratio = e / tol, max_err = e;
      if (e > tol && bad < 0) bad = i * c.n + j;
    }
  }
  const bool nan_case = c.nan_a_row >= 0 || c.nan_b_row >= 0;
  const bool ok = bad < 0 && nan_mismatch == 0;
  std::printf("%s %s: max err / tol %.3g (max|err| %.3g)%s, CTAs launched %u, stolen by CLC %u\n", ok ? "ok  " : "FAIL",
              label, max_ratio, max_err, nan_case ? ", NaN scales propagate" : "", res.launched, res.canceled);
  if (!ok) std::printf("     first wrong element at flat index %lld, %lld NaN mismatches\n", (long long)bad,
                       (long long)nan_mismatch);
  return ok;
}

// ------------------------------------------------------------------------------------
// Primitives: the modelled instructions against the PTX ISA's statements.
// ------------------------------------------------------------------------------------
int g_prim_failures = 0;
#define PCHECK(cond, ...)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      if (g_prim_failures++ < 20) {                                             \
        std::printf("FAIL primitive %s:%d: %s | ", __FILE__, __LINE__, #cond);  \
        std::printf(__VA_ARGS__);                                               \
        std::printf("\n");                                                      \
      }                                                                         \
    }                                                                           \
  } while (0)

template <class F>
std::string grid_error(uint32_t threads, F fn) {
  emu::GridSpec g;
  g.threads_per_cta = threads;
  g.smem_bytes = 8192;
  try {
    emu::run_grid(g, fn);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void primitives(std::mt19937& rng) {
  // Instruction descriptor: the kernel's encoder, decoded field by field.
  for (uint32_t fa = 0; fa < 2; ++fa)
    for (uint32_t fb = 0; fb < 2; ++fb)
      for (uint32_t id = 0; id < 4; ++id) {
        const uint32_t n = fa ? 256 : 128;
        const auto d = emu::mx::decode_idesc_mx(ptx::make_umma_idesc_mx(ptx::MxFormat(fa), ptx::MxFormat(fb), 128, n,
                                                                         id, 3 - id));
        PCHECK(d.a_fmt == fa && d.b_fmt == fb && d.m == 128 && d.n == n && d.a_sf_id == id && d.b_sf_id == 3 - id &&
                   d.a_major == emu::Major::kK && d.b_major == emu::Major::kK && !d.negate_a && !d.negate_b,
               "idesc fields");
      }
  const uint32_t good = ptx::make_umma_idesc_mx(ptx::MxFormat::kE4M3, ptx::MxFormat::kE4M3, 128, 128, 0, 0);
  for (uint32_t bit : {23u, 2u, 24u, 31u, 7u + 1u}) {  // scale type cleared, sparsity, reserved, format 2
    bool threw = false;
    try {
      emu::mx::decode_idesc_mx(good ^ (1u << bit));
    } catch (const std::exception&) {
      threw = true;
    }
    PCHECK(threw, "idesc with bit %u flipped must be refused", bit);
  }

  // tcgen05.cp.32x128b.warpx4: a 512-byte chunk of distinct bytes, copied into columns
  // 4..7 of a 32-column allocation, read back with tcgen05.ld by the four warps.
  std::vector<uint8_t> chunk(512);
  for (auto& x : chunk) x = static_cast<uint8_t>(rng());
  std::vector<uint32_t> seen(128 * 16, 0xdeadbeefu);
  std::string err = grid_error(128, [&] {
    using Ops = EmuMxOps;
    uint8_t* smem = Ops::dynamic_smem();
    auto* slot = reinterpret_cast<uint32_t*>(smem);
    auto* bar = reinterpret_cast<Ops::Barrier*>(smem + 64);
    uint8_t* src = smem + 1024;
    const uint32_t t = Ops::thread_idx();
    if (t < 32) Ops::tmem_alloc(slot, 32, false);
    if (t == 0) {
      bar->init(1);
      std::memcpy(src, chunk.data(), 512);
    }
    Ops::sync_cta();
    if (t == 0) {
      Ops::tmem_cp_32x128b_warpx4(*slot + 4, ptx::make_mx_scale_desc(Ops::smem_u32(src)));
      Ops::umma_commit(bar);
    }
    bar->wait(0);
    uint32_t v[16];
    Ops::tmem_load_32x32b_x16(*slot + ((t / 32 * 32) << 16), v);
    for (int c = 0; c < 16; ++c) seen[t * 16 + c] = v[c];
    Ops::sync_cta();
    if (t < 32) {
      Ops::tmem_relinquish(false);
      Ops::tmem_dealloc(*slot, 32, false);
    }
  });
  PCHECK(err.empty(), "cp grid failed: %s", err.c_str());
  for (uint32_t lane = 0; lane < 128 && err.empty(); ++lane) {
    for (uint32_t c = 0; c < 4; ++c) {
      uint32_t want;
      std::memcpy(&want, &chunk[(lane % 32) * 16 + c * 4], 4);  // row lane % 32, bytes 4c..4c+3
      PCHECK(seen[lane * 16 + 4 + c] == want, "cp: lane %u column %u", lane, 4 + c);
    }
    // The chunk layout the kernel writes (mx_scale_chunk_offset) lands where the UMMA
    // model reads row r's scale for scale ID j: lane r % 32 (every partition), column r / 32.
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t r = 32 * (lane % 4) + lane % 32;  // one row per (lane, column) pair
      const uint32_t cell = seen[lane * 16 + 4 + r / 32];
      PCHECK(uint8_t(cell >> (8 * j)) == chunk[ptx::mx_scale_chunk_offset(r, j)], "chunk layout r %u j %u", r, j);
    }
  }

  // The copy is strict about its operands.
  auto cp_error = [&](uint32_t taddr_off, bool lane) {
    return grid_error(32, [&] {
      using Ops = EmuMxOps;
      uint8_t* smem = Ops::dynamic_smem();
      auto* slot = reinterpret_cast<uint32_t*>(smem);
      Ops::tmem_alloc(slot, 32, false);
      if (Ops::thread_idx() == 0)
        Ops::tmem_cp_32x128b_warpx4(*slot + taddr_off + (lane ? (1u << 16) : 0u), ptx::make_mx_scale_desc(Ops::smem_u32(smem + 1024)));
    });
  };
  PCHECK(cp_error(0, true).find("lane field") != std::string::npos, "cp lane field");
  PCHECK(cp_error(30, false).find("TMEM column overlap/unallocated") != std::string::npos, "cp columns");

  // The UMMA reads each lane partition's own copy of the scales: with B's scales written
  // to partition 0 only (as a copy without warpx4 would leave them), rows 32..127 must
  // see zero codes (2^-127), not partition 0's.
  std::vector<float> rows(128, NAN);
  err = grid_error(32, [&] {
    using Ops = EmuMxOps;
    uint8_t* smem = Ops::dynamic_smem();
    auto* slot = reinterpret_cast<uint32_t*>(smem);
    auto* bar = reinterpret_cast<Ops::Barrier*>(smem + 64);
    uint8_t* a = smem + 1024;  // 128 rows x 32 K, K-major, no swizzle (4096 bytes)
    uint8_t* b = smem + 1024 + 4096;
    Ops::tmem_alloc(slot, 64, false);
    if (Ops::thread_idx() == 0) {
      bar->init(1);
      // Canonical K-major no-swizzle layout: 8x16-byte core matrices, LBO 128 (K), SBO 256 (M).
      for (uint32_t m = 0; m < 128; ++m)
        for (uint32_t k = 0; k < 32; ++k) a[(m / 8) * 256 + (m % 8) * 16 + (k / 16) * 128 + k % 16] = 0x38;  // 1.0
      for (uint32_t n = 0; n < 16; ++n)
        for (uint32_t k = 0; k < 32; ++k) b[(n / 8) * 256 + (n % 8) * 16 + (k / 16) * 128 + k % 16] = 0x38;
      auto& tm = emu::detail::ctx().cta->tmem;
      for (uint32_t lane = 0; lane < 128; ++lane)
        for (uint32_t c = 0; c < 4; ++c) tm.cell(lane, 16 + c) = 0x7f7f7f7fu;  // A scales: 1.0 everywhere
      for (uint32_t lane = 0; lane < 32; ++lane) tm.cell(lane, 20) = 0x80808080u;  // B scales: 2.0, partition 0
      const uint32_t idesc = ptx::make_umma_idesc_mx(ptx::MxFormat::kE4M3, ptx::MxFormat::kE4M3, 128, 16, 0, 0);
      Ops::umma_mx(*slot, ptx::make_umma_smem_desc(Ops::smem_u32(a), 128, 256, ptx::UmmaSwizzle::kNone),
                   ptx::make_umma_smem_desc(Ops::smem_u32(b), 128, 256, ptx::UmmaSwizzle::kNone), idesc, *slot + 16,
                   *slot + 20, false);
      Ops::umma_commit(bar);
      for (uint32_t m = 0; m < 128; ++m) std::memcpy(&rows[m], &tm.cell(m, 3), 4);
    }
    Ops::sync_warp();
    Ops::tmem_relinquish(false);
    Ops::tmem_dealloc(*slot, 64, false);
  });
  PCHECK(err.empty(), "mma grid failed: %s", err.c_str());
  for (uint32_t m = 0; m < 128 && err.empty(); ++m) {
    const double want = m < 32 ? 64.0 : 32.0 * std::ldexp(1.0, -127);  // 32 products of 1, times the B scale
    PCHECK(double(rows[m]) == double(static_cast<float>(want)), "row %u: got %g want %g", m, rows[m], want);
  }

  // Bulk copies: alignment and size rules.
  auto bulk_error = [&](uint32_t soff, uint32_t goff, uint32_t bytes) {
    alignas(64) static uint8_t gmem[1024];
    return grid_error(32, [&] {
      using Ops = EmuMxOps;
      uint8_t* smem = Ops::dynamic_smem();
      auto* bar = reinterpret_cast<Ops::Barrier*>(smem);
      if (Ops::thread_idx() == 0) {
        bar->init(1);
        bar->arrive_expect_tx(bytes);
        Ops::bulk_load(smem + 1024 + soff, gmem + goff, bytes, bar);
      }
    });
  };
  PCHECK(bulk_error(0, 0, 512).empty(), "aligned bulk copy refused");
  PCHECK(bulk_error(8, 0, 512).find("16-byte aligned") != std::string::npos, "smem misaligned bulk copy");
  PCHECK(bulk_error(0, 4, 512).find("16-byte aligned") != std::string::npos, "gmem misaligned bulk copy");
  PCHECK(bulk_error(0, 0, 40).find("multiple of 16") != std::string::npos, "odd-size bulk copy");
  std::printf("%s primitives: instruction descriptor, tcgen05.cp layout and multicast, partition-local scale "
              "reads, bulk-copy rules\n", g_prim_failures ? "FAIL" : "ok  ");
}

void print_decoders() {
  for (int i = 0; i < 256; ++i)
    std::printf("%d %a %a %a\n", i, emu::mx::e4m3_value(uint8_t(i)), emu::mx::e5m2_value(uint8_t(i)),
                emu::mx::e8m0_value(uint8_t(i)));
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t seed = 12345;
  bool quick = false, prims = false;
  long long wait_ms = 20000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--primitives")) prims = true;
    else if (!std::strcmp(argv[i], "--wait-ms") && i + 1 < argc) wait_ms = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--decoders")) {
      print_decoders();
      return 0;
    }
  }
  std::printf("seed %u\n", seed);
  jax_sm100::pipeline::debug::host_wait_timeout_ms() = wait_ms;
  jax_sm100::pipeline::debug::unreleased_handler() = [](const char* pipe, const char* handle, uint32_t stage) {
    std::fprintf(stderr, "note: pipeline '%s': %s for stage %u left unreleased by a failing thread\n", pipe, handle,
                 stage);
  };
  std::mt19937 rng(seed);
  if (prims) {
    primitives(rng);
    std::printf(g_prim_failures ? "SOME FAILED\n" : "ALL PASSED\n");
    return g_prim_failures ? 1 : 0;
  }
  using C128 = ks::MxGemmConfig<128>;
  using C256 = ks::MxGemmConfig<256>;
  using BF = __nv_bfloat16;
  bool ok = true;
  // name, m, n, k, a_e5m2, b_e5m2, scale spread, resident
  // Partial tiles in M and N, K not a multiple of 128 (and of 32), more K stages than
  // pipeline stages, CLC stealing.
  ok &= run_case<C128, BF>({"partial tiles, K%128!=0, CLC", 200, 296, 208, false, false, 8, 1}, rng);
  ok &= run_case<C256, float>({"256 wide, K < 128, mixed", 136, 264, 96, true, false, 8, 2}, rng);
  ok &= run_case<C128, __half>({"K stages wrap the ring", 72, 136, 656, false, true, 3, 2, -1, -1, -1, -1, 122, 8.0},
                               rng);
  if (!quick) {
    ok &= run_case<C256, BF>({"256 wide, e5m2, 5 K stages", 264, 520, 528, true, true, 10, 1}, rng);
    ok &= run_case<C128, float>({"NaN scales (a row, b column)", 130, 144, 160, false, false, 6, 2, 5, 2, 77, 4},
                                rng);
    ok &= run_case<C256, __half>({"single tile, K = 16", 40, 24, 16, false, true, 3, 1, -1, -1, -1, -1, 124, 64.0},
                                 rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
