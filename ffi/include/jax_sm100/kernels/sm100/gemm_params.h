// Parameters of the sm_100a GEMM kernel (filled on the host by gemm_plan.h).
#pragma once

#include "jax_sm100/common/tile_scheduler.cuh"

namespace jax_sm100::kernels::sm100 {

/// Kernel parameters. The tensor maps are rank 3 (inner, rows, batch); a broadcast
/// operand (batch 1) is read at batch coordinate 0.
template <class Ops>
struct GemmParams {
  typename Ops::TensorMap tma_a;  ///< A: (M rows, K inner) or, trans_a, (K rows, M inner)
  typename Ops::TensorMap tma_b;  ///< B: (K rows, N inner) or, trans_b, (N rows, K inner)
  typename Ops::TensorMap tma_c;  ///< C: (M rows, N inner); read only when has_c
  typename Ops::TensorMap tma_d;  ///< D: (M rows, N inner)
  TileOrder order;                ///< cluster tiles: (batch, M, N) with group_m
  int k_blocks;                   ///< ceil(K / 64)
  int trans_a, trans_b;
  int a_batched, b_batched, c_batched;
  int has_c;                      ///< beta != 0 and C given
  float alpha, beta;
};

}  // namespace jax_sm100::kernels::sm100
