// Checks every handler shares, CUDA or CPU, and the launch layer may read: the element
// types and the kernel configurations the tuning attributes may name, with one sentence
// per refusal naming the valid set. A configuration the GPU would refuse is refused on the
// CPU too. No CUDA and no XLA headers here (common/ffi_args.h reads XLA's types), so the
// launch units, which hold the kernels, compile the same against any jaxlib.
#pragma once

#include <cstdint>
#include <string>

namespace jax_sm100::host {

constexpr int kMaxGroupM = 64;

/// The 16- and 32-bit float element types the handlers take (GEMM operands and output,
/// the quantizers' input).
enum class ElemType { kBF16, kF16, kF32 };

/// Bytes per element.
inline uint32_t elem_bytes(ElemType t) { return t == ElemType::kF32 ? 4 : 2; }

/// The bf16/fp16 kernels' (block_m, block_n, cluster_m).
constexpr int kGemmTilings[][3] = {{128, 256, 1}, {128, 256, 2}, {128, 128, 1},
                                   {128, 128, 2}, {64, 128, 1},  {64, 64, 1}};

/// The FP8 kernel forms (block_m, block_n, cluster, pair_along_n); the first
/// kFp8ResidualForms also exist with the residual epilogue.
struct Fp8Form {
  int block_m, block_n, cluster;
  bool pair_along_n;
};
constexpr Fp8Form kFp8Forms[] = {{128, 64, 1, false},  {128, 64, 2, false}, {128, 128, 1, false},
                                 {128, 128, 2, false}, {192, 128, 1, false}, {256, 128, 1, false},
                                 {256, 128, 2, true}};
constexpr int kFp8NumForms = sizeof(kFp8Forms) / sizeof(kFp8Forms[0]);
constexpr int kFp8ResidualForms = 4;
constexpr int64_t kFp8MaxK = 65536;  // the sm90 kernel's limit, kept on every platform

inline std::string group_m_error(int32_t group_m) {
  if (group_m >= 1 && group_m <= kMaxGroupM) return "";
  return "group_m must be in [1, " + std::to_string(kMaxGroupM) + "] (got " +
         std::to_string(group_m) + ")";
}

/// The tilings (block_m, block_n, cluster_m) that also exist as split-K kernels
/// (split_k > 1: the sm90 kernel of kernels/sm90/gemm_splitk.cuh), and the largest split.
constexpr int kSplitKTilings[][3] = {{64, 64, 1}, {64, 128, 1}};
constexpr int kMaxSplitK = 8;

inline std::string split_k_error(int32_t block_m, int32_t block_n, int32_t cluster_m,
                                 int32_t split_k) {
  if (split_k < 1 || split_k > kMaxSplitK)
    return "split_k must be in [1, " + std::to_string(kMaxSplitK) + "] (got " +
           std::to_string(split_k) + ")";
  if (split_k == 1) return "";
  for (const auto& v : kSplitKTilings)
    if (v[0] == block_m && v[1] == block_n && v[2] == cluster_m) return "";
  return "split_k > 1 needs one of the split-K tilings (64, 64, 1), (64, 128, 1); got (" +
         std::to_string(block_m) + ", " + std::to_string(block_n) + ", " +
         std::to_string(cluster_m) + ")";
}

/// "" when (block_m, block_n, cluster_m, group_m, split_k) is a valid GEMM configuration,
/// else why.
inline std::string check_gemm_tiling(int32_t block_m, int32_t block_n, int32_t cluster_m,
                                     int32_t group_m, int32_t split_k) {
  bool found = false;
  for (const auto& v : kGemmTilings)
    found = found || (v[0] == block_m && v[1] == block_n && v[2] == cluster_m);
  if (!found) {
    std::string set;
    for (const auto& v : kGemmTilings)
      set += (set.empty() ? "" : ", ") + std::string("(") + std::to_string(v[0]) + ", " +
             std::to_string(v[1]) + ", " + std::to_string(v[2]) + ")";
    return "no kernel for (block_m, block_n, cluster_m) = (" + std::to_string(block_m) + ", " +
           std::to_string(block_n) + ", " + std::to_string(cluster_m) +
           "); the valid combinations are " + set;
  }
  const std::string split = split_k_error(block_m, block_n, cluster_m, split_k);
  if (!split.empty()) return split;
  return group_m_error(group_m);
}

inline std::string fp8_form_str(int block_m, int block_n, int cluster, bool pair_along_n) {
  return "(" + std::to_string(block_m) + ", " + std::to_string(block_n) + ", " +
         std::to_string(cluster) + ", " + (pair_along_n ? "true" : "false") + ")";
}

/// "" when the FP8 configuration names a compiled kernel (of the residual ones when
/// `residual`, i.e. beta != 0), else why, naming the valid set.
inline std::string check_fp8_tiling(int32_t block_m, int32_t block_n, int32_t cluster,
                                    bool pair_along_n, int32_t group_m, bool residual) {
  const int n = residual ? kFp8ResidualForms : kFp8NumForms;
  bool found = false;
  for (int i = 0; i < n; ++i) {
    const Fp8Form& f = kFp8Forms[i];
    found = found || (f.block_m == block_m && f.block_n == block_n && f.cluster == cluster &&
                      f.pair_along_n == pair_along_n);
  }
  if (!found) {
    std::string set;
    for (int i = 0; i < n; ++i) {
      const Fp8Form& f = kFp8Forms[i];
      set += (i ? ", " : "") + fp8_form_str(f.block_m, f.block_n, f.cluster, f.pair_along_n);
    }
    return "no kernel for (block_m, block_n, cluster, pair_along_n) = " +
           fp8_form_str(block_m, block_n, cluster, pair_along_n) + "; the valid " +
           (residual ? "combinations with a residual term (beta != 0) are " : "combinations are ") +
           set;
  }
  return group_m_error(group_m);
}

}  // namespace jax_sm100::host
