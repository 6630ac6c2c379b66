// The sm_100a bias/activation GEMM's own role functions (kernels/sm100/gemm_bias_roles.h,
// with gemm_roles.h's load and MMA roles) run on the CPU emulator (EmuOps): every case
// builds its launch with the host plan the CUDA launcher uses (gemm_bias_plan.h), runs
// the grid (one host thread per CUDA thread, cluster launch control stealing the clusters
// that are not resident) and compares d = act(z) and pre = z, z = alpha * A @ B + bias,
// with a float64 reference on fresh random data, element by element.
//
//   sm100_gemm_bias_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// an unwritten element, a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu/activation_ref.h"
#include "emu/emu_driver.h"
#include "emu/emu_ops.h"
#include "jax_sm100/kernels/sm100/gemm_bias_plan.h"
#include "jax_sm100/kernels/sm100/gemm_bias_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::fill_uniform;
using jax_sm100::emu::unit_roundoff;
using jax_sm100::emu::EmuOps;
using jax_sm100::emu::act64;
using jax_sm100::emu::act_name;
using jax_sm100::kernels::Activation;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  bool a_batched, b_batched;
  bool bias, pre;
  float alpha;
  uint32_t resident;  ///< clusters the emulated GPU runs at once (the rest are stolen)
};

template <class Cfg, class T, class Out, Activation Act>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t ab = c.a_batched ? c.batch : 1, bb = c.b_batched ? c.batch : 1;
  std::vector<T> a, b;
  const size_t out_elems = static_cast<size_t>(c.batch * c.m * c.n);
  std::vector<Out> d(out_elems), pre(c.pre ? out_elems : 0);
  const auto ad = fill_uniform(a, static_cast<size_t>(ab * c.m * c.k), rng);
  const auto bd = fill_uniform(b, static_cast<size_t>(bb * c.k * c.n), rng);
  std::vector<float> bias(c.bias ? static_cast<size_t>(c.n) : 0);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : bias) x = u(rng);
  // d and pre start as NaN: any element the kernel fails to write shows.
  for (auto& x : d) x = static_cast<Out>(NAN);
  for (auto& x : pre) x = static_cast<Out>(NAN);

  ks::GemmShape g;
  g.a = a.data();
  g.b = b.data();
  g.d = d.data();
  g.in_bytes = 2;
  g.out_bytes = sizeof(Out);
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
  g.a_batched = c.a_batched, g.b_batched = c.b_batched;
  g.trans_a = c.trans_a, g.trans_b = c.trans_b;
  g.alpha = c.alpha;
  g.group_m = 2;
  ks::GemmBiasShape bs;
  bs.bias = c.bias ? bias.data() : nullptr;
  bs.pre = c.pre ? pre.data() : nullptr;
  std::string err;
  ks::GemmPlan plan;
  ks::GemmBiasParams<EmuOps> params{};
  err = jax_sm100::emu::make_emu_params(
      [&](const auto& map) { return ks::make_gemm_bias_params<Cfg, EmuOps>(g, bs, map, &plan, &params); });
  char label[320];
  std::snprintf(label, sizeof(label),
                "%-30s tile %dx%d cluster %d %s->%s %-9s%s%s M=%lld N=%lld K=%lld batch=%lld%s%s",
                c.name, Cfg::kBlockM * Cfg::kClusterM, Cfg::kBlockN, Cfg::kClusterM, jax_sm100::emu::type_name<T>(),
                jax_sm100::emu::type_name<Out>(), act_name(Act), c.bias ? " bias" : " nobias", c.pre ? " pre" : "",
                (long long)c.m, (long long)c.n, (long long)c.k, (long long)c.batch, c.trans_a ? " trans_a" : "",
                c.trans_b ? " trans_b" : "");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas / Cfg::kClusterM;
  spec.cluster_size = Cfg::kClusterM;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = ks::gemm_bias_smem_bytes<Cfg, EmuOps>();
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::gemm_bias_cta<Cfg, EmuOps, T, Out, Act>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference, element by element. The kernel sums the K products in fp32 (exact
  // products of 16-bit inputs; the summation error grows ~ sqrt(K) of the sum of |terms|),
  // evaluates z and act(z) in fp32 (|act'| <= 1.13) and rounds each once to Out.
  double worst = 0, max_err_d = 0, max_err_pre = 0;
  int64_t bad_first = -1;
  const char* bad_what = "";
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    const double* A = ad.data() + (c.a_batched ? bi : 0) * c.m * c.k;
    const double* B = bd.data() + (c.b_batched ? bi : 0) * c.k * c.n;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double x = c.trans_a ? A[kk * c.m + i] : A[i * c.k + kk];
          const double y = c.trans_b ? B[j * c.k + kk] : B[kk * c.n + j];
          acc += x * y;
          mag += std::fabs(x * y);
        }
        const double bj = c.bias ? static_cast<double>(bias[j]) : 0.0;
        const double z = c.alpha * acc + bj;
        const double want_d = act64(Act, z);
        const double fp32 = 1.0 / (1 << 24);
        const double z_err = 8 * std::sqrt(static_cast<double>(c.k)) * fp32 * (std::fabs(c.alpha) * mag + std::fabs(bj)) +
                             4 * fp32 * (std::fabs(z) + 1e-3);
        const size_t idx = static_cast<size_t>((bi * c.m + i) * c.n + j);
        auto check = [&](double got, double want, double tol, const char* what, double* max_err) {
          const double e = std::isnan(got) ? INFINITY : std::fabs(got - want);
          if (e > *max_err) *max_err = e;
          const double ratio = e / tol;
          if (ratio > worst) worst = ratio;
          if (bad_first < 0 && !(e <= tol)) {
            bad_first = static_cast<int64_t>(idx);
            bad_what = what;
          }
        };
        check(static_cast<double>(static_cast<float>(d[idx])), want_d,
              unit_roundoff<Out>() * std::fabs(want_d) + 1.2 * z_err + 1e-30, "d", &max_err_d);
        if (c.pre)
          check(static_cast<double>(static_cast<float>(pre[idx])), z,
                unit_roundoff<Out>() * std::fabs(z) + z_err + 1e-30, "pre", &max_err_pre);
      }
    }
  }
  const bool ok = bad_first < 0;
  std::printf("%s %s: max|err| d %.3g pre %.3g, worst err/tol %.3g, clusters launched %u, stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err_d, max_err_pre, worst, res.launched, res.canceled);
  if (!ok) {
    const int64_t col = bad_first % c.n, row = (bad_first / c.n) % c.m;
    std::printf("     first bad element: %s at batch %lld row %lld col %lld\n", bad_what,
                (long long)(bad_first / (c.n * c.m)), (long long)row, (long long)col);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  using C128 = ks::GemmConfig<128, 1>;
  using C256 = ks::GemmConfig<256, 1>;
  using Pair = ks::GemmConfig<256, 2>;
  using BF = __nv_bfloat16;
  using F16 = __half;
  using A = Activation;
  bool ok = true;
  // name, m, n, k, batch, trans_a, trans_b, a_batched, b_batched, bias, pre, alpha, resident
  // Partial tiles in M, N and K; several work items per resident cluster (CLC steals).
  ok &= run_case<C128, BF, BF, A::kGeluTanh>({"NN partial, CLC 1 resident", 200, 296, 200, 1, false, false, true, true, true, true, 1.f, 1}, rng);
  ok &= run_case<C256, BF, float, A::kGeluErf>({"NT 256 wide, f32 out", 144, 392, 136, 1, false, true, true, true, true, true, 1.f, 1}, rng);
  ok &= run_case<Pair, BF, BF, A::kSilu>({"pair NN (odd M tiles), CLC", 296, 296, 152, 1, false, false, true, true, true, true, 1.f, 1}, rng);
  ok &= run_case<C128, F16, F16, A::kNone>({"none: pre == d, batched", 136, 200, 96, 2, false, false, true, true, true, true, 1.f, 2}, rng);
  if (!quick) {
    ok &= run_case<C128, F16, float, A::kSilu>({"TN, no pre", 136, 152, 96, 1, true, false, true, true, true, false, 1.f, 2}, rng);
    ok &= run_case<C128, F16, F16, A::kRelu>({"TT, no bias", 136, 152, 72, 1, true, true, true, true, false, true, 1.f, 2}, rng);
    ok &= run_case<C256, BF, BF, A::kNone>({"no bias, no pre, alpha", 120, 296, 72, 1, true, true, true, true, false, false, 1.5f, 1}, rng);
    ok &= run_case<C256, F16, F16, A::kGeluTanh>({"broadcast B, no bias", 152, 264, 88, 3, false, true, true, false, false, true, 1.f, 2}, rng);
    ok &= run_case<Pair, F16, float, A::kRelu>({"pair TT, batched", 200, 264, 64, 2, true, true, true, true, true, true, 1.f, 1}, rng);
    ok &= run_case<Pair, BF, float, A::kGeluErf>({"pair TN, broadcast A, no pre", 256, 256, 136, 2, true, false, false, true, true, false, 1.f, 1}, rng);
    ok &= run_case<C128, BF, float, A::kGeluTanh>({"NN f32 out, 2 resident", 264, 136, 520, 1, false, false, true, true, true, true, 1.f, 2}, rng);
    ok &= run_case<C256, BF, BF, A::kRelu>({"NT, no pre", 200, 520, 64, 1, false, true, true, true, true, false, 1.f, 1}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
