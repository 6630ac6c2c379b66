// The host plan of one sm_100a FP8 blockwise M-grouped GEMM launch: tensor-map
// descriptions, the grouped tile order, the grid. CUDA-free and XLA-free, so the CUDA
// launcher (ffi/src/sm100/grouped_fp8_launch.cu) and the CPU emulator's harness
// (tests/emu/sm100_grouped_fp8_emu_test.cc) build the very same launch from it.
//
// As in the bf16 grouped plan, the grid holds one cluster per possible tile
// (GroupedOrder::max_tile_rows() x n_tiles): the real count depends on group_sizes, which
// live on the device; work items past it do nothing.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm100/fp8_plan.h"
#include "jax_sm100/kernels/sm100/grouped_fp8_config.h"

namespace jax_sm100::kernels::sm100 {

/// One FP8 M-grouped GEMM as the launcher sees it (ffi/src/common/grouped_problem.h).
struct GroupedFp8Shape {
  const void* a = nullptr;              ///< (m, k) e4m3
  const float* a_scale_t = nullptr;     ///< (ceil(k/128), mp) f32
  const void* b = nullptr;              ///< (g, n, k) e4m3
  const float* b_scale = nullptr;       ///< (g, ceil(n/128), ceil(k/128)) f32
  const int32_t* group_sizes = nullptr; ///< (g,)
  void* out = nullptr;                  ///< (m, n) bf16
  int64_t m = 0, n = 0, k = 0, g = 1;
  int64_t mp = 0;                       ///< round_up(m, 4): a_scale_t's row length
  int group_m = 8;                      ///< tile rows per L2 band inside a group
  int table_entries = 0;                ///< 0: the config's; a test may ask for fewer
};

struct GroupedFp8Plan {
  MapSpec a, b, sfa, d;
  GroupedOrder order;
  int k_blocks = 0, n_blocks = 0;
  uint32_t grid_ctas = 0;  ///< one CTA per possible tile
};

/// The plan of `g`; "" or an error sentence in *err.
inline GroupedFp8Plan plan_grouped_fp8(const GroupedFp8Shape& g, std::string* err) {
  using Cfg = GroupedFp8GemmConfig;
  GroupedFp8Plan p;
  *err = "";
  const int table = g.table_entries > 0 ? g.table_entries : Cfg::kTableEntries;
  if (g.k <= 0 || g.k % 16 != 0) *err = "the sm100 FP8 grouped GEMM needs K >= 16, a multiple of 16";
  if (g.n <= 0 || g.n % 8 != 0) *err = "the sm100 FP8 grouped GEMM needs N >= 8, a multiple of 8";
  if (g.m <= 0 || g.g <= 0) *err = "the sm100 FP8 grouped GEMM needs M and G >= 1";
  if (g.mp < g.m || g.mp % 4 != 0) *err = "a_scale_t's rows must hold round_up(M, 4) scales";
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
  p.k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  p.n_blocks = static_cast<int>(n_tiles);  // one B-scale block per 128-column tile
  // a: K-major in boxes of 128 K x 128 rows (rows past a group's end are loaded but feed
  // only output rows that are not stored); b per group: (N, K) K-major, the group the
  // outer (batch) coordinate.
  p.a = row_major_map(g.a, 1, g.m, g.k, 1, false, Cfg::kBlockK, Cfg::kBlockM);
  p.b = row_major_map(g.b, 1, g.n, g.k, g.g, true, Cfg::kBlockK, Cfg::kBRows);
  // A's scales: one row of mp floats per K block, boxes of the tile's 128 rows from its
  // first row (rows past mp load as zeros). No swizzle.
  p.sfa = row_major_map(g.a_scale_t, 4, p.k_blocks, g.mp, 1, false, Cfg::kSfaElems, 1);
  p.sfa.swizzle_bytes = 0;
  p.d = row_major_map(g.out, 2, g.m, g.n, 1, false, Cfg::kEpiRowBytes / 2, Cfg::kBlockM);
  p.grid_ctas = static_cast<uint32_t>(units);
  return p;
}

/// Kernel parameters for `plan`, the tensor maps made by `make_map(const MapSpec&,
/// Fp8Operand, TensorMap*) -> std::string` ("" on success).
template <class Ops, class MakeMap>
std::string make_grouped_fp8_params(const GroupedFp8Shape& g, const GroupedFp8Plan& plan, MakeMap&& make_map,
                                    GroupedFp8GemmParams<Ops>* out) {
  std::string e;
  Fp8GemmParams<Ops>& q = out->gemm;
  if (!(e = make_map(plan.a, Fp8Operand::kA, &q.tma_a)).empty()) return e;
  if (!(e = make_map(plan.b, Fp8Operand::kB, &q.tma_b)).empty()) return e;
  if (!(e = make_map(plan.sfa, Fp8Operand::kAScale, &q.tma_sfa)).empty()) return e;
  if (!(e = make_map(plan.d, Fp8Operand::kD, &q.tma_c)).empty()) return e;
  if (!(e = make_map(plan.d, Fp8Operand::kD, &q.tma_d)).empty()) return e;
  q.k_blocks = plan.k_blocks;
  q.trans_a = q.trans_b = 0;
  q.a_batched = q.b_batched = q.c_batched = 0;
  q.has_c = 0;
  q.alpha = 1.f;
  q.beta = 0.f;
  q.b_scale = g.b_scale;
  out->order = plan.order;
  out->group_sizes = g.group_sizes;
  out->out = static_cast<uint8_t*>(g.out);
  out->n = static_cast<int>(g.n);
  out->n_blocks = plan.n_blocks;
  return "";
}

}  // namespace jax_sm100::kernels::sm100
