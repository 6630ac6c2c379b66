// The sm_100a K-grouped GEMM launcher and its instantiations (2 tiles x 2 input x 3 output
// types). Builds the launch from the CUDA-free plan (kernels/sm100/kgrouped_gemm_plan.h)
// that the CPU emulator also runs, encodes its tensor maps and launches one cluster (one
// CTA) per output tile; cluster launch control hands the rest out.
#include "sm100/kgrouped_gemm_launch.h"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/launch.h"
#include "jax_sm100/kernels/sm100/kgrouped_gemm.cuh"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_plan.h"
#include "sm100/grouped_dispatch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_kgrouped_tiling(const GroupedTiling& t) {
  return sm100_detail::check_tiles(kSm100KGroupedTiles, t, "K-grouped GEMM");
}

namespace {

using sm100_detail::encode;

/// The instantiation the dispatch picks (grouped_dispatch.h).
struct KGrouped {
  template <class Cfg, class T, class Out>
  static std::string run(const KGroupedGemmProblem& pr, cudaStream_t stream) {
    ks::KGroupedShape g;
    g.lhs = pr.lhs;
    g.dy = pr.dy;
    g.group_sizes = pr.group_sizes;
    g.out = pr.out;
    g.out_bytes = sizeof(Out);
    g.m = pr.m;
    g.n = pr.n;
    g.k = pr.k;
    g.g = pr.g;
    std::string err;
    const ks::KGroupedPlan plan = ks::plan_kgrouped<Cfg>(g, &err);
    if (!err.empty()) return err;
    ks::KGroupedGemmParams<ks::DeviceOps> params{};
    err = ks::make_kgrouped_params<ks::DeviceOps>(
        g, plan,
        [](const ks::MapSpec& s, ks::Operand which, CUtensorMap* map) {
          return which == ks::Operand::kA || which == ks::Operand::kB ? encode<T>(s, map) : encode<Out>(s, map);
        },
        &params);
    if (!err.empty()) return err;
    return launch_clusters<ks::sm100_kgrouped_gemm_kernel<Cfg, T, Out>>(
        1, Cfg::kThreads, ks::sm100_kgrouped_smem_bytes<Cfg>(), plan.grid_ctas, stream, params);
  }
};

}  // namespace

std::string sm100_kgrouped_gemm_launch(const KGroupedGemmProblem& pr, cudaStream_t stream) {
  const std::string bad = check_sm100_kgrouped_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  return sm100_detail::dispatch_16bit<ks::KGroupedGemmConfig, KGrouped>(pr, stream, "K-grouped GEMM");
}

}  // namespace jax_sm100::host
