// The sm_100a GEMM launcher and its instantiations (3 tilings x 2 input x 3 output types).
// Builds the launch from the CUDA-free plan (kernels/sm100/gemm_plan.h) that the CPU
// emulator also runs, encodes its tensor maps and launches one cluster per tile. A
// problem with a bias, pre or an activation goes to the bias/activation kernels
// (gemm_bias_inst_impl.h, instantiated in gemm_bias_inst_<in>_<out>.cu).
#include "sm100/gemm_launch.h"

#include <cuda.h>

#include "common/launch.h"
#include "jax_sm100/kernels/sm100/gemm.cuh"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "sm100/gemm_bias_inst_impl.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_gemm_tiling(const GemmTiling& t) {
  if (t.split_k != 1)
    return "the sm100 GEMM has no split-K kernel (split_k must be 1 on sm100; got " +
           std::to_string(t.split_k) + ")";
  for (const auto& v : kSm100GemmTilings)
    if (v[0] == t.block_m && v[1] == t.block_n && v[2] == t.cluster_m) return "";
  std::string set;
  for (const auto& v : kSm100GemmTilings)
    set += (set.empty() ? "" : ", ") + std::string("(") + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
           ", " + std::to_string(v[2]) + ")";
  return "the sm100 GEMM has no kernel for (block_m, block_n, cluster_m) = (" + std::to_string(t.block_m) +
         ", " + std::to_string(t.block_n) + ", " + std::to_string(t.cluster_m) + "); on sm100 the valid ones are " +
         set;
}

namespace {

using sm100_detail::encode;

template <class Cfg, class T, class Out>
std::string launch(const GemmProblem& pr, cudaStream_t stream) {
  const ks::GemmShape g = sm100_detail::gemm_shape<Out>(pr);
  std::string err;
  const ks::GemmPlan plan = ks::plan_gemm<Cfg>(g, &err);
  if (!err.empty()) return err;
  ks::GemmParams<ks::DeviceOps> params{};
  err = ks::make_gemm_params<ks::DeviceOps>(
      g, plan,
      [](const ks::MapSpec& s, ks::Operand which, CUtensorMap* map) {
        return which == ks::Operand::kA || which == ks::Operand::kB ? encode<T>(s, map) : encode<Out>(s, map);
      },
      &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_gemm_kernel<Cfg, T, Out>>(Cfg::kClusterM, Cfg::kThreads,
                                                             ks::sm100_gemm_smem_bytes<Cfg, T, Out>(),
                                                             plan.grid_ctas, stream, params);
}

}  // namespace

template <class T, class Out>
std::string sm100_gemm_launch(const GemmProblem& pr, cudaStream_t stream) {
  if (pr.bias != nullptr || pr.pre != nullptr || pr.activation != 0) {
    if constexpr (kSm100BiasKernels<T, Out>)
      return sm100_gemm_bias_launch<T, Out>(pr, stream);
    else
      return "no sm100 bias/activation kernel for these input and output types (compiled: "
             "bfloat16 -> bfloat16 or float32, float16 -> float16 or float32)";
  }
  const std::string bad = check_sm100_gemm_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  if (pr.tiling.block_n == 128) return launch<ks::GemmConfig<128, 1>, T, Out>(pr, stream);
  if (pr.tiling.cluster_m == 2) return launch<ks::GemmConfig<256, 2>, T, Out>(pr, stream);
  return launch<ks::GemmConfig<256, 1>, T, Out>(pr, stream);
}

template std::string sm100_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
template std::string sm100_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, cudaStream_t);
template std::string sm100_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, cudaStream_t);
template std::string sm100_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, cudaStream_t);
template std::string sm100_gemm_launch<__half, __half>(const GemmProblem&, cudaStream_t);
template std::string sm100_gemm_launch<__half, float>(const GemmProblem&, cudaStream_t);

}  // namespace jax_sm100::host
