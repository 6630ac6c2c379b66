// Entry points of the sm90 grouped GEMMs (sm90/grouped_gemm_launch.h): the compiled tiles
// and the dispatch on the problem's input and output types to the typed launchers
// (sm90/grouped_gemm_inst.h, instantiated in grouped_gemm_inst_<in>.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"
#include "sm90/grouped_gemm_launch.h"

namespace jax_sm100::host {

namespace {

/// The sm90 grouped kernels' (block_m, block_n).
constexpr int kSm90GroupedTiles[][2] = {{128, 128}, {128, 256}};

template <template <class, class> class Launch, class Problem>
std::string dispatch_types(const Problem& pr, int num_sms, cudaStream_t stream) {
  const bool bf16 = pr.in_type == ElemType::kBF16;
  if (pr.in_type != ElemType::kBF16 && pr.in_type != ElemType::kF16)
    return "the grouped kernels take bfloat16 or float16 inputs";
  switch (pr.out_type) {
    case ElemType::kBF16:
      return bf16 ? Launch<__nv_bfloat16, __nv_bfloat16>::run(pr, num_sms, stream)
                  : Launch<__half, __nv_bfloat16>::run(pr, num_sms, stream);
    case ElemType::kF16:
      return bf16 ? Launch<__nv_bfloat16, __half>::run(pr, num_sms, stream)
                  : Launch<__half, __half>::run(pr, num_sms, stream);
    case ElemType::kF32:
      return bf16 ? Launch<__nv_bfloat16, float>::run(pr, num_sms, stream)
                  : Launch<__half, float>::run(pr, num_sms, stream);
  }
  return "unknown output type";
}

template <class T, class Out>
struct MGrouped {
  static std::string run(const GroupedGemmProblem& pr, int num_sms, cudaStream_t stream) {
    return sm90_grouped_gemm_launch_typed<T, Out>(pr, num_sms, stream);
  }
};
template <class T, class Out>
struct KGrouped {
  static std::string run(const KGroupedGemmProblem& pr, int num_sms, cudaStream_t stream) {
    return sm90_kgrouped_gemm_launch_typed<T, Out>(pr, num_sms, stream);
  }
};

}  // namespace

std::string check_sm90_grouped_tiling(const GroupedTiling& tiling) {
  std::string set;
  for (const auto& v : kSm90GroupedTiles) {
    if (v[0] == tiling.block_m && v[1] == tiling.block_n) return "";
    set += (set.empty() ? "(" : ", (") + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
  }
  return "no sm90 grouped kernel for (block_m, block_n) = (" + std::to_string(tiling.block_m) +
         ", " + std::to_string(tiling.block_n) + "); the compiled tiles are " + set;
}

std::string sm90_grouped_gemm_launch(const GroupedGemmProblem& prob, int num_sms,
                                     cudaStream_t stream) {
  return dispatch_types<MGrouped>(prob, num_sms, stream);
}

std::string sm90_kgrouped_gemm_launch(const KGroupedGemmProblem& prob, int num_sms,
                                      cudaStream_t stream) {
  return dispatch_types<KGrouped>(prob, num_sms, stream);
}

}  // namespace jax_sm100::host
