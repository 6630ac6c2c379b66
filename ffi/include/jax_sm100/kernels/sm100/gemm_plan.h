// The host plan of one sm_100a GEMM launch: tensor-map descriptions, tile order, grid.
// CUDA-free and XLA-free, so the CUDA launcher (ffi/src/sm100/gemm_launch.cu) and the CPU
// emulator's harness (tests/emu) build the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_config.h"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/map_spec.h"

namespace jax_sm100::kernels::sm100 {

/// One GEMM as the launcher sees it (row-major operands, see ffi/src/gemm_ffi.cu).
struct GemmShape {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  ///< nullptr: no residual term
  void* d = nullptr;
  uint32_t in_bytes = 2, out_bytes = 2;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool a_batched = false, b_batched = false, c_batched = false;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 0.f;
  int group_m = 8;
};

struct GemmPlan {
  MapSpec a, b, c, d;
  TileOrder order;
  int k_blocks = 0;
  uint32_t grid_ctas = 0;  ///< clusters * ClusterM, along x
  bool has_c = false;
};

inline MapSpec row_major_map(const void* base, uint32_t elem, int64_t rows, int64_t inner, int64_t batch,
                             bool batched, uint32_t box_inner, uint32_t box_outer) {
  MapSpec s;
  s.base = base;
  s.elem_bytes = elem;
  s.inner = static_cast<uint64_t>(inner);
  s.outer = static_cast<uint64_t>(rows);
  s.batch = batched ? static_cast<uint64_t>(batch) : 1;
  s.row_pitch = s.inner * elem;
  s.batch_pitch = s.batch > 1 ? s.row_pitch * s.outer : 0;
  s.box_inner = box_inner;
  s.box_outer = box_outer;
  s.swizzle_bytes = 128;
  return s;
}

/// The plan of `g` for configuration Cfg; "" or an error sentence in *err.
template <class Cfg>
GemmPlan plan_gemm(const GemmShape& g, std::string* err) {
  GemmPlan p;
  *err = "";
  if (g.in_bytes != 2) *err = "the sm100 GEMM takes 16-bit inputs";
  if (g.k <= 0) *err = "the sm100 GEMM needs K >= 1 (the handler computes K == 0 itself)";
  const int64_t m_tiles = (g.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (g.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int64_t clusters = (m_tiles + Cfg::kClusterM - 1) / Cfg::kClusterM * n_tiles * g.batch;
  if (clusters * Cfg::kClusterM >= (int64_t{1} << 31)) *err = "too many output tiles for one launch";
  if (!err->empty()) return p;
  // A: (M, K) K-major in boxes of 64 K x 128 rows, or (K, M) in boxes of 64 M x 64 K.
  p.a = g.trans_a ? row_major_map(g.a, 2, g.k, g.m, g.batch, g.a_batched, 64, 64)
                  : row_major_map(g.a, 2, g.m, g.k, g.batch, g.a_batched, 64, Cfg::kBlockM);
  // B: (N, K) K-major in boxes of 64 K x kBRows rows, or (K, N) in boxes of 64 N x 64 K.
  p.b = g.trans_b ? row_major_map(g.b, 2, g.n, g.k, g.batch, g.b_batched, 64, Cfg::kBRows)
                  : row_major_map(g.b, 2, g.k, g.n, g.batch, g.b_batched, 64, 64);
  const uint32_t epi_cols = Cfg::kEpiRowBytes / g.out_bytes;
  p.has_c = g.c != nullptr && g.beta != 0.f;
  p.c = row_major_map(p.has_c ? g.c : g.d, g.out_bytes, g.m, g.n, g.batch, p.has_c ? g.c_batched : true,
                      epi_cols, Cfg::kBlockM);
  p.d = row_major_map(g.d, g.out_bytes, g.m, g.n, g.batch, true, epi_cols, Cfg::kBlockM);
  p.order = TileOrder::make(static_cast<int>(m_tiles), static_cast<int>(n_tiles), static_cast<int>(g.batch),
                            Cfg::kClusterM, 1, g.group_m);
  p.k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  p.grid_ctas = static_cast<uint32_t>(clusters * Cfg::kClusterM);
  return p;
}

/// Which operand a tensor map describes (A and B hold the input type, C and D the output's).
enum class Operand { kA, kB, kC, kD };

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Operand, TensorMap*) -> std::string` ("" on success).
template <class Ops, class MakeMap>
std::string make_gemm_params(const GemmShape& g, const GemmPlan& plan, MakeMap&& make_map,
                             GemmParams<Ops>* out) {
  std::string e;
  if (!(e = make_map(plan.a, Operand::kA, &out->tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Operand::kB, &out->tma_b)).empty()) return e;
  if (!(e = make_map(plan.c, Operand::kC, &out->tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->tma_d)).empty()) return e;
  out->order = plan.order;
  out->k_blocks = plan.k_blocks;
  out->trans_a = g.trans_a;
  out->trans_b = g.trans_b;
  out->a_batched = g.a_batched && g.batch > 1;
  out->b_batched = g.b_batched && g.batch > 1;
  out->c_batched = plan.has_c && g.c_batched && g.batch > 1;
  out->has_c = plan.has_c;
  out->alpha = g.alpha;
  out->beta = g.beta;
  return "";
}

}  // namespace jax_sm100::kernels::sm100
