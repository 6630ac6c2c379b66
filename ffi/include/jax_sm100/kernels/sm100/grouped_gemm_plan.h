// The host plan of one sm_100a M-grouped GEMM launch: tensor-map descriptions, the grouped
// tile order, the grid. CUDA-free and XLA-free, so the CUDA launcher
// (ffi/src/sm100/grouped_gemm_launch.cu) and the CPU emulator's harness (tests/emu) build
// the very same launch from it.
//
// The tile count depends on group_sizes, which live on the device: the grid is sized by
// GroupedOrder::max_tile_rows() x n_tiles clusters, and work items past the real count
// (known to every CTA from its group table) do nothing.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "jax_sm100/kernels/sm100/grouped_gemm_config.h"

namespace jax_sm100::kernels::sm100 {

/// One M-grouped GEMM as the launcher sees it (row-major; ffi/src/common/grouped_problem.h).
struct GroupedShape {
  const void* lhs = nullptr;            ///< (m, k)
  const void* rhs = nullptr;            ///< (g, k, n), or (g, n, k) when trans_rhs
  const int32_t* group_sizes = nullptr; ///< (g,)
  void* out = nullptr;                  ///< (m, n)
  uint32_t out_bytes = 2;
  int64_t m = 0, n = 0, k = 0, g = 1;
  bool trans_rhs = false;
  int group_m = 8;                      ///< tile rows per L2 band inside a group
  int table_entries = 0;                ///< 0: the config's; a test may ask for fewer
};

struct GroupedPlan {
  MapSpec a, b, d;
  GroupedOrder order;
  int k_blocks = 0;
  uint32_t grid_ctas = 0;  ///< one CTA per possible tile
};

/// The plan of `g` for configuration Cfg; "" or an error sentence in *err.
template <class Cfg>
GroupedPlan plan_grouped(const GroupedShape& g, std::string* err) {
  GroupedPlan p;
  *err = "";
  const int table = g.table_entries > 0 ? g.table_entries : Cfg::kTableEntries;
  if (g.k <= 0) *err = "the sm100 grouped GEMM needs K >= 1 (the handler fills zeros itself)";
  if (g.m <= 0 || g.n <= 0 || g.g <= 0) *err = "the sm100 grouped GEMM needs M, N and G >= 1";
  if (g.m >= (int64_t{1} << 31) || g.n >= (int64_t{1} << 31) || g.g >= (int64_t{1} << 31))
    *err = "M, N and G must be below 2^31";
  if (table < 2 || table > Cfg::kTableEntries) *err = "the group table holds 2 to kTableEntries entries";
  if (!err->empty()) return p;
  const int64_t n_tiles = (g.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  p.order = GroupedOrder::make(static_cast<int>(g.m), static_cast<int>(g.g), Cfg::kBlockM,
                               static_cast<int>(n_tiles), g.group_m, table);
  const int64_t units = p.order.max_tile_rows() * n_tiles;
  if (units >= (int64_t{1} << 31) || int64_t(p.order.group_m) * n_tiles >= (int64_t{1} << 31)) {
    *err = "too many output tiles (up to " + std::to_string(units) + ") for one launch";
    return p;
  }
  // lhs (M, K) K-major in boxes of 64 K x 128 rows (rows past a group's end are loaded
  // but feed only output rows that are not stored).
  p.a = row_major_map(g.lhs, 2, g.m, g.k, 1, false, 64, Cfg::kBlockM);
  // rhs per group: (N, K) K-major in boxes of 64 K x BlockN rows, or (K, N) in boxes of
  // 64 N x 64 K; the group is the outer (batch) coordinate.
  p.b = g.trans_rhs ? row_major_map(g.rhs, 2, g.n, g.k, g.g, true, 64, Cfg::kBRows)
                    : row_major_map(g.rhs, 2, g.k, g.n, g.g, true, 64, 64);
  p.d = row_major_map(g.out, g.out_bytes, g.m, g.n, 1, true, Cfg::kEpiRowBytes / g.out_bytes, Cfg::kBlockM);
  p.k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  p.grid_ctas = static_cast<uint32_t>(units);
  return p;
}

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Operand, TensorMap*) -> std::string` ("" on success).
template <class Ops, class MakeMap>
std::string make_grouped_params(const GroupedShape& g, const GroupedPlan& plan, MakeMap&& make_map,
                                GroupedGemmParams<Ops>* out) {
  std::string e;
  if (!(e = make_map(plan.a, Operand::kA, &out->gemm.tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Operand::kB, &out->gemm.tma_b)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->gemm.tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->gemm.tma_d)).empty()) return e;
  out->gemm.k_blocks = plan.k_blocks;
  out->gemm.trans_a = 0;
  out->gemm.trans_b = g.trans_rhs ? 1 : 0;
  out->gemm.a_batched = out->gemm.b_batched = out->gemm.c_batched = 0;
  out->gemm.has_c = 0;
  out->gemm.alpha = 1.f;
  out->gemm.beta = 0.f;
  out->order = plan.order;
  out->group_sizes = g.group_sizes;
  out->out = static_cast<uint8_t*>(g.out);
  out->n = static_cast<int>(g.n);
  return "";
}

}  // namespace jax_sm100::kernels::sm100
