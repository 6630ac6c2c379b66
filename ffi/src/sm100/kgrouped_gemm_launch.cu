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
#include "sm100/tensor_map_16bit.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_kgrouped_tiling(const GroupedTiling& t) {
  std::string set;
  for (const auto& v : kSm100KGroupedTiles) {
    if (v[0] == t.block_m && v[1] == t.block_n) return "";
    set += (set.empty() ? "(" : ", (") + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
  }
  return "the sm100 K-grouped GEMM has no kernel for (block_m, block_n) = (" + std::to_string(t.block_m) + ", " +
         std::to_string(t.block_n) + "); the compiled tiles are " + set;
}

namespace {

using sm100_detail::encode;

template <class Cfg, class T, class Out>
std::string launch(const KGroupedGemmProblem& pr, cudaStream_t stream) {
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

template <class T, class Out>
std::string launch_tile(const KGroupedGemmProblem& pr, cudaStream_t stream) {
  if (pr.tiling.block_n == 128) return launch<ks::KGroupedGemmConfig<128>, T, Out>(pr, stream);
  return launch<ks::KGroupedGemmConfig<256>, T, Out>(pr, stream);
}

template <class T>
std::string launch_out(const KGroupedGemmProblem& pr, cudaStream_t stream) {
  switch (pr.out_type) {
    case ElemType::kBF16: return launch_tile<T, __nv_bfloat16>(pr, stream);
    case ElemType::kF16: return launch_tile<T, __half>(pr, stream);
    case ElemType::kF32: return launch_tile<T, float>(pr, stream);
  }
  return "unknown output type";
}

}  // namespace

std::string sm100_kgrouped_gemm_launch(const KGroupedGemmProblem& pr, cudaStream_t stream) {
  const std::string bad = check_sm100_kgrouped_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  if (pr.in_type == ElemType::kBF16) return launch_out<__nv_bfloat16>(pr, stream);
  if (pr.in_type == ElemType::kF16) return launch_out<__half>(pr, stream);
  return "the sm100 K-grouped GEMM takes bfloat16 or float16 inputs";
}

}  // namespace jax_sm100::host
