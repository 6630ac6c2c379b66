// The host plan of one sm_100a K-grouped GEMM launch: tensor-map descriptions, the tile
// order, the grid. CUDA-free and XLA-free, so the CUDA launcher
// (ffi/src/sm100/kgrouped_gemm_launch.cu) and the CPU emulator's harness
// (tests/emu/sm100_kgrouped_emu_test.cc) build the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm100/gemm_plan.h"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_config.h"

namespace jax_sm100::kernels::sm100 {

/// One K-grouped GEMM as the launcher sees it (row-major; ffi/src/common/grouped_problem.h).
struct KGroupedShape {
  const void* lhs = nullptr;            ///< (m, k)
  const void* dy = nullptr;             ///< (m, n)
  const int32_t* group_sizes = nullptr; ///< (g,)
  void* out = nullptr;                  ///< (g, k, n)
  uint32_t out_bytes = 2;
  int64_t m = 0, n = 0, k = 0, g = 1;
  int group_m = 8;                      ///< tile rows per L2 band of the dense order
  int table_entries = 0;                ///< 0: the config's; a test may ask for fewer
};

struct KGroupedPlan {
  MapSpec a, b, d;
  TileOrder order;
  GroupedOrder groups;
  uint32_t grid_ctas = 0;  ///< one CTA per output tile
};

/// The plan of `g` for configuration Cfg; "" or an error sentence in *err.
template <class Cfg>
KGroupedPlan plan_kgrouped(const KGroupedShape& g, std::string* err) {
  KGroupedPlan p;
  *err = "";
  const int table = g.table_entries > 0 ? g.table_entries : Cfg::kTableEntries;
  if (g.m <= 0) *err = "the sm100 K-grouped GEMM needs M >= 1 (the handler fills zeros itself)";
  if (g.k <= 0 || g.n <= 0 || g.g <= 0) *err = "the sm100 K-grouped GEMM needs K, N and G >= 1";
  if (g.m >= (int64_t{1} << 31) || g.n >= (int64_t{1} << 31) || g.k >= (int64_t{1} << 31) ||
      g.g >= (int64_t{1} << 31))
    *err = "M, N, K and G must be below 2^31";
  if (table < 2 || table > Cfg::kTableEntries) *err = "the group table holds 2 to kTableEntries entries";
  if (!err->empty()) return p;
  const int64_t k_tiles = (g.k + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (g.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int64_t units = k_tiles * n_tiles * g.g;
  if (units >= (int64_t{1} << 31) || int64_t(g.group_m) * n_tiles >= (int64_t{1} << 31)) {
    *err = "too many output tiles (" + std::to_string(units) + ") for one launch";
    return p;
  }
  // lhs (M, K): the MN-major A, boxes of 64 K (output rows) x 64 contraction rows; dy (M,
  // N): the N-major B, boxes of 64 N x 64 rows; out (G, K, N) in the GEMM's staging boxes.
  p.a = row_major_map(g.lhs, 2, g.m, g.k, 1, false, 64, 64);
  p.b = row_major_map(g.dy, 2, g.m, g.n, 1, false, 64, 64);
  p.d = row_major_map(g.out, g.out_bytes, g.k, g.n, g.g, true, Cfg::kEpiRowBytes / g.out_bytes, Cfg::kBlockM);
  p.order = TileOrder::make(static_cast<int>(k_tiles), static_cast<int>(n_tiles), static_cast<int>(g.g), 1, 1,
                            g.group_m);
  p.groups = GroupedOrder::make(static_cast<int>(g.m), static_cast<int>(g.g), Cfg::kBlockM, 1, 1, table);
  p.grid_ctas = static_cast<uint32_t>(units);
  return p;
}

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Operand, TensorMap*) -> std::string` ("" on success).
template <class Ops, class MakeMap>
std::string make_kgrouped_params(const KGroupedShape& g, const KGroupedPlan& plan, MakeMap&& make_map,
                                 KGroupedGemmParams<Ops>* out) {
  std::string e;
  if (!(e = make_map(plan.a, Operand::kA, &out->gemm.tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Operand::kB, &out->gemm.tma_b)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->gemm.tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Operand::kD, &out->gemm.tma_d)).empty()) return e;
  out->gemm.order = plan.order;
  out->gemm.k_blocks = 0;
  out->gemm.trans_a = 1;
  out->gemm.trans_b = 0;
  out->gemm.a_batched = out->gemm.b_batched = out->gemm.c_batched = 0;
  out->gemm.has_c = 0;
  out->gemm.alpha = 1.f;
  out->gemm.beta = 0.f;
  out->groups = plan.groups;
  out->group_sizes = g.group_sizes;
  return "";
}

}  // namespace jax_sm100::kernels::sm100
