// The host plan of one sm_100a blockwise FP8 GEMM launch: tensor-map descriptions, tile
// order, grid. CUDA-free and XLA-free, so the CUDA launcher (ffi/src/sm100/
// fp8_gemm_launch.cu) and the CPU emulator's harness (tests/emu/sm100_fp8_emu_test.cc)
// build the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/fp8_config.h"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "jax_sm100/kernels/sm100/map_spec.h"

namespace jax_sm100::kernels::sm100 {

/// One FP8 GEMM as the launcher sees it (the layouts of ffi/src/common/fp8_problem.h).
struct Fp8GemmShape {
  const void* a = nullptr;          ///< (m, k) e4m3
  const float* a_scale_t = nullptr; ///< (ceil(k/128), mp) f32: A's 1x128 scales, transposed
  const void* b = nullptr;          ///< (n, k) e4m3
  const float* b_scale = nullptr;   ///< (ceil(n/128), ceil(k/128)) f32
  const void* c = nullptr;          ///< (m, n) bf16; nullptr: no residual term
  void* d = nullptr;                ///< (m, n) bf16
  int64_t m = 0, n = 0, k = 0;
  int64_t mp = 0;                   ///< round_up(m, 4): a_scale_t's row length
  float beta = 0.f;
  int group_m = 8;
};

struct Fp8GemmPlan {
  MapSpec a, b, sfa, c, d;
  TileOrder order;
  int k_blocks = 0;
  uint32_t grid_ctas = 0;  ///< one CTA (cluster of one) per output tile
  bool has_c = false;
};

/// The plan of `g`; "" or an error sentence in *err.
inline Fp8GemmPlan plan_fp8_gemm(const Fp8GemmShape& g, std::string* err) {
  using Cfg = Fp8GemmConfig;
  Fp8GemmPlan p;
  *err = "";
  if (g.k <= 0 || g.k % 16 != 0) *err = "the sm100 FP8 GEMM needs K >= 16, a multiple of 16";
  if (g.m <= 0 || g.n <= 0 || g.n % 8 != 0) *err = "the sm100 FP8 GEMM needs M >= 1 and N >= 8, a multiple of 8";
  if (g.mp < g.m || g.mp % 4 != 0) *err = "a_scale_t's rows must hold round_up(M, 4) scales";
  const int64_t m_tiles = (g.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (g.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if (m_tiles * n_tiles >= (int64_t{1} << 31) || g.m > INT32_MAX / 2 || g.n > INT32_MAX / 2)
    *err = "too many output tiles for one launch";
  if (!err->empty()) return p;
  p.k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  // A, B: K-major, boxes of 128 K x 128 rows (one 128-byte swizzle row per row).
  p.a = row_major_map(g.a, 1, g.m, g.k, 1, false, Cfg::kBlockK, Cfg::kBlockM);
  p.b = row_major_map(g.b, 1, g.n, g.k, 1, false, Cfg::kBlockK, Cfg::kBRows);
  // A's scales: one row of mp floats per K block, boxes of the tile's 128 rows (rows past
  // mp load as zeros; they belong to output rows that are never stored). No swizzle.
  p.sfa = row_major_map(g.a_scale_t, 4, p.k_blocks, g.mp, 1, false, Cfg::kSfaElems, 1);
  p.sfa.swizzle_bytes = 0;
  const uint32_t epi_cols = Cfg::kEpiRowBytes / 2;  // bf16
  p.has_c = g.c != nullptr && g.beta != 0.f;
  p.c = row_major_map(p.has_c ? g.c : g.d, 2, g.m, g.n, 1, false, epi_cols, Cfg::kBlockM);
  p.d = row_major_map(g.d, 2, g.m, g.n, 1, false, epi_cols, Cfg::kBlockM);
  p.order = TileOrder::make(static_cast<int>(m_tiles), static_cast<int>(n_tiles), 1, 1, 1, g.group_m);
  p.grid_ctas = static_cast<uint32_t>(m_tiles * n_tiles);
  return p;
}

/// Which operand a tensor map describes.
enum class Fp8Operand { kA, kB, kAScale, kC, kD };

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Fp8Operand, TensorMap*) -> std::string` ("" on success).
template <class Ops, class MakeMap>
std::string make_fp8_gemm_params(const Fp8GemmShape& g, const Fp8GemmPlan& plan, MakeMap&& make_map,
                                 Fp8GemmParams<Ops>* out) {
  std::string e;
  if (!(e = make_map(plan.a, Fp8Operand::kA, &out->tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Fp8Operand::kB, &out->tma_b)).empty()) return e;
  if (!(e = make_map(plan.sfa, Fp8Operand::kAScale, &out->tma_sfa)).empty()) return e;
  if (!(e = make_map(plan.c, Fp8Operand::kC, &out->tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Fp8Operand::kD, &out->tma_d)).empty()) return e;
  out->order = plan.order;
  out->k_blocks = plan.k_blocks;
  out->trans_a = out->trans_b = 0;
  out->a_batched = out->b_batched = out->c_batched = 0;
  out->has_c = plan.has_c;
  out->alpha = 1.f;
  out->beta = plan.has_c ? g.beta : 0.f;
  out->b_scale = g.b_scale;
  return "";
}

}  // namespace jax_sm100::kernels::sm100
