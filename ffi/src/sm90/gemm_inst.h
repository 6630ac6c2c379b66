// Definition of sm90_gemm_launch<T, Out>: tensor maps, tile order and the launch of the
// kernel instantiation that the call's (block_m, block_n, cluster_m) names. Included by
// the six gemm_inst_<in>_<out>.cu files, so the 72 plain and residual kernel
// instantiations (12 per dtype pair) compile in parallel translation units, and by the
// four gemm_bias_inst_<in>_<out>.cu files, whose sm90_gemm_bias_launch instantiates the
// bias/activation kernels (6 tilings x 5 activations per pair; gemm_launch.h declares
// them extern, so the gemm_inst units do not compile them again), and by the two
// gemm_dact_inst_<in>.cu files (sm90_gemm_dact_launch: 2 tilings x 4 activations).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm90/gemm.cuh"
#include "jax_sm100/kernels/sm90/gemm_splitk.cuh"
#include "common/launch.h"
#include "common/tensor_map.h"
#include "sm90/gemm_launch.h"

namespace jax_sm100::host {

namespace sm90 = jax_sm100::kernels::sm90;

// The split the handlers accept (common/ffi_checks.h, and tuning.MAX_SPLIT_K in Python,
// pinned by the CPU tests) is the split the kernel's reduction holds.
static_assert(sm90::kMaxSplitK == kMaxSplitK,
              "the handlers' split limit (common/ffi_checks.h) is the split-K kernel's");

// Tile configs: (BLOCK_M, BLOCK_N, input stages, C stages[, consumer warpgroups]). The
// residual variants trade input stages for a 4-deep C ring (which also stages D) so
// that everything fits in 227 KB of shared memory. Measured on H200:
// 128x256 with 3 input stages runs as fast as with 4 (8192^3 and 4096x7168x2048), so
// the plain 128x256 kernel spends the 4th stage's smem on a whole-tile D staging area.
using Cfg128x256 = sm90::GemmConfig<128, 256, 3, 0>;
using Cfg128x256R = sm90::GemmConfig<128, 256, 3, 4>;
using Cfg128x128 = sm90::GemmConfig<128, 128, 6, 0>;
using Cfg128x128R = sm90::GemmConfig<128, 128, 5, 4>;
using Cfg64x128 = sm90::GemmConfig<64, 128, 8, 0>;
using Cfg64x128R = sm90::GemmConfig<64, 128, 6, 4>;
using Cfg64x64 = sm90::GemmConfig<64, 64, 12, 0, 1>;
using Cfg64x64R = sm90::GemmConfig<64, 64, 11, 4, 1>;
// 2-CTA clusters with B multicast.
using Cfg128x256C2 = sm90::GemmConfig<128, 256, 3, 0, 2, 2>;
using Cfg128x256RC2 = sm90::GemmConfig<128, 256, 3, 4, 2, 2>;
using Cfg128x128C2 = sm90::GemmConfig<128, 128, 6, 0, 2, 2>;
using Cfg128x128RC2 = sm90::GemmConfig<128, 128, 5, 4, 2, 2>;
// The bias/activation kernels: sm90::GemmBiasConfig<plain config, activation>, the plain
// config's stages and D buffers plus a (NumWG, kWgTileN) f32 bias slice.
// The split-K kernels (split_k > 1; one kernel per tiling serves the plain, residual and
// bias/activation epilogues): 96 KB of stages, two CTAs per SM.
using SplitK64x64 = sm90::SplitKConfig<64, 6>;
using SplitK64x128 = sm90::SplitKConfig<128, 4>;

template <class X>
inline CUtensorMapDataType tma_dtype() {
  if constexpr (std::is_same_v<X, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (std::is_same_v<X, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/// A rank-3 [batch, outer, inner] row-major operand read/written in 128B-swizzled boxes
/// of box_outer rows x box_inner elements.
inline std::string encode_operand(CUtensorMap* map, const void* base, CUtensorMapDataType dt,
                                  uint32_t elem_bytes, int64_t inner, int64_t outer,
                                  int64_t batch, uint32_t box_inner, uint32_t box_outer) {
  const TensorMapSpec s{base, dt, elem_bytes, /*rank=*/3, static_cast<uint64_t>(inner),
                        static_cast<uint64_t>(outer), static_cast<uint64_t>(batch),
                        /*row_pitch_bytes=*/0, box_inner, box_outer, CU_TENSOR_MAP_SWIZZLE_128B};
  return encode_tensor_map(map, s);
}

/// Rows of A's TMA box for tiles of block_m rows on clusters of `cluster` CTAs along M:
/// round_up(M, 8) when one M tile holds all of M, A is K-major and the CTA is alone
/// (a pair's second CTA lies wholly past M), else block_m. Fewer rows than the tile: the
/// loads skip TMA's zero fill of rows that only feed output rows >= M.
inline uint32_t short_a_rows(const GemmProblem& pr, int block_m, int cluster) {
  if (pr.trans_a || cluster != 1 || pr.m >= block_m) return static_cast<uint32_t>(block_m);
  return static_cast<uint32_t>((pr.m + 7) / 8 * 8);
}

/// The fields GemmParams and SplitKParams share (sizes, batch flags, layouts, alpha,
/// beta), from the validated problem (its sizes fit 32 bits: validate_gemm).
template <class Params>
void set_problem_fields(Params& p, const GemmProblem& pr) {
  p.m = (int)pr.m;
  p.n = (int)pr.n;
  p.k = (int)pr.k;
  p.batch = (int)pr.batch;
  p.a_batched = pr.a_batched;
  p.b_batched = pr.b_batched;
  p.c_batched = pr.c_batched;
  p.trans_a = pr.trans_a;
  p.trans_b = pr.trans_b;
  p.alpha = pr.alpha;
  p.beta = pr.beta;
}

/// Builds the tensor maps and the tile order, and launches one config. Returns "" or an
/// error sentence.
template <class Cfg, class T, class Out>
std::string launch_config(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  sm90::GemmParams p{};
  const CUtensorMapDataType in_dt = tma_dtype<T>(), out_dt = tma_dtype<Out>();
  const int64_t ba = pr.a_batched ? pr.batch : 1, bb = pr.b_batched ? pr.batch : 1;
  std::string err;
  // A: (M, K) K-major -> box {64 K, BM rows}, or {64 K, a_rows} when one M tile holds
  // all of M (gemm.cuh, "Partial tiles"); (K, M) M-major -> box {64 M, 64 K}.
  const uint32_t a_rows = short_a_rows(pr, Cfg::kBlockM, Cfg::kCluster);
  if (!pr.trans_a)
    err = encode_operand(&p.tma_a, pr.a, in_dt, 2, pr.k, pr.m, ba, 64, a_rows);
  else
    err = encode_operand(&p.tma_a, pr.a, in_dt, 2, pr.m, pr.k, ba, 64, 64);
  if (!err.empty()) return "A: " + err;
  // B: (K, N) N-major -> box {64 N, 64 K}; (N, K) K-major -> box {64 K, BN rows}.
  if (!pr.trans_b)
    err = encode_operand(&p.tma_b, pr.b, in_dt, 2, pr.n, pr.k, bb, 64, 64);
  else  // each CTA of a cluster loads (and multicasts) BN / cluster rows
    err = encode_operand(&p.tma_b, pr.b, in_dt, 2, pr.k, pr.n, bb, 64,
                         Cfg::kBlockN / Cfg::kCluster);
  if (!err.empty()) return "B: " + err;
  // D (and C): (M, N) row-major, epilogue chunks of 64 rows x 128 bytes.
  const uint32_t epi_n = 128 / sizeof(Out);
  err = encode_operand(&p.tma_d, pr.d, out_dt, sizeof(Out), pr.n, pr.m, pr.batch, epi_n, 64);
  if (!err.empty()) return "D: " + err;
  if constexpr (Cfg::kBiasAct) {
    if (pr.pre != nullptr) {  // the pre-activation: D's shape, type and box
      err = encode_operand(&p.tma_pre, pr.pre, out_dt, sizeof(Out), pr.n, pr.m, pr.batch, epi_n, 64);
      if (!err.empty()) return "pre: " + err;
    }
    p.bias = pr.bias;
    p.has_pre = pr.pre != nullptr;
  }
  if constexpr (Cfg::kDact) p.dbias = pr.dbias;
  if constexpr (Cfg::kResidual) {
    const int64_t bc = pr.c_batched ? pr.batch : 1;
    err = encode_operand(&p.tma_c, pr.c, out_dt, sizeof(Out), pr.n, pr.m, bc, epi_n, 64);
    if (!err.empty()) return "C: " + err;
  }
  set_problem_fields(p, pr);
  static_assert(Cfg::kATileBytes + Cfg::kBTileBytes == Cfg::kPayloadBytes / Cfg::kStages,
                "stage transaction bytes out of step with the payload");
  p.stage_tx_bytes = a_rows * Cfg::kBlockK * 2 + Cfg::kBTileBytes;
  // Work units: cluster tiles (kCluster M tiles x 1 N tile), walked in groups of
  // group_m cluster rows. The kernel indexes them with 31-bit integers.
  const int64_t m_tiles = (pr.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (pr.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int64_t units = (m_tiles + Cfg::kCluster - 1) / Cfg::kCluster * n_tiles * pr.batch;
  if (units > INT32_MAX || (int64_t)pr.tiling.group_m * n_tiles > INT32_MAX)
    return "too many output tiles (" + std::to_string(units) + ") for one launch";
  p.order = kernels::TileOrder::make((int)m_tiles, (int)n_tiles, (int)pr.batch, Cfg::kCluster, 1,
                                     pr.tiling.group_m);

  // Persistent grid: at most one CTA per SM, whole clusters, no more than the units.
  // Single CTAs launch with <<<>>>, without the cluster attribute: the cheaper launch
  // path for microsecond kernels.
  PersistentLaunch l;
  l.cluster = Cfg::kCluster;
  l.threads = Cfg::kThreads;
  l.smem_bytes = Cfg::smem_bytes();
  l.smem_limit = static_cast<int>(Cfg::smem_bytes());
  l.units = units;
  l.num_sms = num_sms;
  l.single_cta = SingleCtaLaunch::kPlain;
  return launch_persistent<sm90::sm90_gemm_kernel<Cfg, T, Out>>(l, stream, p);
}

/// Launches the split-K kernel of one tiling: one cluster of split_k CTAs per 64 x BN
/// output tile, each running 1/split_k of the K blocks. Returns "" or an error sentence.
template <class Cfg, class T, class Out>
std::string launch_splitk(const GemmProblem& pr, cudaStream_t stream) {
  sm90::SplitKParams p{};
  const CUtensorMapDataType in_dt = tma_dtype<T>();
  const int64_t ba = pr.a_batched ? pr.batch : 1, bb = pr.b_batched ? pr.batch : 1;
  // The boxes of launch_config with 64-row A tiles (A's stopping at M likewise).
  const uint32_t a_rows = short_a_rows(pr, Cfg::kBlockM, 1);
  std::string err = !pr.trans_a ? encode_operand(&p.tma_a, pr.a, in_dt, 2, pr.k, pr.m, ba, 64, a_rows)
                                : encode_operand(&p.tma_a, pr.a, in_dt, 2, pr.m, pr.k, ba, 64, 64);
  if (!err.empty()) return "A: " + err;
  err = !pr.trans_b ? encode_operand(&p.tma_b, pr.b, in_dt, 2, pr.n, pr.k, bb, 64, 64)
                    : encode_operand(&p.tma_b, pr.b, in_dt, 2, pr.k, pr.n, bb, 64, Cfg::kBlockN);
  if (!err.empty()) return "B: " + err;
  p.c = pr.c;
  p.d = pr.d;
  p.pre = pr.pre;
  p.bias = pr.bias;
  set_problem_fields(p, pr);
  p.activation = pr.activation;
  p.stage_tx_bytes = a_rows * Cfg::kBlockK * 2 + Cfg::kBTileBytes;
  p.split = pr.tiling.split_k;
  const int64_t k_blocks = (pr.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  p.kb_per_split = (int)((k_blocks + p.split - 1) / p.split);
  const int64_t m_tiles = (pr.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t n_tiles = (pr.n + Cfg::kBlockN - 1) / Cfg::kBlockN;
  const int64_t ctas = m_tiles * n_tiles * pr.batch * p.split;
  if (ctas > INT32_MAX) return "too many output tiles for one split-K launch";
  p.m_tiles = (int)m_tiles;
  p.n_tiles = (int)n_tiles;
  return launch_clusters<sm90::sm90_gemm_splitk_kernel<Cfg, T, Out>>(
      p.split, Cfg::kThreads, Cfg::smem_bytes(), static_cast<unsigned>(ctas), stream, p);
}

/// The split-K kernel of the tiling that pr.tiling names (split_k > 1).
template <class T, class Out>
std::string launch_splitk_tiling(const GemmProblem& pr, cudaStream_t stream) {
  const GemmTiling& t = pr.tiling;
  if (t.block_m == 64 && t.block_n == 64 && t.cluster_m == 1)
    return launch_splitk<SplitK64x64, T, Out>(pr, stream);
  if (t.block_m == 64 && t.block_n == 128 && t.cluster_m == 1)
    return launch_splitk<SplitK64x128, T, Out>(pr, stream);
  return "no sm90 split-K kernel for block_m=" + std::to_string(t.block_m) +
         ", block_n=" + std::to_string(t.block_n) + ", cluster_m=" + std::to_string(t.cluster_m);
}

/// The plain or the residual config of one tiling, as the call has a C operand or not.
template <class Plain, class Residual, class T, class Out>
std::string launch_plain_or_residual(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  return pr.c != nullptr ? launch_config<Residual, T, Out>(pr, num_sms, stream)
                         : launch_config<Plain, T, Out>(pr, num_sms, stream);
}

/// The plain and residual configs of one tiling, as a value for with_tiling's callback.
template <class PlainCfg, class ResidualCfg>
struct TilingConfigs {
  using Plain = PlainCfg;
  using Residual = ResidualCfg;
};

/// Calls f(TilingConfigs<...>{}) for the tiling that t names, or returns the error.
template <class F>
std::string with_tiling(const GemmTiling& t, F&& f) {
  const auto is = [&t](int bm, int bn, int cm) {
    return t.block_m == bm && t.block_n == bn && t.cluster_m == cm;
  };
  if (is(128, 256, 1)) return f(TilingConfigs<Cfg128x256, Cfg128x256R>{});
  if (is(128, 256, 2)) return f(TilingConfigs<Cfg128x256C2, Cfg128x256RC2>{});
  if (is(128, 128, 1)) return f(TilingConfigs<Cfg128x128, Cfg128x128R>{});
  if (is(128, 128, 2)) return f(TilingConfigs<Cfg128x128C2, Cfg128x128RC2>{});
  if (is(64, 128, 1)) return f(TilingConfigs<Cfg64x128, Cfg64x128R>{});
  if (is(64, 64, 1)) return f(TilingConfigs<Cfg64x64, Cfg64x64R>{});
  return "no sm90 kernel for block_m=" + std::to_string(t.block_m) +
         ", block_n=" + std::to_string(t.block_n) + ", cluster_m=" + std::to_string(t.cluster_m);
}

template <class X>
inline const char* type_name() {
  if constexpr (std::is_same_v<X, float>) return "float32";
  else if constexpr (std::is_same_v<X, __half>) return "float16";
  else return "bfloat16";
}

/// The bias/activation config of one plain tiling for the call's activation.
template <class Plain, class T, class Out>
std::string launch_bias_act(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  using A = kernels::Activation;
  switch (pr.activation) {
    case static_cast<int32_t>(A::kNone):
      return launch_config<sm90::GemmBiasConfig<Plain, A::kNone>, T, Out>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kRelu):
      return launch_config<sm90::GemmBiasConfig<Plain, A::kRelu>, T, Out>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kGeluTanh):
      return launch_config<sm90::GemmBiasConfig<Plain, A::kGeluTanh>, T, Out>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kGeluErf):
      return launch_config<sm90::GemmBiasConfig<Plain, A::kGeluErf>, T, Out>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kSilu):
      return launch_config<sm90::GemmBiasConfig<Plain, A::kSilu>, T, Out>(pr, num_sms, stream);
  }
  return "no sm90 kernel for activation " + std::to_string(pr.activation) + " (0.." +
         std::to_string(kernels::kNumActivations - 1) + ")";
}

template <class T, class Out>
std::string sm90_gemm_bias_launch(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  if (pr.c != nullptr) return "the bias/activation epilogue takes no residual operand";
  return with_tiling(pr.tiling, [&](auto cfgs) {
    return launch_bias_act<typename decltype(cfgs)::Plain, T, Out>(pr, num_sms, stream);
  });
}

/// The dact config of one residual tiling for the call's activation.
template <class Residual, class T>
std::string launch_dact(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  using A = kernels::Activation;
  switch (pr.activation) {
    case static_cast<int32_t>(A::kRelu):
      return launch_config<sm90::GemmDactConfig<Residual, A::kRelu>, T, T>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kGeluTanh):
      return launch_config<sm90::GemmDactConfig<Residual, A::kGeluTanh>, T, T>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kGeluErf):
      return launch_config<sm90::GemmDactConfig<Residual, A::kGeluErf>, T, T>(pr, num_sms, stream);
    case static_cast<int32_t>(A::kSilu):
      return launch_config<sm90::GemmDactConfig<Residual, A::kSilu>, T, T>(pr, num_sms, stream);
  }
  return "no sm90 dact kernel for activation " + std::to_string(pr.activation) +
         " (relu 1, gelu_tanh 2, gelu_erf 3, silu 4)";
}

template <class T>
std::string sm90_gemm_dact_launch(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  if (!pr.dact || pr.c == nullptr) return "the dact epilogue needs its C operand";
  const GemmTiling& t = pr.tiling;
  if (t.split_k == 1 && t.block_m == 128) {
    if (t.block_n == 256 && t.cluster_m == 1) return launch_dact<Cfg128x256R, T>(pr, num_sms, stream);
    if (t.block_n == 256 && t.cluster_m == 2) return launch_dact<Cfg128x256RC2, T>(pr, num_sms, stream);
  }
  return "no sm90 dact kernel for block_m=" + std::to_string(t.block_m) + ", block_n=" +
         std::to_string(t.block_n) + ", cluster_m=" + std::to_string(t.cluster_m) +
         ", split_k=" + std::to_string(t.split_k) +
         " (compiled: 128x256 with cluster_m 1 or 2, split_k=1)";
}

template <class T, class Out>
std::string sm90_gemm_launch(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  const bool bias_act = pr.bias != nullptr || pr.pre != nullptr || pr.activation != 0;
  if (bias_act && !kSm90BiasKernels<T, Out>)
    return std::string("no sm90 bias/activation kernel for ") + type_name<T>() +
           " inputs with a " + type_name<Out>() +
           " output (compiled: bfloat16 -> bfloat16 or float32, float16 -> float16 or float32)";
  if (pr.tiling.split_k > 1) return launch_splitk_tiling<T, Out>(pr, stream);
  if (bias_act) {
    if constexpr (kSm90BiasKernels<T, Out>) return sm90_gemm_bias_launch<T, Out>(pr, num_sms, stream);
  }
  return with_tiling(pr.tiling, [&](auto cfgs) {
    using C = decltype(cfgs);
    return launch_plain_or_residual<typename C::Plain, typename C::Residual, T, Out>(pr, num_sms,
                                                                                      stream);
  });
}

}  // namespace jax_sm100::host
