// Host side of the sm90 blockwise-scaled FP8 GEMM: the problem the handler validated
// (with the kernel choice it was given as FFI attributes) and the launch entry point,
// defined in fp8_gemm_launch.cu. Used by ffi/src/fp8_ffi.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace jax_sm100::host {

/// Largest K the sm90 FP8 kernel takes (its B-scale smem holds 512 K blocks).
constexpr int64_t kSm90Fp8MaxK = 65536;

/// The kernel choice of one call (FFI attributes block_m, block_n, cluster, pair_along_n,
/// group_m), made in Python. The handler checks it against the compiled set first.
struct Fp8Tiling {
  int block_m = 128, block_n = 128;
  int cluster = 1;            ///< CTAs per cluster: 1 or 2 (a pair)
  bool pair_along_n = false;  ///< a pair along N sharing A (256-row tiles), else along M sharing B
  int group_m = 8;            ///< cluster rows per L2 group of the persistent tile order, in [1, 64]
};

/// One FP8 GEMM call as validated by the handler: d = (a * a_scale) @ (b * b_scale)^T
/// (+ beta * c).
struct Fp8GemmProblem {
  const void* a;           ///< (m, k) e4m3
  const float* a_scale_t;  ///< (ceil(k/128), mp) f32, a's 1x128 scales transposed
  const void* b;           ///< (n, k) e4m3
  const float* b_scale;    ///< (ceil(n/128), ceil(k/128)) f32
  const void* c;           ///< (m, n) bf16; nullptr: no residual term (the plain kernel)
  void* d;                 ///< (m, n) bf16
  int64_t m, n, k;         ///< all >= 1; k % 16 == 0, n % 8 == 0, k <= kSm90Fp8MaxK
  int64_t mp;              ///< round_up(m, 4)
  float beta;              ///< residual only
  Fp8Tiling tiling;
};

/// Launches the sm90 kernel compiled for (tiling's block_m, block_n, cluster,
/// pair_along_n, residual or not) on `stream`, a persistent grid of at most `num_sms`
/// CTAs. Returns "" or an error sentence.
std::string sm90_fp8_gemm_launch(const Fp8GemmProblem& prob, int num_sms, cudaStream_t stream);

}  // namespace jax_sm100::host
