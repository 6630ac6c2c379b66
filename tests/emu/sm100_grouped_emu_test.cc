// The sm_100a M-grouped GEMM's own role functions
// (ffi/include/jax_sm100/kernels/sm100/grouped_gemm_roles.h) run on the CPU emulator
// (EmuOps): every case builds its launch with the same host plan the CUDA launcher uses
// (grouped_gemm_plan.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the clusters that are not resident) and compares out with a float64
// reference of ragged_dot's rule on fresh random data: out[r] = lhs[r] @ rhs[g(r)] for
// the rows of group g (sizes clamped at M, negative as 0), zeros for rows in no group.
//
//   sm100_grouped_emu_test [--seed S] [--quick] [--wait-ms MS]
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

#include "emu/emu_ops.h"
#include "emu/emu_driver.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_plan.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::fill_uniform;
using jax_sm100::emu::EmuOps;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k;
  std::vector<int32_t> sizes;
  bool trans_rhs;
  uint32_t resident;   ///< clusters the emulated GPU runs at once (the rest are stolen)
  int table_entries;   ///< 0: the config's group table; small: span > 1 lookups
};

template <class X>
double eps_of() {
  if constexpr (std::is_same_v<X, float>) return 1.0 / (1 << 22);
  else if constexpr (std::is_same_v<X, __half>) return 1.0 / (1 << 11);
  else return 1.0 / (1 << 8);
}

template <class Cfg, class T, class Out>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  std::vector<T> a, b;
  std::vector<Out> d(static_cast<size_t>(c.m * c.n));
  const auto ad = fill_uniform(a, static_cast<size_t>(c.m * c.k), rng);
  const auto bd = fill_uniform(b, static_cast<size_t>(g * c.k * c.n), rng);
  // out starts as a NaN pattern: any element the kernel fails to write shows.
  for (auto& x : d) x = static_cast<Out>(NAN);

  ks::GroupedShape sh;
  sh.lhs = a.data();
  sh.rhs = b.data();
  sh.group_sizes = c.sizes.data();
  sh.out = d.data();
  sh.out_bytes = sizeof(Out);
  sh.m = c.m, sh.n = c.n, sh.k = c.k, sh.g = g;
  sh.trans_rhs = c.trans_rhs;
  sh.group_m = 2;
  sh.table_entries = c.table_entries;
  std::string err;
  const ks::GroupedPlan plan = ks::plan_grouped<Cfg>(sh, &err);
  ks::GroupedGemmParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_grouped_params<EmuOps>(sh, plan, map, &params); });
  const std::string sizes = jax_sm100::emu::sizes_label(c.sizes);
  char label[320];
  std::snprintf(label, sizeof(label), "%-32s tile 128x%d %s->%s M=%lld N=%lld K=%lld G=%lld sizes [%s]%s",
                c.name, Cfg::kBlockN, jax_sm100::emu::type_name<T>(), jax_sm100::emu::type_name<Out>(), (long long)c.m, (long long)c.n,
                (long long)c.k, (long long)g, sizes.c_str(), c.trans_rhs ? " trans_rhs" : "");
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas;
  spec.cluster_size = 1;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = static_cast<uint32_t>(sizeof(ks::GemmStorage<Cfg, EmuOps>)) +
                    static_cast<uint32_t>(plan.order.table_size() * sizeof(jax_sm100::kernels::GroupTableEntry)) +
                    1024;
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::grouped_gemm_cta<Cfg, EmuOps, T, Out>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference of ragged_dot's rule: bounds of each group, clamped at M.
  std::vector<int64_t> lo(g), hi(g);
  int64_t start = 0;
  for (int64_t i = 0; i < g; ++i) {
    const int64_t s = c.sizes[i] > 0 ? c.sizes[i] : 0;
    lo[i] = start;
    start = std::min(start + s, c.m);
    hi[i] = start;
  }
  double max_err = 0, max_ref = 0;
  int64_t bad_first = -1, zero_rows = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    int64_t grp = -1;
    for (int64_t q = 0; q < g; ++q)
      if (lo[q] <= i && i < hi[q]) grp = q;
    if (grp < 0) ++zero_rows;
    const double* B = bd.data() + (grp < 0 ? 0 : grp) * c.k * c.n;
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = 0;
      if (grp >= 0)
        for (int64_t kk = 0; kk < c.k; ++kk)
          ref += ad[i * c.k + kk] * (c.trans_rhs ? B[j * c.k + kk] : B[kk * c.n + j]);
      const size_t idx = static_cast<size_t>(i * c.n + j);
      const double got = static_cast<double>(static_cast<float>(d[idx]));
      // Rows in no group must be exactly zero.
      const double e = std::isnan(got) ? INFINITY : (grp < 0 && got != 0.0 ? INFINITY : std::fabs(got - ref));
      if (e > max_err) max_err = e;
      if (std::fabs(ref) > max_ref) max_ref = std::fabs(ref);
      if (bad_first < 0 && !(e <= 1e30)) bad_first = static_cast<int64_t>(idx);
    }
  }
  const double tol = eps_of<Out>() * max_ref + 2e-7 * std::sqrt(static_cast<double>(c.k)) * max_ref + 1e-6;
  const bool ok = max_err <= tol;
  std::printf("%s %s: max|err| %.3g (tol %.3g), zero rows %lld, clusters launched %u, stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err, tol, (long long)zero_rows, res.launched, res.canceled);
  if (!ok && bad_first >= 0)
    std::printf("     first unwritten/NaN/nonzero-rest element at row %lld col %lld\n",
                (long long)(bad_first / c.n), (long long)(bad_first % c.n));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  using C128 = ks::GroupedGemmConfig<128>;
  using C256 = ks::GroupedGemmConfig<256>;
  using BF = __nv_bfloat16;
  using F16 = __half;
  bool ok = true;
  // name, m, n, k, sizes, trans_rhs, resident, table_entries
  // Uneven groups, an empty one, a group smaller than a tile, partial tiles in M, N, K,
  // fewer resident clusters than work items (CLC steals), both rhs layouts.
  ok &= run_case<C128, BF, BF>({"uneven+empty, CLC 1 resident", 330, 200, 136, {150, 0, 37, 143}, false, 1, 0}, rng);
  ok &= run_case<C128, F16, float>({"uneven+empty trans_rhs", 330, 200, 136, {150, 0, 37, 143}, true, 2, 0}, rng);
  ok &= run_case<C128, BF, F16>({"rows in no group (sum < M)", 300, 136, 72, {40, 100, 0, 25}, false, 2, 0}, rng);
  ok &= run_case<C256, BF, float>({"G=1, 256 wide", 200, 296, 96, {200}, true, 1, 0}, rng);
  ok &= run_case<C128, BF, BF>({"sizes past M clamped, negative", 260, 152, 64, {-5, 100, 400, 7}, true, 2, 0}, rng);
  ok &= run_case<C128, F16, F16>({"small table (span > 1)", 280, 144, 80, {3, 0, 60, 1, 0, 129, 2, 0, 40}, false, 2, 3}, rng);
  if (!quick) {
    ok &= run_case<C256, F16, BF>({"256 wide, sum < M, N-major", 400, 264, 200, {130, 1, 0, 128, 60}, false, 2, 0}, rng);
    ok &= run_case<C128, BF, float>({"all groups empty", 150, 136, 40, {0, 0, 0}, false, 1, 0}, rng);
    ok &= run_case<C256, BF, BF>({"G=1 partial, sum < M, trans_rhs", 190, 136, 16, {129}, true, 1, 0}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
