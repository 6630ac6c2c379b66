// The sm_100a bias/activation GEMM launcher (kernels/sm100/gemm_bias.cuh), explicitly
// instantiated by the four gemm_bias_inst_<in>_<out>.cu files (one per type pair, so they
// compile in parallel: 3 tilings x 5 activations each; gemm_launch.h declares them extern),
// and the tensor-map encoding and problem translation that gemm_launch.cu shares.
#pragma once

#include <cuda.h>

#include <string>
#include <type_traits>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm100/gemm_bias.cuh"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "sm100/gemm_launch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host::sm100_detail {

namespace ks = jax_sm100::kernels::sm100;

/// The GEMM's part of a launch, from the validated problem.
template <class Out>
ks::GemmShape gemm_shape(const GemmProblem& pr) {
  ks::GemmShape g;
  g.a = pr.a;
  g.b = pr.b;
  g.c = pr.c;
  g.d = pr.d;
  g.in_bytes = 2;
  g.out_bytes = sizeof(Out);
  g.m = pr.m;
  g.n = pr.n;
  g.k = pr.k;
  g.batch = pr.batch;
  g.a_batched = pr.a_batched;
  g.b_batched = pr.b_batched;
  g.c_batched = pr.c_batched;
  g.trans_a = pr.trans_a;
  g.trans_b = pr.trans_b;
  g.alpha = pr.alpha;
  g.beta = pr.beta;
  g.group_m = pr.tiling.group_m;
  return g;
}


template <class Cfg, class T, class Out, kernels::Activation Act>
std::string launch_bias(const GemmProblem& pr, cudaStream_t stream) {
  const ks::GemmShape g = gemm_shape<Out>(pr);
  ks::GemmBiasShape bs;
  bs.bias = pr.bias;
  bs.pre = pr.pre;
  ks::GemmPlan plan;
  ks::GemmBiasParams<ks::DeviceOps> params{};
  const std::string err = ks::make_gemm_bias_params<Cfg, ks::DeviceOps>(
      g, bs,
      [](const ks::MapSpec& s, ks::Operand which, CUtensorMap* map) {
        return which == ks::Operand::kA || which == ks::Operand::kB ? encode<T>(s, map) : encode<Out>(s, map);
      },
      &plan, &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_gemm_bias_kernel<Cfg, T, Out, Act>>(
      Cfg::kClusterM, Cfg::kThreads, ks::gemm_bias_smem_bytes<Cfg, ks::DeviceOps>(), plan.grid_ctas, stream,
      params);
}

/// The kernel of one tiling for the call's activation.
template <class Cfg, class T, class Out>
std::string launch_bias_act(const GemmProblem& pr, cudaStream_t stream) {
  using A = kernels::Activation;
  switch (pr.activation) {
    case static_cast<int32_t>(A::kNone): return launch_bias<Cfg, T, Out, A::kNone>(pr, stream);
    case static_cast<int32_t>(A::kRelu): return launch_bias<Cfg, T, Out, A::kRelu>(pr, stream);
    case static_cast<int32_t>(A::kGeluTanh): return launch_bias<Cfg, T, Out, A::kGeluTanh>(pr, stream);
    case static_cast<int32_t>(A::kGeluErf): return launch_bias<Cfg, T, Out, A::kGeluErf>(pr, stream);
    case static_cast<int32_t>(A::kSilu): return launch_bias<Cfg, T, Out, A::kSilu>(pr, stream);
  }
  return "no sm100 kernel for activation " + std::to_string(pr.activation) + " (0.." +
         std::to_string(kernels::kNumActivations - 1) + ")";
}

}  // namespace jax_sm100::host::sm100_detail

namespace jax_sm100::host {

template <class T, class Out>
std::string sm100_gemm_bias_launch(const GemmProblem& pr, cudaStream_t stream) {
  namespace ks = jax_sm100::kernels::sm100;
  const std::string bad = check_sm100_gemm_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  if (pr.c != nullptr) return "the bias/activation epilogue takes no residual operand";
  if (pr.tiling.block_n == 128) return sm100_detail::launch_bias_act<ks::GemmConfig<128, 1>, T, Out>(pr, stream);
  if (pr.tiling.cluster_m == 2) return sm100_detail::launch_bias_act<ks::GemmConfig<256, 2>, T, Out>(pr, stream);
  return sm100_detail::launch_bias_act<ks::GemmConfig<256, 1>, T, Out>(pr, stream);
}

}  // namespace jax_sm100::host
