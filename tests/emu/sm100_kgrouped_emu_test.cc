// The sm_100a K-grouped GEMM's own role functions
// (ffi/include/jax_sm100/kernels/sm100/kgrouped_gemm_roles.h) run on the CPU emulator
// (EmuOps): every case builds its launch with the same host plan the CUDA launcher uses
// (kgrouped_gemm_plan.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the clusters that are not resident) and compares out with a float64
// reference of ragged_dot's weight gradient on fresh random data: out[g] = lhs[rows g]^T @
// dy[rows g] (sizes clamped at M, negative as 0), zeros for an empty group. The rows in
// no group (past sum(sizes)) hold NaN in both operands: a group's last block reads them,
// so a NaN in out shows a tail row that was not zeroed or a slice that was issued.
//
//   sm100_kgrouped_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// an unwritten element, a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu/emu_ops.h"
#include "emu/emu_driver.h"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_plan.h"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::emu::EmuOps;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k;
  std::vector<int32_t> sizes;
  uint32_t resident;   ///< clusters the emulated GPU runs at once (the rest are stolen)
  int table_entries;   ///< 0: the config's group table; small: span > 1 lookups
};

template <class X>
double eps_of() {
  if constexpr (std::is_same_v<X, float>) return 1.0 / (1 << 22);
  else if constexpr (std::is_same_v<X, __half>) return 1.0 / (1 << 10);
  else return 1.0 / (1 << 7);
}

template <class Cfg, class T, class Out>
bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  // Group bounds (ragged_dot's rule), clamped at M.
  std::vector<int64_t> lo(g), hi(g);
  int64_t start = 0;
  for (int64_t i = 0; i < g; ++i) {
    lo[i] = start;
    start = std::min(start + std::max<int64_t>(c.sizes[i], 0), c.m);
    hi[i] = start;
  }
  const int64_t used = start;  // rows past it are in no group: NaN in both operands
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> a(static_cast<size_t>(c.m * c.k)), b(static_cast<size_t>(c.m * c.n));
  std::vector<double> ad(a.size()), bd(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(static_cast<int64_t>(i) / c.k >= used ? NAN : u(rng));
    ad[i] = static_cast<double>(static_cast<float>(a[i]));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = static_cast<T>(static_cast<int64_t>(i) / c.n >= used ? NAN : u(rng));
    bd[i] = static_cast<double>(static_cast<float>(b[i]));
  }
  std::vector<Out> d(static_cast<size_t>(g * c.k * c.n), static_cast<Out>(NAN));

  ks::KGroupedShape sh;
  sh.lhs = a.data();
  sh.dy = b.data();
  sh.group_sizes = c.sizes.data();
  sh.out = d.data();
  sh.out_bytes = sizeof(Out);
  sh.m = c.m, sh.n = c.n, sh.k = c.k, sh.g = g;
  sh.group_m = 2;
  sh.table_entries = c.table_entries;
  std::string err;
  const ks::KGroupedPlan plan = ks::plan_kgrouped<Cfg>(sh, &err);
  ks::KGroupedGemmParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_kgrouped_params<EmuOps>(sh, plan, map, &params); });
  const std::string sizes = jax_sm100::emu::sizes_label(c.sizes);
  char label[320];
  std::snprintf(label, sizeof(label), "%-30s tile 128x%d %s->%s M=%lld N=%lld K=%lld G=%lld sizes [%s]", c.name,
                Cfg::kBlockN, jax_sm100::emu::type_name<T>(), jax_sm100::emu::type_name<Out>(), (long long)c.m, (long long)c.n, (long long)c.k,
                (long long)g, sizes.c_str());
  if (!err.empty()) {
    std::printf("FAIL %s: plan: %s\n", label, err.c_str());
    return false;
  }

  jax_sm100::emu::GridSpec spec;
  spec.num_clusters = plan.grid_ctas;
  spec.cluster_size = 1;
  spec.threads_per_cta = Cfg::kThreads;
  spec.smem_bytes = static_cast<uint32_t>(sizeof(ks::GemmStorage<Cfg, EmuOps>)) + Cfg::kExtraBytes + 1024;
  spec.max_resident_clusters = c.resident;
  jax_sm100::emu::GridResult res{};
  try {
    res = jax_sm100::emu::run_kernel_grid<ks::GemmStorage<Cfg, EmuOps>, EmuOps>(
        spec, [&](auto& s) { ks::kgrouped_gemm_cta<Cfg, EmuOps, T, Out>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  double max_err = 0, max_ref = 0;
  int64_t bad_first = -1, empty_groups = 0, tail_groups = 0;
  for (int64_t q = 0; q < g; ++q) {
    if (hi[q] == lo[q]) ++empty_groups;
    if ((hi[q] - lo[q]) % 16 != 0) ++tail_groups;
    for (int64_t i = 0; i < c.k; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0;
        for (int64_t r = lo[q]; r < hi[q]; ++r) ref += ad[r * c.k + i] * bd[r * c.n + j];
        const size_t idx = static_cast<size_t>((q * c.k + i) * c.n + j);
        const double got = static_cast<double>(static_cast<float>(d[idx]));
        const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
        if (e > max_err) max_err = e;
        if (std::fabs(ref) > max_ref) max_ref = std::fabs(ref);
        if (bad_first < 0 && !(e <= 1e30)) bad_first = static_cast<int64_t>(idx);
      }
    }
  }
  const double tol = eps_of<Out>() * max_ref + 2e-7 * std::sqrt(static_cast<double>(c.m)) * max_ref + 1e-6;
  const bool ok = max_err <= tol;
  std::printf("%s %s: max|err| %.3g (tol %.3g), empty groups %lld, groups ending mid-slice %lld, clusters "
              "launched %u, stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err, tol, (long long)empty_groups, (long long)tail_groups,
              res.launched, res.canceled);
  if (!ok && bad_first >= 0)
    std::printf("     first unwritten/NaN element: group %lld row %lld col %lld\n",
                (long long)(bad_first / (c.k * c.n)), (long long)(bad_first / c.n % c.k),
                (long long)(bad_first % c.n));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  using C128 = ks::KGroupedGemmConfig<128>;
  using C256 = ks::KGroupedGemmConfig<256>;
  using BF = __nv_bfloat16;
  using F16 = __half;
  bool ok = true;
  // name, m, n, k, sizes, resident, table_entries
  // Groups ending mid-slice (sizes % 16 != 0) next to NaN rows in no group, an empty
  // group, a group of one row, several 64-row blocks, K and N off the tile.
  ok &= run_case<C128, BF, float>({"uneven+empty, NaN rows in none", 300, 136, 200, {37, 0, 150, 1, 70}, 1, 0}, rng);
  ok &= run_case<C128, F16, F16>({"slice-aligned and not, sum = M", 176, 200, 136, {16, 48, 112}, 2, 0}, rng);
  ok &= run_case<C256, BF, BF>({"256 wide, sizes past M, negative", 210, 264, 72, {-4, 90, 500}, 2, 0}, rng);
  if (!quick) {
    ok &= run_case<C128, BF, F16>({"small table (span > 1)", 260, 136, 96, {3, 0, 60, 1, 0, 129, 2, 0}, 2, 3}, rng);
    ok &= run_case<C128, F16, float>({"all groups empty", 100, 136, 64, {0, 0, 0}, 1, 0}, rng);
    ok &= run_case<C256, F16, float>({"G=1, many blocks, ends mid-slice", 333, 264, 136, {333}, 1, 0}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
