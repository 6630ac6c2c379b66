// The sm_100a blockwise-scaled FP8 GEMM launcher: builds the launch from the CUDA-free
// plan (kernels/sm100/fp8_plan.h) that the CPU emulator also runs, encodes its tensor
// maps and launches one cluster of one CTA per 128 x 128 output tile (cluster launch
// control lets resident CTAs take over the rest). One instantiation serves the plain and
// the residual target (has_c is a parameter).
#include "sm100/fp8_gemm_launch.h"

#include <cuda.h>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/fp8_gemm.cuh"
#include "jax_sm100/kernels/sm100/fp8_plan.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_fp8_tiling(const Fp8Tiling& t) {
  for (const auto& f : kSm100Fp8Forms)
    if (f.block_m == t.block_m && f.block_n == t.block_n && f.cluster == t.cluster &&
        f.pair_along_n == t.pair_along_n)
      return "";
  std::string set;
  for (const auto& f : kSm100Fp8Forms)
    set += (set.empty() ? "" : ", ") + fp8_form_str(f.block_m, f.block_n, f.cluster, f.pair_along_n);
  return "the sm100 FP8 GEMM has no kernel for " +
         fp8_form_str(t.block_m, t.block_n, t.cluster, t.pair_along_n) + "; on sm100 the valid ones are " + set;
}

std::string sm100_fp8_gemm_launch(const Fp8GemmProblem& pr, cudaStream_t stream) {
  using Cfg = ks::Fp8GemmConfig;
  const std::string bad = check_sm100_fp8_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  ks::Fp8GemmShape g;
  g.a = pr.a;
  g.a_scale_t = pr.a_scale_t;
  g.b = pr.b;
  g.b_scale = pr.b_scale;
  g.c = pr.c;
  g.d = pr.d;
  g.m = pr.m;
  g.n = pr.n;
  g.k = pr.k;
  g.mp = pr.mp;
  g.beta = pr.beta;
  g.group_m = pr.tiling.group_m;
  std::string err;
  const ks::Fp8GemmPlan plan = ks::plan_fp8_gemm(g, &err);
  if (!err.empty()) return err;
  ks::Fp8GemmParams<ks::DeviceOps> params{};
  err = ks::make_fp8_gemm_params<ks::DeviceOps>(g, plan, sm100_detail::encode_fp8_map, &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_fp8_gemm_kernel<Cfg>>(Cfg::kClusterM, Cfg::kThreads,
                                                        ks::sm100_fp8_gemm_smem_bytes<Cfg>(), plan.grid_ctas,
                                                        stream, params);
}

}  // namespace jax_sm100::host
