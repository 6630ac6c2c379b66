// The bf16/fp16 GEMM's problem description: shapes, dtypes, batch counts, data pointers
// and the kernel choice of one call, as the handlers validate it (common/gemm_validate.h)
// and the launch layers (sm90/gemm_launch.h, sm100/gemm_launch.h) take it. No CUDA and no
// XLA headers here.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_checks.h"

namespace jax_sm100::host {

/// Element types the GEMM handles (a and b share one input type).
using GemmDtype = ElemType;

/// Bytes per element.
inline uint32_t dtype_bytes(GemmDtype t) { return elem_bytes(t); }

/// The kernel choice of one call (FFI attributes block_m, block_n, cluster_m, group_m,
/// split_k), made in Python. The handler checks it against the compiled set before any launch.
struct GemmTiling {
  int block_m = 128, block_n = 256;
  int cluster_m = 1;  ///< CTAs per cluster along M (2: pairs of M tiles share a multicast B tile)
  int group_m = 8;    ///< cluster rows per L2 group of the persistent tile order, in [1, 64]
  int split_k = 1;    ///< > 1: the split-K kernel, a cluster of split_k CTAs per tile (sm90)
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
  // The fused bias/activation epilogue (target jax_sm100_gemm_bias; the plain and residual
  // targets leave these at their defaults): z = alpha * acc + bias[col] in fp32,
  // d = act(z), and z itself into `pre` when it is not null (the backward pass's input).
  const float* bias = nullptr;  ///< (n,) f32, the same for every row and batch; null: none
  void* pre = nullptr;          ///< z in out_type, d's layout; null: not written
  int32_t activation = 0;       ///< kernels::Activation (kernels/common/activation.h)
  // The activation's backward (target jax_sm100_gemm_dact): d = acc * act'(c) in fp32
  // with c the saved pre-activation, and the column sums of d added to `dbias`.
  bool dact = false;
  float* dbias = nullptr;  ///< (n,) f32, zeroed by the handler; null: not wanted

  /// No output element to write (the handler returns at once).
  bool empty() const { return m == 0 || n == 0 || batch == 0; }
};

}  // namespace jax_sm100::host
