// The sm_100a blockwise FP8 GEMM's own role functions (ffi/include/jax_sm100/kernels/
// sm100/fp8_roles.h) run on the CPU emulator (EmuFp8Ops: EmuOps plus kind::f8f6f4,
// emu_fp8_ops.h): every case builds its launch with the same host plan the CUDA launcher
// uses (fp8_plan.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the tiles that are not resident) and compares D with a float64
// reference of the dequantized inputs on fresh random data.
//
// First, the emulator's e4m3 / e5m2 decoding is checked code by code against the CUDA
// toolkit's own conversions (cuda_fp8.h), so the reference and the emulated tensor core
// do not share a decoder.
//
//   sm100_fp8_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu/emu_fp8_ops.h"
#include "emu/emu_driver.h"
#include "emu/fp8_test_data.h"
#include "jax_sm100/kernels/sm100/fp8_plan.h"
#include "jax_sm100/kernels/sm100/fp8_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using EmuOps = jax_sm100::emu::EmuFp8Ops;  // EmuOps + umma_f8f6f4
using jax_sm100::emu::random_e4m3;
using jax_sm100::emu::toolkit_e4m3;
using jax_sm100::emu::toolkit_e5m2;

namespace {

using Cfg = ks::Fp8GemmConfig;

struct Case {
  const char* name;
  int64_t m, n, k;
  bool residual;
  float beta;
  bool c_nan;         ///< C all NaN (with beta == 0 it must not be read)
  uint32_t resident;  ///< clusters the emulated GPU runs at once (the rest are stolen)
};

bool check_decoder() {
  int bad = 0;
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const double want[2] = {toolkit_e4m3(code), toolkit_e5m2(code)};
    for (uint32_t fmt = 0; fmt < 2; ++fmt) {
      const double got = jax_sm100::emu::fp8_bits_to_float(code, fmt);
      const bool same = (std::isnan(got) && std::isnan(want[fmt])) || got == want[fmt];
      if (!same && bad++ < 5)
        std::printf("FAIL decoder: %s code 0x%02x: emulator %g, cuda_fp8.h %g\n", fmt ? "e5m2" : "e4m3", c, got,
                    want[fmt]);
    }
  }
  std::printf("%s e4m3/e5m2 decoding: 2 x 256 codes against cuda_fp8.h\n", bad ? "FAIL" : "ok  ");
  return bad == 0;
}

bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t kb = (c.k + 127) / 128, nb = (c.n + 127) / 128, mp = (c.m + 3) / 4 * 4;
  const std::vector<uint8_t> a = random_e4m3(static_cast<size_t>(c.m * c.k), rng);
  const std::vector<uint8_t> b = random_e4m3(static_cast<size_t>(c.n * c.k), rng);
  // Scales 2^U(-3, 3): every K block and N block weighs differently. a_scale_t's pad
  // columns (rows m..mp-1 of the output, never stored) are NaN.
  std::uniform_real_distribution<float> expo(-3.f, 3.f), unit(-1.f, 1.f);
  std::vector<float> sa(static_cast<size_t>(kb * mp), NAN), sb(static_cast<size_t>(nb * kb));
  for (int64_t q = 0; q < kb; ++q)
    for (int64_t i = 0; i < c.m; ++i) sa[q * mp + i] = std::exp2(expo(rng));
  for (auto& x : sb) x = std::exp2(expo(rng));
  std::vector<__nv_bfloat16> cv, d(static_cast<size_t>(c.m * c.n), __nv_bfloat16(NAN));
  if (c.residual) {
    cv.resize(static_cast<size_t>(c.m * c.n));
    for (auto& x : cv) x = c.c_nan ? __nv_bfloat16(NAN) : __nv_bfloat16(8.f * unit(rng));
  }

  ks::Fp8GemmShape g;
  g.a = a.data();
  g.a_scale_t = sa.data();
  g.b = b.data();
  g.b_scale = sb.data();
  g.c = c.residual ? cv.data() : nullptr;
  g.d = d.data();
  g.m = c.m, g.n = c.n, g.k = c.k, g.mp = mp;
  g.beta = c.beta;
  g.group_m = 2;
  std::string err;
  const ks::Fp8GemmPlan plan = ks::plan_fp8_gemm(g, &err);
  ks::Fp8GemmParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_fp8_gemm_params<EmuOps>(g, plan, map, &params); });
  char label[200];
  std::snprintf(label, sizeof(label), "%-40s M=%lld N=%lld K=%lld (%lld K blocks)%s", c.name, (long long)c.m,
                (long long)c.n, (long long)c.k, (long long)kb,
                c.residual ? (c.c_nan ? " residual beta=0, C NaN" : " residual") : "");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas;
  spec.cluster_size = 1;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = static_cast<uint32_t>(sizeof(ks::GemmStorage<Cfg, EmuOps>)) + 1024;
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::fp8_gemm_cta<Cfg, EmuOps>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference of the dequantized inputs; per element, the sum of |terms| bounds
  // the accumulation error.
  double max_err = 0, worst_ratio = 0, sxy = 0, sxx_yy = 0;
  int64_t bad_first = -1;
  std::vector<double> ad(a.size()), bd(b.size());
  for (size_t i = 0; i < a.size(); ++i) ad[i] = toolkit_e4m3(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bd[i] = toolkit_e4m3(b[i]);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      auto [ref, absterms] = jax_sm100::emu::scaled_block_dot(
          &ad[i * c.k], &bd[j * c.k], c.k,
          [&](int64_t q) { return double(sa[q * mp + i]) * double(sb[(j / 128) * kb + q]); });
      if (c.residual && c.beta != 0.f) {
        const double cterm = double(c.beta) * double(static_cast<float>(cv[i * c.n + j]));
        ref += cterm;
        absterms += std::fabs(cterm);
      }
      const double got = static_cast<double>(static_cast<float>(d[i * c.n + j]));
      // One bf16 rounding (half an ulp, at most 2^-8 relative; one ulp allowed) plus the
      // fp32 sums: four UMMA roundings and one FFMA per K block (2^-24 each, doubled).
      const double tol = std::ldexp(std::fabs(ref), -7) + (5.0 * kb + 4) * std::ldexp(absterms, -23) + 1e-30;
      const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
      if (e > max_err) max_err = e;
      if (e / tol > worst_ratio) worst_ratio = e / tol;
      if (bad_first < 0 && !(e <= tol)) bad_first = i * c.n + j;
      if (std::isfinite(got)) {
        sxy += got * ref;
        sxx_yy += got * got + ref * ref;
      }
    }
  }
  // DeepGEMM's calc_diff (DESIGN.md): 1 - 2 sum(x y) / sum(x^2 + y^2), float64.
  const double calc_diff = sxx_yy > 0 ? 1.0 - 2.0 * sxy / sxx_yy : 0.0;
  const bool ok = bad_first < 0 && calc_diff < 1e-3;
  std::printf("%s %s: max|err| %.3g, worst err/tol %.3g, calc_diff %.2e, tiles launched %u, stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err, worst_ratio, calc_diff, res.launched, res.canceled);
  if (bad_first >= 0) {
    std::printf("     first element over its tolerance (or NaN): row %lld, column %lld\n",
                (long long)(bad_first / c.n), (long long)(bad_first % c.n));
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  bool ok = check_decoder();
  // name, m, n, k, residual, beta, c_nan, resident
  ok &= run_case({"partial M, N, K tiles, CLC 1 resident", 200, 264, 336, false, 0.f, false, 1}, rng);
  ok &= run_case({"residual, partial tiles, 2 resident", 150, 200, 272, true, 0.5f, false, 2}, rng);
  if (!quick) {
    ok &= run_case({"K = 16 (one partial K block)", 72, 136, 16, false, 0.f, false, 2}, rng);
    ok &= run_case({"whole tiles, K blocks = TMEM stages", 256, 256, 512, false, 0.f, false, 2}, rng);
    ok &= run_case({"9 K blocks (rings wrap twice)", 136, 128, 1040, false, 0.f, false, 1}, rng);
    ok &= run_case({"residual beta = 0 (C unread)", 130, 136, 128, true, 0.f, true, 1}, rng);
    ok &= run_case({"residual, negative beta, 1 resident", 96, 392, 208, true, -1.25f, false, 1}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
