// The sm_100a activation-backward GEMM's own role functions (kernels/sm100/gemm_dact_roles.h,
// with gemm_roles.h's load and MMA roles and cta_skeleton.h's C loads and store) run on the
// CPU emulator (EmuOps): every case builds its launch with the host plan the CUDA launcher
// uses (gemm_dact_plan.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the clusters that are not resident) and compares d = alpha * A @ B *
// act'(c) element by element and dbias (the column sums of the unrounded d over every row
// and batch entry) column by column with a float64 reference on fresh random data.
//
//   sm100_gemm_dact_emu_test [--seed S] [--quick] [--wait-ms MS]
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
#include "jax_sm100/kernels/sm100/gemm_dact_plan.h"
#include "jax_sm100/kernels/sm100/gemm_dact_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::fill_uniform;
using jax_sm100::emu::unit_roundoff;
using jax_sm100::emu::EmuOps;
using jax_sm100::emu::act_name;
using jax_sm100::emu::dact64;
using jax_sm100::kernels::Activation;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  bool a_batched, b_batched, c_batched;
  bool dbias;
  float alpha;
  uint32_t resident;  ///< clusters the emulated GPU runs at once (the rest are stolen)
};

template <class Cfg, class T, Activation Act>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t ab = c.a_batched ? c.batch : 1, bb = c.b_batched ? c.batch : 1, cb = c.c_batched ? c.batch : 1;
  std::vector<T> a, b, z;
  const size_t out_elems = static_cast<size_t>(c.batch * c.m * c.n);
  std::vector<T> d(out_elems);
  const auto ad = fill_uniform(a, static_cast<size_t>(ab * c.m * c.k), rng);
  const auto bd = fill_uniform(b, static_cast<size_t>(bb * c.k * c.n), rng);
  // The pre-activation over (-3, 3): every activation's derivative varies there.
  const auto zd = fill_uniform(z, static_cast<size_t>(cb * c.m * c.n), rng, 3.f);
  // d starts as NaN: any element the kernel fails to write shows. dbias is zeroed, as the
  // handler does before the launch.
  for (auto& x : d) x = static_cast<T>(NAN);
  std::vector<float> dbias(c.dbias ? static_cast<size_t>(c.n) : 0, 0.f);

  ks::GemmShape g;
  g.a = a.data();
  g.b = b.data();
  g.c = z.data();
  g.d = d.data();
  g.in_bytes = 2;
  g.out_bytes = 2;
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
  g.a_batched = c.a_batched, g.b_batched = c.b_batched, g.c_batched = c.c_batched;
  g.trans_a = c.trans_a, g.trans_b = c.trans_b;
  g.alpha = c.alpha;
  g.group_m = 2;
  std::string err;
  ks::GemmPlan plan;
  ks::GemmDactParams<EmuOps> params{};
  err = jax_sm100::emu::make_emu_params([&](const auto& map) {
    return ks::make_gemm_dact_params<Cfg, EmuOps>(g, c.dbias ? dbias.data() : nullptr, map, &plan, &params);
  });
  char label[320];
  std::snprintf(label, sizeof(label), "%-30s tile %dx%d cluster %d %s %-9s%s M=%lld N=%lld K=%lld batch=%lld%s%s%s",
                c.name, Cfg::kBlockM * Cfg::kClusterM, Cfg::kBlockN, Cfg::kClusterM, jax_sm100::emu::type_name<T>(),
                act_name(Act), c.dbias ? " dbias" : " nodbias", (long long)c.m, (long long)c.n, (long long)c.k,
                (long long)c.batch, c.trans_a ? " trans_a" : "", c.trans_b ? " trans_b" : "",
                c.c_batched || c.batch == 1 ? "" : " c broadcast");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas / Cfg::kClusterM;
  spec.cluster_size = Cfg::kClusterM;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = ks::gemm_dact_smem_bytes<Cfg, EmuOps>();
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::gemm_dact_cta<Cfg, EmuOps, T, Act>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference. The kernel sums the K products in fp32 (exact products of 16-bit
  // inputs; the summation error grows ~ sqrt(K) of the sum of |terms|), evaluates act'(c)
  // in fp32 (a few ulps; |act'| <= 1.13 on (-3, 3)) and the product, rounds d once to T,
  // and sums the fp32 products of each column (error ~ rows x 2^-24 of their sum of |x|).
  const double fp32 = 1.0 / (1 << 24);
  std::vector<double> want_sum(static_cast<size_t>(c.n), 0.0), sum_tol(static_cast<size_t>(c.n), 0.0);
  double worst = 0, max_err_d = 0;
  int64_t bad_first = -1;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    const double* A = ad.data() + (c.a_batched ? bi : 0) * c.m * c.k;
    const double* B = bd.data() + (c.b_batched ? bi : 0) * c.k * c.n;
    const double* Z = zd.data() + (c.c_batched ? bi : 0) * c.m * c.n;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double x = c.trans_a ? A[kk * c.m + i] : A[i * c.k + kk];
          const double y = c.trans_b ? B[j * c.k + kk] : B[kk * c.n + j];
          acc += x * y;
          mag += std::fabs(x * y);
        }
        const double g1 = dact64(Act, Z[i * c.n + j]);
        const double want = c.alpha * acc * g1;
        const double x_err = 8 * std::sqrt(static_cast<double>(c.k)) * fp32 * std::fabs(c.alpha) * mag * 1.13 +
                             8 * fp32 * std::fabs(c.alpha * acc);
        want_sum[j] += want;
        sum_tol[j] += x_err + 2 * static_cast<double>(c.m * c.batch) * fp32 * std::fabs(want);
        const size_t idx = static_cast<size_t>((bi * c.m + i) * c.n + j);
        const double got = static_cast<double>(static_cast<float>(d[idx]));
        const double e = std::isnan(got) ? INFINITY : std::fabs(got - want);
        const double tol = unit_roundoff<T>() * std::fabs(want) + 1.2 * x_err + 1e-30;
        if (e > max_err_d) max_err_d = e;
        if (e / tol > worst) worst = e / tol;
        if (bad_first < 0 && !(e <= tol)) bad_first = static_cast<int64_t>(idx);
      }
    }
  }
  double max_err_sum = 0;
  int64_t bad_col = -1;
  for (int64_t j = 0; c.dbias && j < c.n; ++j) {
    const double got = dbias[static_cast<size_t>(j)];
    const double e = std::isnan(got) ? INFINITY : std::fabs(got - want_sum[static_cast<size_t>(j)]);
    const double tol = sum_tol[static_cast<size_t>(j)] + 1e-30;
    if (e > max_err_sum) max_err_sum = e;
    if (e / tol > worst) worst = e / tol;
    if (bad_col < 0 && !(e <= tol)) bad_col = j;
  }
  const bool ok = bad_first < 0 && bad_col < 0;
  std::printf("%s %s: max|err| d %.3g dbias %.3g, worst err/tol %.3g, clusters launched %u, stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err_d, max_err_sum, worst, res.launched, res.canceled);
  if (bad_first >= 0) {
    std::printf("     first bad element: d at batch %lld row %lld col %lld\n", (long long)(bad_first / (c.n * c.m)),
                (long long)((bad_first / c.n) % c.m), (long long)(bad_first % c.n));
  }
  if (bad_col >= 0) {
    std::printf("     first bad column sum: dbias[%lld] = %.6g, want %.6g\n", (long long)bad_col,
                dbias[static_cast<size_t>(bad_col)], want_sum[static_cast<size_t>(bad_col)]);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  using C256 = ks::GemmConfig<256, 1>;
  using Pair = ks::GemmConfig<256, 2>;
  using BF = __nv_bfloat16;
  using F16 = __half;
  using A = Activation;
  bool ok = true;
  // name, m, n, k, batch, trans_a, trans_b, a_batched, b_batched, c_batched, dbias, alpha, resident
  // Partial tiles in M, N and K; several work items per resident cluster (CLC steals).
  ok &= run_case<C256, BF, A::kGeluTanh>({"NN partial, CLC 1 resident", 200, 296, 200, 1, false, false, true, true, true, true, 1.f, 1}, rng);
  ok &= run_case<Pair, F16, A::kSilu>({"pair NT (odd M tiles), CLC", 296, 296, 152, 1, false, true, true, true, true, true, 1.f, 1}, rng);
  ok &= run_case<C256, BF, A::kRelu>({"TN batched", 136, 264, 96, 2, true, false, true, true, true, true, 1.f, 2}, rng);
  if (!quick) {
    ok &= run_case<C256, F16, A::kGeluErf>({"TT, no dbias", 136, 152, 72, 1, true, true, true, true, true, false, 1.f, 2}, rng);
    ok &= run_case<C256, BF, A::kSilu>({"NN alpha, broadcast c", 120, 296, 72, 3, false, false, true, true, false, true, 1.5f, 1}, rng);
    ok &= run_case<Pair, BF, A::kGeluErf>({"pair TN, broadcast A", 256, 264, 136, 2, true, false, false, true, true, true, 1.f, 1}, rng);
    ok &= run_case<Pair, F16, A::kRelu>({"pair TT, broadcast B", 200, 520, 64, 2, true, true, true, false, true, true, 1.f, 1}, rng);
    ok &= run_case<C256, F16, A::kGeluTanh>({"NT 2 resident, long K", 264, 136, 520, 1, false, true, true, true, true, true, 1.f, 2}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
