// The sm_100a MXFP8 GEMM launcher and its instantiations (block_n 128 / 256 x bf16, f16,
// f32 output; the element formats are runtime fields of the instruction descriptor).
// Builds the launch from the CUDA-free plan (kernels/sm100/mx_gemm_plan.h) that the CPU
// emulator also runs, encodes its tensor maps and launches one CTA per output tile.
#include "sm100/mxfp8_gemm_launch.h"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/mx_gemm.cuh"
#include "jax_sm100/kernels/sm100/mx_gemm_plan.h"
#include "sm100/tensor_maps.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

namespace {

template <class Cfg, class Out>
std::string launch(const Mxfp8GemmProblem& pr, cudaStream_t stream) {
  ks::MxGemmShape g;
  g.a = pr.a;
  g.b = pr.b;
  g.sfa = pr.a_scale;
  g.sfb = pr.b_scale;
  g.d = pr.d;
  g.a_fmt = pr.a_e5m2 ? ptx::MxFormat::kE5M2 : ptx::MxFormat::kE4M3;
  g.b_fmt = pr.b_e5m2 ? ptx::MxFormat::kE5M2 : ptx::MxFormat::kE4M3;
  g.out_bytes = sizeof(Out);
  g.m = pr.m;
  g.n = pr.n;
  g.k = pr.k;
  g.group_m = pr.group_m;
  std::string err;
  const ks::MxGemmPlan plan = ks::plan_mx_gemm<Cfg>(g, &err);
  if (!err.empty()) return err;
  ks::MxGemmParams<ks::MxDeviceOps> params{};
  err = ks::make_mx_gemm_params<ks::MxDeviceOps>(
      g, plan,
      [](const ks::MapSpec& s, ks::Operand which, CUtensorMap* map) {
        const bool operand = which == ks::Operand::kA || which == ks::Operand::kB;
        return sm100_detail::encode_map(s, operand ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : sm100_detail::map_dtype<Out>(), map);
      },
      &params);
  if (!err.empty()) return err;
  return launch_clusters<ks::sm100_mx_gemm_kernel<Cfg, Out>>(1, Cfg::kThreads, ks::sm100_mx_gemm_smem_bytes<Cfg>(),
                                                            plan.grid_ctas, stream, params);
}

template <class Cfg>
std::string launch_out(const Mxfp8GemmProblem& pr, cudaStream_t stream) {
  switch (pr.out_type) {
    case ElemType::kBF16: return launch<Cfg, __nv_bfloat16>(pr, stream);
    case ElemType::kF16: return launch<Cfg, __half>(pr, stream);
    case ElemType::kF32: return launch<Cfg, float>(pr, stream);
  }
  return "unknown output type";
}

}  // namespace

std::string sm100_mxfp8_gemm_launch(const Mxfp8GemmProblem& pr, cudaStream_t stream) {
  if (pr.block_n == 128) return launch_out<ks::MxGemmConfig<128>>(pr, stream);
  if (pr.block_n == 256) return launch_out<ks::MxGemmConfig<256>>(pr, stream);
  return "the sm100 MXFP8 GEMM has no kernel for block_n = " + std::to_string(pr.block_n) +
         " (valid: 128, 256)";
}

}  // namespace jax_sm100::host
