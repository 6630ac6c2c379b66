// The sm_100a FP8 blockwise M-grouped GEMM's own role functions
// (ffi/include/jax_sm100/kernels/sm100/grouped_fp8_roles.h) run on the CPU emulator
// (EmuFp8Ops): every case builds its launch with the same host plan the CUDA launcher uses
// (grouped_fp8_plan.h), runs the grid (one host thread per CUDA thread, cluster launch
// control stealing the clusters that are not resident) and compares out with a float64
// reference on fresh random data: for the rows r of group g (sizes clamped at M, negative
// as 0) out[r, n] = sum_kb a_scale[r, kb] * b_scale[g, n / 128, kb] * (a[r, kb] . b[g, n, kb]),
// zeros for rows in no group.
//
//   sm100_grouped_fp8_emu_test [--seed S] [--quick] [--wait-ms MS]
// prints one line per case and "ALL PASSED", exit code 1 on any failure (a wrong number,
// an unwritten element, a model violation, or a bounded wait that ran out).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "emu/emu_fp8_ops.h"
#include "emu/emu_driver.h"
#include "emu/fp8_test_data.h"
#include "jax_sm100/kernels/sm100/grouped_fp8_plan.h"
#include "jax_sm100/kernels/sm100/grouped_fp8_roles.h"

namespace ks = jax_sm100::kernels::sm100;
using EmuOps = jax_sm100::emu::EmuFp8Ops;  // EmuOps + umma_f8f6f4
using jax_sm100::emu::random_e4m3;
using jax_sm100::emu::toolkit_e4m3;

namespace {

using Cfg = ks::GroupedFp8GemmConfig;

struct Case {
  const char* name;
  int64_t m, n, k;
  std::vector<int32_t> sizes;
  uint32_t resident;   ///< clusters the emulated GPU runs at once (the rest are stolen)
  int table_entries;   ///< 0: the config's group table; small: span > 1 lookups
};

bool run_case(const Case& c, std::mt19937& rng) {
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  const int64_t kb = (c.k + 127) / 128, nb = (c.n + 127) / 128, mp = (c.m + 3) / 4 * 4;
  const std::vector<uint8_t> a = random_e4m3(static_cast<size_t>(c.m * c.k), rng);
  const std::vector<uint8_t> b = random_e4m3(static_cast<size_t>(g * c.n * c.k), rng);
  // Scales 2^U(-3, 3): every row, K block, group and N block weighs differently.
  // a_scale_t's pad columns (rows m..mp-1, never stored) are NaN.
  std::uniform_real_distribution<float> expo(-3.f, 3.f);
  std::vector<float> sa(static_cast<size_t>(kb * mp), NAN), sb(static_cast<size_t>(g * nb * kb));
  for (int64_t q = 0; q < kb; ++q)
    for (int64_t i = 0; i < c.m; ++i) sa[q * mp + i] = std::exp2(expo(rng));
  for (auto& x : sb) x = std::exp2(expo(rng));
  // out starts as NaN: any element the kernel fails to write shows.
  std::vector<__nv_bfloat16> d(static_cast<size_t>(c.m * c.n), __nv_bfloat16(NAN));

  ks::GroupedFp8Shape sh;
  sh.a = a.data();
  sh.a_scale_t = sa.data();
  sh.b = b.data();
  sh.b_scale = sb.data();
  sh.group_sizes = c.sizes.data();
  sh.out = d.data();
  sh.m = c.m, sh.n = c.n, sh.k = c.k, sh.g = g, sh.mp = mp;
  sh.group_m = 2;
  sh.table_entries = c.table_entries;
  std::string err;
  const ks::GroupedFp8Plan plan = ks::plan_grouped_fp8(sh, &err);
  ks::GroupedFp8GemmParams<EmuOps> params{};
  if (err.empty())
    err = jax_sm100::emu::make_emu_params(
        [&](const auto& map) { return ks::make_grouped_fp8_params<EmuOps>(sh, plan, map, &params); });
  const std::string sizes = jax_sm100::emu::sizes_label(c.sizes);
  char label[320];
  std::snprintf(label, sizeof(label), "%-34s M=%lld N=%lld K=%lld (%lld K blocks) G=%lld sizes [%s]", c.name,
                (long long)c.m, (long long)c.n, (long long)c.k, (long long)kb, (long long)g, sizes.c_str());
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
        spec, [&](auto& s) { ks::grouped_fp8_gemm_cta<Cfg, EmuOps>(s, params); });
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", label, e.what());
    return false;
  }

  // float64 reference: group bounds clamped at M; per element the sum of |terms| bounds
  // the accumulation error.
  std::vector<int64_t> lo(g), hi(g);
  int64_t start = 0;
  for (int64_t i = 0; i < g; ++i) {
    lo[i] = start;
    start = std::min(start + std::max<int64_t>(c.sizes[i], 0), c.m);
    hi[i] = start;
  }
  std::vector<double> ad(a.size()), bd(b.size());
  for (size_t i = 0; i < a.size(); ++i) ad[i] = toolkit_e4m3(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bd[i] = toolkit_e4m3(b[i]);
  double max_err = 0, worst_ratio = 0, sxy = 0, sxx_yy = 0;
  int64_t bad_first = -1, zero_rows = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    int64_t grp = -1;
    for (int64_t q = 0; q < g; ++q)
      if (lo[q] <= i && i < hi[q]) grp = q;
    if (grp < 0) ++zero_rows;
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = 0, absterms = 0;
      if (grp >= 0) {
        std::tie(ref, absterms) = jax_sm100::emu::scaled_block_dot(
            &ad[i * c.k], &bd[(grp * c.n + j) * c.k], c.k,
            [&](int64_t q) { return double(sa[q * mp + i]) * double(sb[(grp * nb + j / 128) * kb + q]); });
      }
      const double got = static_cast<double>(static_cast<float>(d[i * c.n + j]));
      // One bf16 rounding (one ulp allowed) plus the fp32 sums: four UMMA roundings and
      // one FFMA per K block (2^-24 each, doubled). Rows in no group: exactly zero.
      const double tol = grp < 0 ? 0.0
                                 : std::ldexp(std::fabs(ref), -7) + (5.0 * kb + 4) * std::ldexp(absterms, -23) + 1e-30;
      const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
      if (e > max_err) max_err = e;
      if (tol > 0 && e / tol > worst_ratio) worst_ratio = e / tol;
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
  std::printf("%s %s: max|err| %.3g, worst err/tol %.3g, calc_diff %.2e, zero rows %lld, clusters launched %u, "
              "stolen by CLC %u\n",
              ok ? "ok  " : "FAIL", label, max_err, worst_ratio, calc_diff, (long long)zero_rows, res.launched,
              res.canceled);
  if (bad_first >= 0)
    std::printf("     first element over its tolerance (unwritten, NaN or a nonzero row in no group): row %lld, "
                "column %lld\n",
                (long long)(bad_first / c.n), (long long)(bad_first % c.n));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const jax_sm100::emu::TestArgs args = jax_sm100::emu::start_test(argc, argv);
  const bool quick = args.quick;
  std::mt19937 rng(args.seed);
  bool ok = true;
  // name, m, n, k, sizes, resident, table_entries
  // Uneven groups, an empty one, a group smaller than a tile, partial tiles in M, N and K
  // (N across two B-scale blocks), fewer resident clusters than work items (CLC steals).
  ok &= run_case({"uneven+empty, CLC 1 resident", 330, 200, 272, {150, 0, 37, 143}, 1, 0}, rng);
  ok &= run_case({"rows in no group (sum < M)", 300, 136, 144, {40, 100, 0, 25}, 2, 0}, rng);
  ok &= run_case({"sizes past M clamped, negative", 260, 152, 64, {-5, 100, 400, 7}, 2, 0}, rng);
  if (!quick) {
    ok &= run_case({"G=1, 5 K blocks (rings wrap)", 200, 264, 528, {200}, 1, 0}, rng);
    ok &= run_case({"small table (span > 1)", 280, 144, 80, {3, 0, 60, 1, 0, 129, 2, 0, 40}, 2, 3}, rng);
    ok &= run_case({"all groups empty", 150, 136, 48, {0, 0, 0}, 1, 0}, rng);
    ok &= run_case({"K = 16, G=1 partial, sum < M", 190, 136, 16, {129}, 1, 0}, rng);
  }
  std::printf(ok ? "ALL PASSED\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
