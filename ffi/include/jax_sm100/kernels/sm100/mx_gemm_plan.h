// The host plan of one sm_100a MXFP8 GEMM launch.
// CUDA-free and XLA-free: the CUDA launcher (ffi/src/sm100/mxfp8_gemm_launch.cu), the CPU
// handler (ffi/src/cpu/mxfp8_gemm_cpu.cc) and the CPU emulator's harness (tests/emu) use
// the same functions.
//
// d (M, N) = (a * a_scale) @ (b * b_scale)^T with a (M, K) and b (N, K) in e4m3 / e5m2
// (K-major), one UE8M0 scale per 32 elements of K.
//
// The scale factors come in the tiled layout of mx_scale_layout.h.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_params.h"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "jax_sm100/kernels/sm100/map_spec.h"
#include "jax_sm100/kernels/sm100/mx_gemm_config.h"
#include "jax_sm100/kernels/sm100/mx_scale_layout.h"
#include "jax_sm100/ptx/sm100/tcgen05_block_scale.cuh"

namespace jax_sm100::kernels::sm100 {

/// Kernel parameters: the GEMM's (tensor maps of A, B, D; tile order; K stages; the
/// epilogue's alpha = 1, beta = 0, no C), plus the tiled scales and the element formats.
template <class Ops>
struct MxGemmParams : GemmParams<Ops> {
  const uint8_t* sfa = nullptr;   ///< a's scales, tiled layout
  const uint8_t* sfb = nullptr;   ///< b's scales, tiled layout
  int sfa_row_tiles = 0;          ///< RT of a's scale layout
  int sfb_row_tiles = 0;          ///< RT of b's scale layout
  uint32_t a_fmt = 0, b_fmt = 0;  ///< ptx::MxFormat of a and b
};

/// One MXFP8 GEMM as the launcher sees it.
struct MxGemmShape {
  const void* a = nullptr;    ///< (m, k) e4m3 / e5m2
  const void* b = nullptr;    ///< (n, k)
  const void* sfa = nullptr;  ///< tiled scales of a (mx_scale_tiled_bytes(m, k) bytes)
  const void* sfb = nullptr;  ///< tiled scales of b
  void* d = nullptr;          ///< (m, n), out_bytes per element
  ptx::MxFormat a_fmt = ptx::MxFormat::kE4M3, b_fmt = ptx::MxFormat::kE4M3;
  uint32_t out_bytes = 2;
  int64_t m = 0, n = 0, k = 0;
  int group_m = 8;
};

struct MxGemmPlan {
  MapSpec a, b, d;
  TileOrder order;
  int k_blocks = 0;        ///< K stages: ceil(k / 128)
  uint32_t grid_ctas = 0;  ///< one CTA (cluster of one) per output tile
};

/// The plan of `g` for configuration Cfg; "" or an error sentence in *err.
template <class Cfg>
MxGemmPlan plan_mx_gemm(const MxGemmShape& g, std::string* err) {
  MxGemmPlan p;
  *err = "";
  if (g.k <= 0) *err = "the sm100 MXFP8 GEMM needs K >= 1 (the handler computes K == 0 itself)";
  if (g.k % 16 != 0) *err = "the sm100 MXFP8 GEMM needs K % 16 == 0 (16-byte TMA rows)";
  if (g.out_bytes == 0 || (g.n * g.out_bytes) % 16 != 0) *err = "the output rows must span a multiple of 16 bytes";
  const int64_t m_tiles = (g.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (g.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  if (m_tiles * n_tiles >= (int64_t{1} << 31)) *err = "too many output tiles for one launch";
  if (!err->empty()) return p;
  // A: (M rows, K inner) in boxes of 128 K x 128 rows; B: (N rows, K inner), 128 K x BlockN.
  p.a = row_major_map(g.a, 1, g.m, g.k, 1, false, Cfg::kBlockK, Cfg::kBlockM);
  p.b = row_major_map(g.b, 1, g.n, g.k, 1, false, Cfg::kBlockK, Cfg::kBRows);
  const uint32_t epi_cols = Cfg::kEpiRowBytes / g.out_bytes;
  p.d = row_major_map(g.d, g.out_bytes, g.m, g.n, 1, true, epi_cols, Cfg::kBlockM);
  p.order = TileOrder::make(static_cast<int>(m_tiles), static_cast<int>(n_tiles), 1, 1, 1, g.group_m);
  p.k_blocks = static_cast<int>(mx_scale_k_tiles(g.k));
  p.grid_ctas = static_cast<uint32_t>(m_tiles * n_tiles);
  return p;
}

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Operand, TensorMap*) -> std::string` ("" on success). C is never read (its map is D's).
template <class Ops, class MakeMap>
std::string make_mx_gemm_params(const MxGemmShape& g, const MxGemmPlan& plan, MakeMap&& make_map,
                                MxGemmParams<Ops>* out) {
  std::string e;
  if (!(e = make_map(plan.a, Operand::kA, &out->tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Operand::kB, &out->tma_b)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kC, &out->tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->tma_d)).empty()) return e;
  out->order = plan.order;
  out->k_blocks = plan.k_blocks;
  out->trans_a = 0;
  out->trans_b = 1;
  out->a_batched = out->b_batched = out->c_batched = 0;
  out->has_c = 0;
  out->alpha = 1.0f;
  out->beta = 0.0f;
  out->sfa = static_cast<const uint8_t*>(g.sfa);
  out->sfb = static_cast<const uint8_t*>(g.sfb);
  out->sfa_row_tiles = static_cast<int>(mx_scale_row_tiles(g.m));
  out->sfb_row_tiles = static_cast<int>(mx_scale_row_tiles(g.n));
  out->a_fmt = static_cast<uint32_t>(g.a_fmt);
  out->b_fmt = static_cast<uint32_t>(g.b_fmt);
  return "";
}

}  // namespace jax_sm100::kernels::sm100
