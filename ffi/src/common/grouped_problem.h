// The grouped (mixture-of-experts) GEMMs' problem descriptions and group bookkeeping, as
// the handlers validate them (common/grouped_validate.h) and the launch layers
// (sm90/grouped_gemm_launch.h, sm100/grouped_*_launch.h) take them. No CUDA and no XLA
// headers here.
//
// Group bookkeeping (every kind). jax.lax.ragged_dot's rule (its CPU lowering, checked on
// jax 0.10.2) is: end_g = size_0 + ... + size_g, start_g = end_{g-1} (start_0 = 0), and row
// r gets the sum of lhs[r] @ rhs[g] over every g with start_g <= r < end_g. For
// non-negative sizes the groups are disjoint and contiguous in group order; a group that
// runs past M is cut at M (the groups after it are empty), and rows past the last group's
// end belong to no group (zeros in the output, no contribution to a K-grouped product).
// Ours is exactly that rule for non-negative sizes. A negative size counts as 0 here; lax
// instead starts the next group earlier, so that groups overlap and their products add up
// (negative sizes are invalid input: the Python ops refuse them where they are known at
// trace time). Computed overflow-free in 64 bits (group_row_bounds below):
//   start_0 = 0,  end_g = min(start_g + max(size_g, 0), M),  start_{g+1} = end_g.
// group_sizes lives on the device and is read by the kernels only (no host
// synchronisation); the CPU handlers read it on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/ffi_checks.h"

namespace jax_sm100::host {

/// The kernel choice of one grouped call (FFI attributes block_m, block_n), made in Python.
struct GroupedTiling {
  int block_m = 128, block_n = 128;
};

/// M-grouped: out[r, :] = lhs[r, :] @ rhs[g(r)] for every row r of group g(r); rows that
/// belong to no group are written as zeros. (Forward of ragged_dot and its lhs gradient.)
struct GroupedGemmProblem {
  const void* lhs;             ///< (m, k) row-major, bf16 or f16
  const void* rhs;             ///< (g, k, n) row-major; (g, n, k) when trans_rhs
  const int32_t* group_sizes;  ///< (g,) int32, device memory
  void* out;                   ///< (m, n) row-major, out_type
  ElemType in_type;            ///< bf16 or f16 (lhs and rhs share it)
  ElemType out_type;           ///< bf16, f16 or f32
  int64_t m, k, n, g;
  bool trans_rhs;
  GroupedTiling tiling;
};

/// K-grouped: out[g] = lhs[rows of g]^T @ dy[rows of g] for every group (zeros for an
/// empty group). (The rhs gradient of ragged_dot: the contraction runs over the group's
/// rows.)
struct KGroupedGemmProblem {
  const void* lhs;             ///< (m, k) row-major, bf16 or f16
  const void* dy;              ///< (m, n) row-major, same type as lhs
  const int32_t* group_sizes;  ///< (g,) int32, device memory
  void* out;                   ///< (g, k, n) row-major, out_type
  ElemType in_type;
  ElemType out_type;           ///< bf16, f16 or f32
  int64_t m, k, n, g;
  GroupedTiling tiling;
};

/// FP8 M-grouped (the DeepSeek recipe per expert): out[r] = (a[r] * a_scale[r]) @
/// (b[g(r)] * b_scale[g(r)])^T for rows of a group, zeros elsewhere. Scale layouts as in
/// the dense FP8 GEMM (common/fp8_problem.h): a's 1x128 scales transposed and padded,
/// b's 128x128 scales per expert.
struct Fp8GroupedGemmProblem {
  const void* a;               ///< (m, k) e4m3
  const float* a_scale_t;      ///< (ceil(k/128), mp) f32, mp = round_up(m, 4)
  const void* b;               ///< (g, n, k) e4m3
  const float* b_scale;        ///< (g, ceil(n/128), ceil(k/128)) f32
  const int32_t* group_sizes;  ///< (g,) int32, device memory
  void* out;                   ///< (m, n) bf16
  int64_t m, n, k, g, mp;
  GroupedTiling tiling;
};

/// The (block_m, block_n) tiles the grouped targets accept on every platform (a
/// configuration the GPU would refuse is refused on the CPU too): the bf16/fp16 M- and
/// K-grouped targets, and the FP8 target (also 256-row tiles). The sm90 launch layer
/// may compile a subset per target (check_sm90_grouped_tiling says which).
constexpr int kGroupedTilings[][2] = {{128, 128}, {128, 256}};
constexpr int kFp8GroupedTilings[][2] = {{128, 128}, {128, 256}, {256, 128}};

/// "" when (block_m, block_n) is one of `tilings` (default: kGroupedTilings), else why,
/// naming the valid set.
template <size_t N = 2>
inline std::string check_grouped_tiling(const GroupedTiling& t,
                                        const int (&tilings)[N][2] = kGroupedTilings) {
  std::string set;
  for (const auto& v : tilings) {
    if (v[0] == t.block_m && v[1] == t.block_n) return "";
    set += (set.empty() ? "(" : ", (") + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
  }
  return "no grouped kernel for (block_m, block_n) = (" + std::to_string(t.block_m) + ", " +
         std::to_string(t.block_n) + "); the valid tiles are " + set;
}

/// The group bookkeeping rule (file comment) on a host copy of group_sizes: bounds[0] = 0
/// and group i owns rows [bounds[i], bounds[i + 1]) of the m rows; bounds has g + 1
/// entries. Rows from bounds[g] on belong to no group.
inline void group_row_bounds(const int32_t* sizes, int64_t g, int64_t m, int64_t* bounds) {
  int64_t start = 0;
  bounds[0] = 0;
  for (int64_t i = 0; i < g; ++i) {
    const int64_t s = sizes[i] > 0 ? sizes[i] : 0;
    start = start + s < m ? start + s : m;
    bounds[i + 1] = start;
  }
}

/// Nothing to write (the handler returns at once).
inline bool grouped_empty(const GroupedGemmProblem& p) { return p.m == 0 || p.n == 0; }
inline bool grouped_empty(const KGroupedGemmProblem& p) {
  return p.g == 0 || p.k == 0 || p.n == 0;
}
inline bool grouped_empty(const Fp8GroupedGemmProblem& p) { return p.m == 0 || p.n == 0; }

/// No product to run: the whole output is zeros (every row in no group, no group, or an
/// empty contraction). Checked after grouped_empty().
inline bool grouped_all_zero(const GroupedGemmProblem& p) { return p.g == 0 || p.k == 0; }
inline bool grouped_all_zero(const KGroupedGemmProblem& p) { return p.m == 0; }
inline bool grouped_all_zero(const Fp8GroupedGemmProblem& p) { return p.g == 0 || p.k == 0; }

}  // namespace jax_sm100::host
