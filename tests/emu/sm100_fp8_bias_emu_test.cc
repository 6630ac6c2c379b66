// The sm_100a FP8 bias/activation GEMM's own role functions (ffi/include/jax_sm100/
// kernels/sm100/fp8_bias_roles.h, over the FP8 GEMM's load, MMA and promotion in
// fp8_roles.h) run on the CPU emulator (EmuFp8Ops): every case builds its launch with the
// same host plan the CUDA launcher uses (fp8_plan.h, fp8_bias_plan.h), runs the grid (one
// host thread per CUDA thread, cluster launch control stealing the tiles that are not
// resident) and compares d = bf16(act(z)), z = the blockwise-scaled product + bias[col],
// with float64 on fresh random data, element by element.
//
//   sm100_fp8_bias_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "emu/activation_ref.h"
#include "emu/emu_driver.h"
#include "emu/emu_fp8_ops.h"
#include "emu/fp8_test_data.h"
#include "jax_sm100/kernels/sm100/fp8_bias_plan.h"
#include "jax_sm100/kernels/sm100/fp8_bias_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using EmuOps = jax_sm100::emu::EmuFp8Ops;
using jax_sm100::emu::random_e4m3;
using jax_sm100::emu::toolkit_e4m3;
using jax_sm100::emu::act64;
using jax_sm100::emu::act_name;
using jax_sm100::kernels::Activation;

namespace {

using Cfg = ks::Fp8GemmConfig;

struct Case {
  const char* name;
  int64_t m, n, k;
  bool bias;
  uint32_t resident;  ///< clusters the emulated GPU runs at once (the rest are stolen)
};

template <Activation Act>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t kb = (c.k + 127) / 128, nb = (c.n + 127) / 128, mp = (c.m + 3) / 4 * 4;
  const std::vector<uint8_t> a = random_e4m3(static_cast<size_t>(c.m * c.k), rng);
  const std::vector<uint8_t> b = random_e4m3(static_cast<size_t>(c.n * c.k), rng);
  // Scales 2^U(-7, -3): z of order one, where the activations differ most. a_scale_t's
  // pad columns are NaN (never read for a stored row).
  std::uniform_real_distribution<float> expo(-7.f, -3.f), unit(-2.f, 2.f);
  std::vector<float> sa(static_cast<size_t>(kb * mp), NAN), sb(static_cast<size_t>(nb * kb));
  for (int64_t q = 0; q < kb; ++q)
    for (int64_t i = 0; i < c.m; ++i) sa[q * mp + i] = std::exp2(expo(rng));
  for (auto& x : sb) x = std::exp2(expo(rng));
  // The bias: U(-2, 2), with NaN past n (a read past the end shows).
  std::vector<float> bias(static_cast<size_t>(c.n) + 8, NAN);
  for (int64_t j = 0; j < c.n; ++j) bias[j] = unit(rng);
  std::vector<__nv_bfloat16> d(static_cast<size_t>(c.m * c.n), __nv_bfloat16(NAN));

  ks::Fp8GemmShape g;
  g.a = a.data();
  g.a_scale_t = sa.data();
  g.b = b.data();
  g.b_scale = sb.data();
  g.d = d.data();
  g.m = c.m, g.n = c.n, g.k = c.k, g.mp = mp;
  g.group_m = 2;
  std::string err;
  const ks::Fp8GemmPlan plan = ks::plan_fp8_gemm(g, &err);
  ks::Fp8BiasParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params([&](const auto& map) {
      return ks::make_fp8_bias_params<EmuOps>(g, c.bias ? bias.data() : nullptr, plan, map, &params);
    });
  char label[200];
  std::snprintf(label, sizeof(label), "%-34s %-9s M=%lld N=%lld K=%lld%s", c.name, act_name(Act), (long long)c.m,
                (long long)c.n, (long long)c.k, c.bias ? " + bias" : "");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas;
  spec.cluster_size = 1;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = ks::fp8_bias_smem_bytes<Cfg, EmuOps>();
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::fp8_bias_gemm_cta<Cfg, EmuOps, Act>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  std::vector<double> ad(a.size()), bd(b.size());
  for (size_t i = 0; i < a.size(); ++i) ad[i] = toolkit_e4m3(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bd[i] = toolkit_e4m3(b[i]);
  double max_err = 0, worst = 0;
  int64_t bad_first = -1;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      const auto [acc, absterms] = jax_sm100::emu::scaled_block_dot(
          &ad[i * c.k], &bd[j * c.k], c.k,
          [&](int64_t q) { return double(sa[q * mp + i]) * double(sb[(j / 128) * kb + q]); });
      const double bj = c.bias ? double(bias[j]) : 0.0;
      const double z = acc + bj;
      const double want = act64(Act, z);
      const double got = static_cast<double>(static_cast<float>(d[i * c.n + j]));
      // One bf16 rounding of act(z) (half an ulp, at most 2^-8 relative; one ulp allowed) plus the
      // fp32 error of z (four UMMA roundings and one FFMA per K block, the bias add;
      // 2^-24 each, doubled) through act' (at most 1.13), plus the fp32 activation.
      const double fp32 = std::ldexp(1.0, -24);
      const double z_err = (5.0 * kb + 4) * 2 * fp32 * absterms + 2 * fp32 * (std::fabs(z) + std::fabs(bj));
      const double tol = std::ldexp(std::fabs(want), -7) + 1.13 * z_err + 4 * fp32 * (std::fabs(z) + 1e-3) + 1e-30;
      const double e = std::isnan(got) ? INFINITY : std::fabs(got - want);
      if (e > max_err) max_err = e;
      if (e / tol > worst) worst = e / tol;
      if (bad_first < 0 && !(e <= tol)) bad_first = i * c.n + j;
    }
  }
  const bool ok = bad_first < 0;
  std::printf("%s %s: max|err| %.3g, worst err/tol %.3g, tiles launched %u, stolen by CLC %u\n", ok ? "ok  " : "FAIL",
              label, max_err, worst, res.launched, res.canceled);
  if (!ok)
    std::printf("     first element over its tolerance (or NaN): row %lld, column %lld\n",
                (long long)(bad_first / c.n), (long long)(bad_first % c.n));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  std::mt19937 rng(args.seed);
  using A = Activation;
  bool ok = true;
  // name, m, n, k, bias, resident
  ok &= run_case<A::kGeluTanh>({"partial M, N, K tiles, CLC 1 resident", 200, 264, 336, true, 1}, rng);
  ok &= run_case<A::kSilu>({"3 N tiles, 2 resident", 136, 392, 272, true, 2}, rng);
  if (!args.quick) {
    ok &= run_case<A::kGeluErf>({"K = 16 (one partial K block)", 72, 136, 16, true, 2}, rng);
    ok &= run_case<A::kRelu>({"9 K blocks (rings wrap twice)", 136, 128, 1040, true, 1}, rng);
    ok &= run_case<A::kNone>({"bias only (the training form)", 150, 256, 208, true, 2}, rng);
    ok &= run_case<A::kGeluTanh>({"no bias", 96, 200, 144, false, 1}, rng);
    ok &= run_case<A::kNone>({"no bias, no activation", 130, 136, 128, false, 1}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
