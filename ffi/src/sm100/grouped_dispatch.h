// What the sm_100a 16-bit grouped launchers (grouped_gemm_launch.cu: M-grouped;
// kgrouped_gemm_launch.cu: K-grouped) share: the tile check and the dispatch of a
// validated problem to the instantiation of its input type, output type and tile width.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "common/grouped_problem.h"

namespace jax_sm100::host::sm100_detail {

/// "" when `t` is one of `tiles`, else a sentence naming `what` and the valid set.
template <size_t N>
std::string check_tiles(const int (&tiles)[N][2], const GroupedTiling& t, const std::string& what) {
  const std::string bad = check_grouped_tiling(t, tiles);
  return bad.empty() ? bad : "the sm100 " + what + ": " + bad;
}

/// Launch::run<Config<block_n>, T, Out>(pr, stream) for the problem's types (bf16 / f16 in;
/// bf16 / f16 / f32 out) and tile width (128 or 256; checked before).
template <template <int> class Config, class Launch, class T, class Out, class Problem>
std::string dispatch_tile(const Problem& pr, cudaStream_t stream) {
  if (pr.tiling.block_n == 128) return Launch::template run<Config<128>, T, Out>(pr, stream);
  return Launch::template run<Config<256>, T, Out>(pr, stream);
}

template <template <int> class Config, class Launch, class T, class Problem>
std::string dispatch_out(const Problem& pr, cudaStream_t stream) {
  switch (pr.out_type) {
    case ElemType::kBF16: return dispatch_tile<Config, Launch, T, __nv_bfloat16>(pr, stream);
    case ElemType::kF16: return dispatch_tile<Config, Launch, T, __half>(pr, stream);
    case ElemType::kF32: return dispatch_tile<Config, Launch, T, float>(pr, stream);
  }
  return "unknown output type";
}

template <template <int> class Config, class Launch, class Problem>
std::string dispatch_16bit(const Problem& pr, cudaStream_t stream, const std::string& what) {
  if (pr.in_type == ElemType::kBF16) return dispatch_out<Config, Launch, __nv_bfloat16>(pr, stream);
  if (pr.in_type == ElemType::kF16) return dispatch_out<Config, Launch, __half>(pr, stream);
  return "the sm100 " + what + " takes bfloat16 or float16 inputs";
}

}  // namespace jax_sm100::host::sm100_detail
