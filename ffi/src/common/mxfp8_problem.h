// The MXFP8 block-scaled GEMM's problem description, as the handlers validate it
// (common/mxfp8_validate.h) and the sm100 launch layer takes it. No CUDA and no XLA
// headers here.
//
//   "jax_sm100_mxfp8_gemm": a (M, K) and b (N, K), each float8_e4m3fn or float8_e5m2 (any
//   mix), a_scale (ceil(K/128), RT(M), 32, 16) and b_scale (ceil(K/128), RT(N), 32, 16)
//   float8_e8m0fnu in the tiled layout of kernels/sm100/mx_scale_layout.h (one scale per
//   32 elements of K; RT(R) = round_up(ceil(R/128), 2)) -> d (M, N) bf16, f16 or f32:
//   d = (a * a_scale) @ (b * b_scale)^T, accumulated in fp32, rounded once.
//   Attributes: block_n (i32, 128 or 256: the output tile's width), group_m (i32, [1, 64]:
//   tile rows per L2 group of the tile order). K % 16 == 0 and rows of d spanning a
//   multiple of 16 bytes (TMA); K == 0 gives d = 0.
// The op's scales, (M, ceil(K/32)) and (N, ceil(K/32)), are tiled by the Python layer
// (jax_sm100/_mxfp8.py): the tensor core reads them from TMEM in this chunked form.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_checks.h"
#include "jax_sm100/kernels/sm100/mx_scale_layout.h"

namespace jax_sm100::host {

/// One MXFP8 GEMM call as validated by the handler.
struct Mxfp8GemmProblem {
  const void* a;        ///< (m, k) e4m3 / e5m2
  const void* a_scale;  ///< tiled e8m0 (mx_scale_tiled_bytes(m, k) bytes)
  const void* b;        ///< (n, k)
  const void* b_scale;  ///< tiled e8m0 (mx_scale_tiled_bytes(n, k) bytes)
  void* d;              ///< (m, n), out_type
  bool a_e5m2, b_e5m2;  ///< element formats (false: e4m3)
  ElemType out_type;
  int64_t m, n, k;
  int block_n, group_m;

  /// No output element to write (the handler returns at once). Else k == 0 gives d = 0.
  bool empty() const { return m == 0 || n == 0; }
};

/// The output-tile widths of the MXFP8 kernels (the attribute block_n).
constexpr int kMxfp8BlockNs[] = {128, 256};

}  // namespace jax_sm100::host
