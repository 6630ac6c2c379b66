// The blockwise-scaled FP8 GEMM's problem description: shapes, data pointers and the
// kernel choice of one call, as the handlers validate it (common/fp8_validate.h) and the
// launch layers (sm90/fp8_gemm_launch.h, sm100/fp8_gemm_launch.h) take it. No CUDA and no
// XLA headers here.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_checks.h"

namespace jax_sm100::host {

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
  int64_t m, n, k;         ///< k % 16 == 0, n % 8 == 0, k <= kFp8MaxK
  int64_t mp;              ///< round_up(m, 4)
  float beta;              ///< residual only
  Fp8Tiling tiling;

  /// No output element to write (the handler returns at once). Else k == 0 only on the
  /// plain target (D = 0).
  bool empty() const { return m == 0 || n == 0; }
};

}  // namespace jax_sm100::host
