// Host side of the sm90 GEMM: the problem description the handler validates (with the
// kernel choice it was given as FFI attributes) and the launch entry point. Used by
// gemm_ffi.cu (the FFI handlers) and the per-dtype instantiation files gemm_inst_*.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace jax_sm100::host {

/// Element types the GEMM handles (a and b share one input type).
enum class GemmDtype { kBF16, kF16, kF32 };

/// Bytes per element.
inline uint32_t dtype_bytes(GemmDtype t) { return t == GemmDtype::kF32 ? 4 : 2; }

/// The kernel choice of one call (FFI attributes block_m, block_n, cluster_m, group_m),
/// made in Python. The handler checks it against the compiled set before any launch.
struct GemmTiling {
  int block_m = 128, block_n = 256;
  int cluster_m = 1;  ///< CTAs per cluster along M (2: pairs of M tiles share a multicast B tile)
  int group_m = 8;    ///< cluster rows per L2 group of the persistent tile order, in [1, 64]
};

/// One (batched) GEMM call as validated by the handler.
struct GemmProblem {
  const void* a;
  const void* b;
  const void* c;  ///< nullptr when the residual term is off (beta == 0 or plain GEMM)
  void* d;
  GemmDtype in_type;   ///< bf16 or f16
  GemmDtype out_type;  ///< bf16, f16 or f32 (c has the same type)
  int64_t m, n, k;
  int64_t batch;  ///< D's batch count (>= 1)
  bool a_batched, b_batched, c_batched;
  bool trans_a, trans_b;
  float alpha, beta;
  GemmTiling tiling;
};

/// Launches the sm90 kernel compiled for (prob.tiling's block_m, block_n, cluster_m,
/// residual or not, in type, out type). Defined (and explicitly instantiated) in
/// gemm_inst_<in>_<out>.cu. Returns "" or an error sentence.
template <class T, class Out>
std::string sm90_gemm_launch(const GemmProblem& prob, int num_sms, cudaStream_t stream);

extern template std::string sm90_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __half>(const GemmProblem&, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, float>(const GemmProblem&, int, cudaStream_t);

}  // namespace jax_sm100::host
