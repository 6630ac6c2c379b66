// Definitions of the sm90 grouped GEMM launchers for one (input, output) dtype pair:
// tensor maps, tile orders and the persistent launch of the kernel the call's
// (block_m, block_n) names. Included by the grouped_gemm_inst_<in>.cu files only, which
// instantiate them (so the kernels of each input type compile in their own unit).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/grouped_problem.h"
#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/grouped_gemm.cuh"
#include "jax_sm100/kernels/sm90/grouped_gemm_kgrouped.cuh"
#include "sm90/gemm_inst.h"  // encode_operand, tma_dtype
#include "sm90/grouped_gemm_launch.h"

namespace jax_sm100::host {

// The compiled tiles: (BLOCK_M, BLOCK_N, input stages[, D buffers per warpgroup]). 128x128:
// the group table takes the shared memory the dense kernel's sixth stage had (4096 groups
// before the table is chunked). 128x256: one stage more than the dense kernel's 3, paid
// for with 2 D buffers per warpgroup instead of 4 and a 246-entry table (244 groups before
// it is chunked). Its B tiles come mostly from HBM (an expert's weights serve few M
// tiles), whose latency the fourth stage hides: +2-6% on 256-row experts (H200).
using GroupedCfg128x128 = sm90::GroupedGemmConfig<128, 128, 5>;
using GroupedCfg128x256 = sm90::GroupedGemmConfig<128, 256, 4, 2>;

/// Tile rows per L2 band of the M-grouped order (the dense default).
constexpr int kGroupedGroupM = 8;

template <class Cfg, class T, class Out>
std::string launch_m_grouped(const GroupedGemmProblem& pr, int num_sms, cudaStream_t stream) {
  sm90::GroupedGemmParams p{};
  const CUtensorMapDataType in_dt = tma_dtype<T>(), out_dt = tma_dtype<Out>();
  std::string err = encode_operand(&p.tma_a, pr.lhs, in_dt, 2, pr.k, pr.m, 1, 64, Cfg::kBlockM);
  if (!err.empty()) return "lhs: " + err;
  // rhs (G, K, N) N-major -> box {64 N, 64 K}; (G, N, K) K-major -> box {64 K, BN rows}.
  if (pr.trans_rhs)
    err = encode_operand(&p.tma_b, pr.rhs, in_dt, 2, pr.k, pr.n, pr.g, 64, Cfg::kBlockN);
  else
    err = encode_operand(&p.tma_b, pr.rhs, in_dt, 2, pr.n, pr.k, pr.g, 64, 64);
  if (!err.empty()) return "rhs: " + err;
  err = encode_operand(&p.tma_d, pr.out, out_dt, sizeof(Out), pr.n, pr.m, 1, 128 / sizeof(Out), 64);
  if (!err.empty()) return "out: " + err;
  p.group_sizes = pr.group_sizes;
  p.out = pr.out;
  p.m = static_cast<int>(pr.m);
  p.n = static_cast<int>(pr.n);
  p.k = static_cast<int>(pr.k);
  p.trans_b = pr.trans_rhs ? 1 : 0;
  const int64_t n_tiles = (pr.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  p.order = kernels::GroupedOrder::make(p.m, static_cast<int>(pr.g), Cfg::kBlockM,
                                        static_cast<int>(n_tiles), kGroupedGroupM,
                                        Cfg::kTableEntries);
  // The tile count is known on the device only; the grid is sized by its bound.
  const int64_t units = p.order.max_tile_rows() * n_tiles;
  if (units > INT32_MAX || int64_t(kGroupedGroupM) * n_tiles > INT32_MAX)
    return "too many output tiles (up to " + std::to_string(units) + ") for one launch";
  PersistentLaunch l;
  l.cluster = 1;
  l.threads = Cfg::kThreads;
  l.smem_bytes = Cfg::smem_bytes();
  l.smem_limit = static_cast<int>(Cfg::smem_bytes());
  l.units = units;
  l.num_sms = num_sms;
  l.single_cta = SingleCtaLaunch::kPlain;
  return launch_persistent<sm90::sm90_grouped_gemm_kernel<Cfg, T, Out>>(l, stream, p);
}

template <class Cfg, class T, class Out>
std::string launch_k_grouped(const KGroupedGemmProblem& pr, int num_sms, cudaStream_t stream) {
  sm90::KGroupedGemmParams p{};
  const CUtensorMapDataType in_dt = tma_dtype<T>(), out_dt = tma_dtype<Out>();
  // lhs (M, K) as the M-major A (output rows along K): box {64 K, 64 rows}.
  std::string err = encode_operand(&p.tma_a, pr.lhs, in_dt, 2, pr.k, pr.m, 1, 64, 64);
  if (!err.empty()) return "lhs: " + err;
  err = encode_operand(&p.tma_b, pr.dy, in_dt, 2, pr.n, pr.m, 1, 64, 64);
  if (!err.empty()) return "dy: " + err;
  err = encode_operand(&p.tma_d, pr.out, out_dt, sizeof(Out), pr.n, pr.k, pr.g, 128 / sizeof(Out), 64);
  if (!err.empty()) return "out: " + err;
  p.group_sizes = pr.group_sizes;
  p.groups = kernels::GroupedOrder::make(static_cast<int>(pr.m), static_cast<int>(pr.g), Cfg::kBlockM,
                                         1, 1, Cfg::kTableEntries);
  const int64_t k_tiles = (pr.k + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (pr.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int64_t units = k_tiles * n_tiles * pr.g;
  if (units > INT32_MAX || int64_t(kGroupedGroupM) * n_tiles > INT32_MAX)
    return "too many output tiles (" + std::to_string(units) + ") for one launch";
  p.order = kernels::TileOrder::make(static_cast<int>(k_tiles), static_cast<int>(n_tiles),
                                     static_cast<int>(pr.g), 1, 1, kGroupedGroupM);
  PersistentLaunch l;
  l.cluster = 1;
  l.threads = Cfg::kThreads;
  l.smem_bytes = Cfg::smem_bytes();
  l.smem_limit = static_cast<int>(Cfg::smem_bytes());
  l.units = units;
  l.num_sms = num_sms;
  l.single_cta = SingleCtaLaunch::kPlain;
  return launch_persistent<sm90::sm90_kgrouped_gemm_kernel<Cfg, T, Out>>(l, stream, p);
}

template <class T, class Out>
std::string sm90_grouped_gemm_launch_typed(const GroupedGemmProblem& pr, int num_sms,
                                           cudaStream_t stream) {
  if (pr.tiling.block_m == 128 && pr.tiling.block_n == 128)
    return launch_m_grouped<GroupedCfg128x128, T, Out>(pr, num_sms, stream);
  if (pr.tiling.block_m == 128 && pr.tiling.block_n == 256)
    return launch_m_grouped<GroupedCfg128x256, T, Out>(pr, num_sms, stream);
  return check_sm90_grouped_tiling(pr.tiling);
}

template <class T, class Out>
std::string sm90_kgrouped_gemm_launch_typed(const KGroupedGemmProblem& pr, int num_sms,
                                            cudaStream_t stream) {
  if (pr.tiling.block_m == 128 && pr.tiling.block_n == 128)
    return launch_k_grouped<GroupedCfg128x128, T, Out>(pr, num_sms, stream);
  if (pr.tiling.block_m == 128 && pr.tiling.block_n == 256)
    return launch_k_grouped<GroupedCfg128x256, T, Out>(pr, num_sms, stream);
  return check_sm90_grouped_tiling(pr.tiling);
}

/// Both launchers for the input type T and every output type.
#define JAX_SM100_GROUPED_INSTANTIATE(T)                                                       \
  template std::string sm90_grouped_gemm_launch_typed<T, __nv_bfloat16>(const GroupedGemmProblem&, \
                                                                        int, cudaStream_t);    \
  template std::string sm90_grouped_gemm_launch_typed<T, __half>(const GroupedGemmProblem&, int,   \
                                                                 cudaStream_t);                \
  template std::string sm90_grouped_gemm_launch_typed<T, float>(const GroupedGemmProblem&, int,    \
                                                                cudaStream_t);                 \
  template std::string sm90_kgrouped_gemm_launch_typed<T, __nv_bfloat16>(                       \
      const KGroupedGemmProblem&, int, cudaStream_t);                                          \
  template std::string sm90_kgrouped_gemm_launch_typed<T, __half>(const KGroupedGemmProblem&,  \
                                                                  int, cudaStream_t);          \
  template std::string sm90_kgrouped_gemm_launch_typed<T, float>(const KGroupedGemmProblem&,   \
                                                                 int, cudaStream_t);

}  // namespace jax_sm100::host
