// The sm_100a GEMM's own role functions (ffi/include/jax_sm100/kernels/sm100/gemm_roles.h)
// run on the CPU emulator (EmuOps): every case builds its launch with the same host plan
// the CUDA launcher uses (gemm_plan.h), runs the grid (one host thread per CUDA thread,
// cluster launch control stealing the clusters that are not resident) and compares D with
// a float64 reference on fresh random data.
//
//   sm100_gemm_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu/emu_ops.h"
#include "emu/emu_driver.h"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "jax_sm100/kernels/sm100/gemm_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::fill_uniform;
using jax_sm100::emu::EmuOps;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  bool a_batched, b_batched;
  bool residual, c_batched;
  float alpha, beta;
  uint32_t resident;  ///< clusters the emulated GPU runs at once (the rest are stolen)
};

template <class X>
double eps_of() {
  if constexpr (std::is_same_v<X, float>) return 1.0 / (1 << 22);
  else if constexpr (std::is_same_v<X, __half>) return 1.0 / (1 << 11);
  else return 1.0 / (1 << 8);
}

template <class Cfg, class T, class Out>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t ab = c.a_batched ? c.batch : 1, bb = c.b_batched ? c.batch : 1;
  const int64_t cb = c.c_batched ? c.batch : 1;
  std::vector<T> a, b;
  std::vector<Out> cv, d(static_cast<size_t>(c.batch * c.m * c.n));
  const auto ad = fill_uniform(a, static_cast<size_t>(ab * c.m * c.k), rng);
  const auto bd = fill_uniform(b, static_cast<size_t>(bb * c.k * c.n), rng);
  std::vector<double> cd;
  if (c.residual) cd = fill_uniform(cv, static_cast<size_t>(cb * c.m * c.n), rng);
  // D starts as a NaN pattern: any element the kernel fails to write shows.
  for (auto& x : d) x = static_cast<Out>(NAN);

  ks::GemmShape g;
  g.a = a.data();
  g.b = b.data();
  g.c = c.residual ? cv.data() : nullptr;
  g.d = d.data();
  g.in_bytes = 2;
  g.out_bytes = sizeof(Out);
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
  g.a_batched = c.a_batched, g.b_batched = c.b_batched, g.c_batched = c.c_batched;
  g.trans_a = c.trans_a, g.trans_b = c.trans_b;
  g.alpha = c.alpha, g.beta = c.beta;
  g.group_m = 2;
  std::string err;
  const ks::GemmPlan plan = ks::plan_gemm<Cfg>(g, &err);
  ks::GemmParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_gemm_params<EmuOps>(g, plan, map, &params); });
  char label[256];
  std::snprintf(label, sizeof(label), "%-34s tile %dx%d cluster %d %s->%s M=%lld N=%lld K=%lld batch=%lld%s%s",
                c.name, Cfg::kBlockM * Cfg::kClusterM, Cfg::kBlockN, Cfg::kClusterM, jax_sm100::emu::type_name<T>(),
                jax_sm100::emu::type_name<Out>(), (long long)c.m, (long long)c.n, (long long)c.k, (long long)c.batch,
                c.trans_a ? " trans_a" : "", c.trans_b ? " trans_b" : "");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas / Cfg::kClusterM;
  spec.cluster_size = Cfg::kClusterM;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = static_cast<uint32_t>(sizeof(ks::GemmStorage<Cfg, EmuOps>)) + 1024;
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::gemm_cta<Cfg, EmuOps, T, Out>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference.
  double max_err = 0, max_ref = 0;
  int64_t bad_first = -1;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    const double* A = ad.data() + (c.a_batched ? bi : 0) * c.m * c.k;
    const double* B = bd.data() + (c.b_batched ? bi : 0) * c.k * c.n;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double x = c.trans_a ? A[kk * c.m + i] : A[i * c.k + kk];
          const double y = c.trans_b ? B[j * c.k + kk] : B[kk * c.n + j];
          acc += x * y;
        }
        double ref = c.alpha * acc;
        if (c.residual && c.beta != 0.f) ref += c.beta * cd[((c.c_batched ? bi : 0) * c.m + i) * c.n + j];
        const size_t idx = static_cast<size_t>((bi * c.m + i) * c.n + j);
        const double got = static_cast<double>(static_cast<float>(d[idx]));
        const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
        if (e > max_err) max_err = e;
        if (std::fabs(ref) > max_ref) max_ref = std::fabs(ref);
        if (bad_first < 0 && !(e <= 1e30)) bad_first = static_cast<int64_t>(idx);
      }
    }
  }
  // Inputs are exact in fp32 and so are their products; the error is the fp32 summation
  // (grows ~ sqrt(K)) plus one rounding to Out (half an ulp: eps_of is 2^-mantissa bits).
  const double tol = eps_of<Out>() * max_ref + 2e-7 * std::sqrt(static_cast<double>(c.k)) * max_ref + 1e-6;
  const bool ok = max_err <= tol;
  std::printf("%s %s: max|err| %.3g (tol %.3g), clusters launched %u, stolen by CLC %u\n", ok ? "ok  " : "FAIL",
              label, max_err, tol, res.launched, res.canceled);
  if (!ok && bad_first >= 0) std::printf("     first unwritten/NaN element at flat index %lld\n", (long long)bad_first);
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
  bool ok = true;
  // name, m, n, k, batch, trans_a, trans_b, a_batched, b_batched, residual, c_batched, alpha, beta, resident
  // Partial tiles in M, N and K; several work items per resident cluster (CLC steals).
  ok &= run_case<C128, BF, BF>({"NN partial, CLC 1 resident", 200, 296, 200, 1, false, false, true, true, false, false, 1.f, 0.f, 1}, rng);
  ok &= run_case<C128, F16, float>({"TN", 136, 152, 96, 1, true, false, true, true, false, false, 1.f, 0.f, 2}, rng);
  ok &= run_case<C128, BF, F16>({"NT", 136, 152, 96, 1, false, true, true, true, false, false, 1.f, 0.f, 2}, rng);
  ok &= run_case<C128, BF, BF>({"TT", 136, 152, 96, 1, true, true, true, true, false, false, 1.f, 0.f, 2}, rng);
  ok &= run_case<C256, BF, float>({"NN 256 wide", 144, 520, 160, 1, false, false, true, true, false, false, 1.f, 0.f, 1}, rng);
  ok &= run_case<C128, BF, float>({"residual, batched C, broadcast B", 152, 136, 80, 3, false, true, true, false, true, true, 1.5f, 0.5f, 2}, rng);
  ok &= run_case<Pair, BF, BF>({"pair NN (odd M tiles), CLC", 296, 296, 152, 1, false, false, true, true, false, false, 1.f, 0.f, 1}, rng);
  if (!quick) {
    ok &= run_case<C256, F16, F16>({"TT 256 wide, f16", 120, 296, 72, 1, true, true, true, true, false, false, 1.f, 0.f, 1}, rng);
    ok &= run_case<Pair, F16, float>({"pair TN, batched", 200, 264, 64, 2, true, false, true, true, false, false, 1.f, 0.f, 1}, rng);
    ok &= run_case<Pair, BF, BF>({"pair NT, broadcast A", 256, 256, 136, 2, false, true, false, true, false, false, 1.f, 0.f, 1}, rng);
    ok &= run_case<Pair, BF, float>({"pair TT, residual", 144, 200, 104, 1, true, true, true, true, true, false, 0.75f, -1.25f, 1}, rng);
    ok &= run_case<C256, BF, BF>({"residual broadcast C, 2 resident", 264, 296, 88, 2, false, false, true, true, true, false, 1.f, 2.f, 2}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
