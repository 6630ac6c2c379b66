// The sm_100a FP8 blockwise M-grouped GEMM launcher: builds the launch from the CUDA-free
// plan (kernels/sm100/grouped_fp8_plan.h) that the CPU emulator also runs, encodes its
// tensor maps and launches one cluster (one CTA) per possible tile; cluster launch
// control hands the rest out.
#include "sm100/grouped_fp8_launch.h"

#include <cuda.h>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/grouped_fp8_gemm.cuh"
#include "jax_sm100/kernels/sm100/grouped_fp8_plan.h"
#include "sm100/grouped_dispatch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_fp8_grouped_tiling(const GroupedTiling& t) {
  return sm100_detail::check_tiles(kSm100Fp8GroupedTiles, t, "FP8 grouped GEMM");
}

std::string sm100_fp8_grouped_gemm_launch(const Fp8GroupedGemmProblem& pr, cudaStream_t stream) {
  using Cfg = ks::GroupedFp8GemmConfig;
  const std::string bad = check_sm100_fp8_grouped_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  ks::GroupedFp8Shape g;
  g.a = pr.a;
  g.a_scale_t = pr.a_scale_t;
  g.b = pr.b;
  g.b_scale = pr.b_scale;
  g.group_sizes = pr.group_sizes;
  g.out = pr.out;
  g.m = pr.m;
  g.n = pr.n;
  g.k = pr.k;
  g.g = pr.g;
  g.mp = pr.mp;
  std::string err;
  const ks::GroupedFp8Plan plan = ks::plan_grouped_fp8(g, &err);
  if (!err.empty()) return err;
  ks::GroupedFp8GemmParams<ks::DeviceOps> params{};
  err = ks::make_grouped_fp8_params<ks::DeviceOps>(g, plan, sm100_detail::encode_fp8_map, &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_grouped_fp8_gemm_kernel<Cfg>>(
      1, Cfg::kThreads, ks::sm100_grouped_fp8_smem_bytes<Cfg>(), plan.grid_ctas, stream, params);
}

}  // namespace jax_sm100::host
