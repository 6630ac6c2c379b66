// The sm_100a GEMM launcher and its instantiations (3 tilings x 2 input x 3 output types).
// Builds the launch from the CUDA-free plan (kernels/sm100/gemm_plan.h) that the CPU
// emulator also runs, encodes its tensor maps and launches one cluster per tile.
#include "sm100/gemm_launch.h"

#include <cuda.h>

#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/gemm.cuh"
#include "jax_sm100/kernels/sm100/gemm_plan.h"

namespace jax_sm100::host {

namespace ks = jax_sm100::kernels::sm100;

std::string check_sm100_gemm_tiling(const GemmTiling& t) {
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

template <class X>
CUtensorMapDataType map_dtype() {
  if constexpr (std::is_same_v<X, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (std::is_same_v<X, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/// MapSpec -> CUtensorMap through the one encoder (common/tensor_map.h).
template <class X>
std::string encode(const ks::MapSpec& s, CUtensorMap* map) {
  TensorMapSpec t;
  t.base = s.base;
  t.dtype = map_dtype<X>();
  t.elem_bytes = s.elem_bytes;
  t.rank = 3;
  t.inner = s.inner;
  t.outer = s.outer;
  t.batch = s.batch;
  t.row_pitch_bytes = s.row_pitch;
  t.box_inner = s.box_inner;
  t.box_outer = s.box_outer;
  t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return encode_tensor_map(map, t);
}

template <class Cfg, class T, class Out>
std::string launch(const GemmProblem& pr, cudaStream_t stream) {
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
