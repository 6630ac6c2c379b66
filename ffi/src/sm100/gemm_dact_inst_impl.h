// The sm_100a activation-backward GEMM launcher (kernels/sm100/gemm_dact.cuh), explicitly
// instantiated by gemm_dact_inst_bf16.cu and gemm_dact_inst_f16.cu (one per input type,
// so they compile in parallel: 2 tilings x 4 activations each; gemm_launch.h declares
// them extern).
#pragma once

#include <cuda.h>

#include <string>

#include "common/launch.h"
#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm100/gemm_dact.cuh"
#include "jax_sm100/kernels/sm100/gemm_dact_plan.h"
#include "sm100/gemm_bias_inst_impl.h"
#include "sm100/gemm_launch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host::sm100_detail {

template <class Cfg, class T, kernels::Activation Act>
std::string launch_dact(const GemmProblem& pr, cudaStream_t stream) {
  const ks::GemmShape g = gemm_shape<T>(pr);
  ks::GemmPlan plan;
  ks::GemmDactParams<ks::DeviceOps> params{};
  const std::string err = ks::make_gemm_dact_params<Cfg, ks::DeviceOps>(
      g, pr.dbias, [](const ks::MapSpec& s, ks::Operand, CUtensorMap* map) { return encode<T>(s, map); }, &plan,
      &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_gemm_dact_kernel<Cfg, T, Act>>(
      Cfg::kClusterM, Cfg::kThreads, ks::gemm_dact_smem_bytes<Cfg, ks::DeviceOps>(), plan.grid_ctas, stream,
      params);
}

/// The kernel of one tiling for the call's activation (none has no derivative to fuse).
template <class Cfg, class T>
std::string launch_dact_act(const GemmProblem& pr, cudaStream_t stream) {
  using A = kernels::Activation;
  switch (pr.activation) {
    case static_cast<int32_t>(A::kRelu): return launch_dact<Cfg, T, A::kRelu>(pr, stream);
    case static_cast<int32_t>(A::kGeluTanh): return launch_dact<Cfg, T, A::kGeluTanh>(pr, stream);
    case static_cast<int32_t>(A::kGeluErf): return launch_dact<Cfg, T, A::kGeluErf>(pr, stream);
    case static_cast<int32_t>(A::kSilu): return launch_dact<Cfg, T, A::kSilu>(pr, stream);
  }
  return "no sm100 dact kernel for activation " + std::to_string(pr.activation) + " (1.." +
         std::to_string(kernels::kNumActivations - 1) + ")";
}

}  // namespace jax_sm100::host::sm100_detail

namespace jax_sm100::host {

template <class T>
std::string sm100_gemm_dact_launch(const GemmProblem& pr, cudaStream_t stream) {
  namespace ks = jax_sm100::kernels::sm100;
  if (!(pr.tiling.block_m == 128 && pr.tiling.block_n == 256 && pr.tiling.split_k == 1 &&
        (pr.tiling.cluster_m == 1 || pr.tiling.cluster_m == 2)))
    return "the sm100 dact kernels are compiled for (block_m, block_n, cluster_m) = (128, 256, 1) and "
           "(128, 256, 2) (the 2-SM pair), split_k=1 (got (" +
           std::to_string(pr.tiling.block_m) + ", " + std::to_string(pr.tiling.block_n) + ", " +
           std::to_string(pr.tiling.cluster_m) + "), split_k=" + std::to_string(pr.tiling.split_k) + ")";
  if (pr.c == nullptr) return "the activation-backward epilogue needs the pre-activation c";
  if (pr.tiling.cluster_m == 2) return sm100_detail::launch_dact_act<ks::GemmConfig<256, 2>, T>(pr, stream);
  return sm100_detail::launch_dact_act<ks::GemmConfig<256, 1>, T>(pr, stream);
}

}  // namespace jax_sm100::host
