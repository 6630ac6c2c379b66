// The sm_100a M-grouped GEMM launcher and its instantiations (2 tiles x 2 input x 3 output
// types). Builds the launch from the CUDA-free plan (kernels/sm100/grouped_gemm_plan.h)
// that the CPU emulator also runs, encodes its tensor maps and launches one cluster (one
// CTA) per possible tile; cluster launch control hands the rest out.
#include "sm100/grouped_gemm_launch.h"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/launch.h"
#include "jax_sm100/kernels/sm100/grouped_gemm.cuh"
#include "jax_sm100/kernels/sm100/grouped_gemm_plan.h"
#include "sm100/grouped_dispatch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_grouped_tiling(const GroupedTiling& t) {
  return sm100_detail::check_tiles(kSm100GroupedTiles, t, "grouped GEMM");
}

namespace {

using sm100_detail::encode;

/// The instantiation the dispatch picks (grouped_dispatch.h).
struct MGrouped {
  template <class Cfg, class T, class Out>
  static std::string run(const GroupedGemmProblem& pr, cudaStream_t stream) {
    ks::GroupedShape g;
    g.lhs = pr.lhs;
    g.rhs = pr.rhs;
    g.group_sizes = pr.group_sizes;
    g.out = pr.out;
    g.out_bytes = sizeof(Out);
    g.m = pr.m;
    g.n = pr.n;
    g.k = pr.k;
    g.g = pr.g;
    g.trans_rhs = pr.trans_rhs;
    std::string err;
    const ks::GroupedPlan plan = ks::plan_grouped<Cfg>(g, &err);
    if (!err.empty()) return err;
    ks::GroupedGemmParams<ks::DeviceOps> params{};
    err = ks::make_grouped_params<ks::DeviceOps>(
        g, plan,
        [](const ks::MapSpec& s, ks::Operand which, CUtensorMap* map) {
          return which == ks::Operand::kA || which == ks::Operand::kB ? encode<T>(s, map) : encode<Out>(s, map);
        },
        &params);
    if (!err.empty()) return err;
    return launch_clusters<ks::sm100_grouped_gemm_kernel<Cfg, T, Out>>(
        1, Cfg::kThreads, ks::sm100_grouped_smem_bytes<Cfg>(), plan.grid_ctas, stream, params);
  }
};

}  // namespace

std::string sm100_grouped_gemm_launch(const GroupedGemmProblem& pr, cudaStream_t stream) {
  const std::string bad = check_sm100_grouped_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  return sm100_detail::dispatch_16bit<ks::GroupedGemmConfig, MGrouped>(pr, stream, "grouped GEMM");
}

}  // namespace jax_sm100::host
