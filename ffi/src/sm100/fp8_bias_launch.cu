// The sm_100a FP8 bias/activation GEMM launcher: builds the launch from the CUDA-free plan
// (kernels/sm100/fp8_plan.h, fp8_bias_plan.h) that the CPU emulator also runs, encodes its
// tensor maps and launches one cluster of one CTA per 128 x 128 output tile. One
// instantiation per activation (the bias is a parameter).
#include "sm100/fp8_bias_launch.h"

#include <cuda.h>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/fp8_bias_gemm.cuh"
#include "jax_sm100/kernels/sm100/fp8_bias_plan.h"
#include "sm100/fp8_gemm_launch.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;
using jax_sm100::kernels::Activation;

namespace {

template <Activation Act>
std::string launch(const ks::Fp8GemmPlan& plan, const ks::Fp8BiasParams<ks::DeviceOps>& params,
                   cudaStream_t stream) {
  using Cfg = ks::Fp8GemmConfig;
  return launch_clusters<ks::sm100_fp8_bias_gemm_kernel<Cfg, Act>>(
      Cfg::kClusterM, Cfg::kThreads, ks::fp8_bias_smem_bytes<Cfg, ks::DeviceOps>(), plan.grid_ctas, stream, params);
}

}  // namespace

std::string sm100_fp8_bias_gemm_launch(const Fp8GemmProblem& pr, const float* bias, int32_t activation,
                                       cudaStream_t stream) {
  const std::string bad = check_sm100_fp8_tiling(pr.tiling);
  if (!bad.empty()) return bad;
  if (pr.c != nullptr) return "the FP8 bias/activation epilogue takes no residual operand";
  ks::Fp8GemmShape g;
  g.a = pr.a;
  g.a_scale_t = pr.a_scale_t;
  g.b = pr.b;
  g.b_scale = pr.b_scale;
  g.d = pr.d;
  g.m = pr.m;
  g.n = pr.n;
  g.k = pr.k;
  g.mp = pr.mp;
  g.group_m = pr.tiling.group_m;
  std::string err;
  const ks::Fp8GemmPlan plan = ks::plan_fp8_gemm(g, &err);
  if (!err.empty()) return err;
  ks::Fp8BiasParams<ks::DeviceOps> params{};
  err = ks::make_fp8_bias_params<ks::DeviceOps>(g, bias, plan, sm100_detail::encode_fp8_map, &params);
  if (!err.empty()) return err;
  switch (static_cast<Activation>(activation)) {
    case Activation::kNone: return launch<Activation::kNone>(plan, params, stream);
    case Activation::kRelu: return launch<Activation::kRelu>(plan, params, stream);
    case Activation::kGeluTanh: return launch<Activation::kGeluTanh>(plan, params, stream);
    case Activation::kGeluErf: return launch<Activation::kGeluErf>(plan, params, stream);
    case Activation::kSilu: return launch<Activation::kSilu>(plan, params, stream);
  }
  return "unknown activation code " + std::to_string(activation);
}

}  // namespace jax_sm100::host
