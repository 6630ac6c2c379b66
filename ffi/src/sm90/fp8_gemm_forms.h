// The sm90 blockwise-scaled FP8 GEMM's launch, shared by its launch units: tensor maps,
// tile order and the persistent launch (common/launch.h) of one kernel configuration,
// and the compiled set of forms, for the plain / residual kernels (fp8_gemm_launch.cu)
// and the bias/activation kernels (fp8_bias_launch*.cu, one unit per activation so they
// compile in parallel).
//
// The compiled forms (block_m x block_n, cluster; "pair along N" shares A):
//   128 x 64 and 128 x 128, 1 CTA or a pair along M (overlapped promotion): plain,
//                       residual and bias/activation;
//   192 x 128 on 1 CTA; 256 x 128 on 1 CTA or a pair along N: plain and bias/activation.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/fp8_problem.h"
#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm.cuh"
#include "sm90/fp8_bias_launch.h"

namespace jax_sm100::host::sm90_fp8_forms {

namespace fp8 = jax_sm100::kernels::sm90_fp8;

/// A rank-2 row-major tensor ([outer, inner], rows pitch_bytes apart) read or written in
/// boxes of box_outer rows x box_inner elements.
inline std::string encode_2d(CUtensorMap* map, const void* base, CUtensorMapDataType dtype,
                             uint32_t elem_bytes, uint64_t inner, uint64_t outer, uint64_t pitch_bytes,
                             uint32_t box_inner, uint32_t box_outer, CUtensorMapSwizzle swizzle) {
  const TensorMapSpec s{base,        dtype,       elem_bytes, /*rank=*/2, inner, outer,
                        /*batch=*/1, pitch_bytes, box_inner,  box_outer,  swizzle};
  return encode_tensor_map(map, s);
}

/// Builds the tensor maps, parameters and persistent grid of configuration Cfg and
/// launches it; bias: Cfg::kBias kernels only ((o.n,) f32 or null). Returns "" or an
/// error sentence.
template <class Cfg>
std::string launch(const Fp8GemmProblem& o, const float* bias, int num_sms, cudaStream_t stream) {
  const int num_kb = static_cast<int>((o.k + 127) / 128);

  CUtensorMap map_a, map_b, map_sfa, map_d, map_c;
  std::string err;
  // One M tile holding all of M, one CTA per cluster: A's box (and A-scales') stop at M
  // (8-row / 4-scale granules) rather than zero-filling the tile's rows past M, which
  // TMA does slowly (see fp8_gemm.cuh). Otherwise the full tile.
  const bool short_a = Cfg::kCluster == 1 && o.m < Cfg::BLOCK_M;
  const uint32_t a_box_rows = short_a ? static_cast<uint32_t>((o.m + 7) / 8 * 8)
                                      : static_cast<uint32_t>(Cfg::BLOCK_M / Cfg::kClusterN);
  const uint32_t sfa_box =
      short_a ? static_cast<uint32_t>(o.mp) : static_cast<uint32_t>(Cfg::BLOCK_M);
  err = encode_2d(&map_a, o.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, o.k, o.m, o.k, Cfg::BLOCK_K,
                  a_box_rows, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_b, o.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, o.k, o.n, o.k, Cfg::BLOCK_K,
                    Cfg::BLOCK_N / Cfg::kClusterM, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_sfa, o.a_scale_t, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, o.mp, num_kb,
                    o.mp * 4, sfa_box, 1, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (err.empty())
    err = encode_2d(&map_d, o.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, o.n, o.m, o.n * 2,
                    Cfg::kEpiChunk, Cfg::WG_M, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_c, Cfg::kResidual ? o.c : o.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, o.n,
                    o.m, o.n * 2, Cfg::kEpiChunk, Cfg::WG_M, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) return err;

  fp8::Fp8GemmParams p;
  p.m = static_cast<int>(o.m);
  p.n = static_cast<int>(o.n);
  p.k = static_cast<int>(o.k);
  p.num_kb = num_kb;
  p.num_nb = static_cast<int>((o.n + 127) / 128);
  p.b_scale = o.b_scale;
  p.beta = o.beta;
  p.bias = Cfg::kBias ? bias : nullptr;
  // Every CTA's full barrier gets whole A and B tiles (multicast parts add up) and the
  // A-scale box: the payload's full stage unless A's boxes were cut short.
  static_assert(Cfg::BLOCK_M * Cfg::BLOCK_K + Cfg::BLOCK_N * Cfg::BLOCK_K +
                    Cfg::BLOCK_M * sizeof(float) == Cfg::Payload::bytes_per_stage,
                "stage transaction bytes out of step with the payload");
  p.stage_tx_bytes = (short_a ? a_box_rows : Cfg::BLOCK_M) * Cfg::BLOCK_K +
                     Cfg::BLOCK_N * Cfg::BLOCK_K + sfa_box * sizeof(float);
  // The persistent tile order over cluster tiles (cluster_m x cluster_n tiles each).
  const int m_tiles = static_cast<int>((o.m + Cfg::BLOCK_M - 1) / Cfg::BLOCK_M);
  const int n_tiles = static_cast<int>((o.n + Cfg::BLOCK_N - 1) / Cfg::BLOCK_N);
  p.order = kernels::TileOrder::make(m_tiles, n_tiles, 1, Cfg::kClusterM, Cfg::kClusterN,
                                     o.tiling.group_m);
  // Persistent grid: one CTA per SM at most, in whole clusters, no more than the cluster
  // tiles; the cluster attribute is set even for single CTAs.
  PersistentLaunch l;
  l.cluster = Cfg::kCluster;
  l.threads = Cfg::kThreads;
  l.smem_bytes = Cfg::smem_bytes(num_kb);
  l.smem_limit = static_cast<int>(fp8::kSmemLimit);
  l.units = p.order.count();
  l.num_sms = num_sms;
  l.single_cta = SingleCtaLaunch::kClusterOfOne;
  return launch_persistent<fp8::sm90_fp8_gemm_kernel<Cfg>>(l, stream, map_a, map_b, map_sfa,
                                                           map_d, map_c, p);
}

/// Launches the form o.tiling names with the residual (R) or not and epilogue EPI
/// (fp8::kPlainEpilogue or an Activation value; bias kernels take no residual), or
/// returns the sentence naming a form that is not compiled.
template <bool R, int EPI>
std::string launch_form(const Fp8GemmProblem& o, const float* bias, int num_sms, cudaStream_t stream) {
  static_assert(!R || EPI == fp8::kPlainEpilogue, "no residual with the bias epilogue");
  const Fp8Tiling& t = o.tiling;
  const bool c1 = t.cluster == 1 && !t.pair_along_n;
  if (t.block_m == 128 && (t.cluster == 1 || t.cluster == 2) && !t.pair_along_n) {
    if (t.block_n == 64)
      return t.cluster == 2 ? launch<fp8::Fp8GemmConfig<128, 64, R, 2, false, EPI>>(o, bias, num_sms, stream)
                            : launch<fp8::Fp8GemmConfig<128, 64, R, 1, false, EPI>>(o, bias, num_sms, stream);
    if (t.block_n == 128)
      return t.cluster == 2 ? launch<fp8::Fp8GemmConfig<128, 128, R, 2, false, EPI>>(o, bias, num_sms, stream)
                            : launch<fp8::Fp8GemmConfig<128, 128, R, 1, false, EPI>>(o, bias, num_sms, stream);
  }
  if constexpr (!R) {
    if (t.block_n == 128) {
      if (t.block_m == 192 && c1)
        return launch<fp8::Fp8GemmConfig<192, 128, false, 1, false, EPI>>(o, bias, num_sms, stream);
      if (t.block_m == 256 && c1)
        return launch<fp8::Fp8GemmConfig<256, 128, false, 1, false, EPI>>(o, bias, num_sms, stream);
      if (t.block_m == 256 && t.cluster == 2 && t.pair_along_n)
        return launch<fp8::Fp8GemmConfig<256, 128, false, 2, true, EPI>>(o, bias, num_sms, stream);
    }
  }
  return "no sm90 kernel for block_m=" + std::to_string(t.block_m) +
         ", block_n=" + std::to_string(t.block_n) + ", cluster=" + std::to_string(t.cluster) +
         (t.pair_along_n ? " (pair along N)" : "") + (R ? ", residual" : "");
}

}  // namespace jax_sm100::host::sm90_fp8_forms

namespace jax_sm100::host {

/// (Declared in fp8_bias_launch.h; instantiated in fp8_bias_inst_<activation>.cu.)
template <int ACT>
std::string sm90_fp8_bias_gemm_launch_act(const Fp8GemmProblem& prob, const float* bias, int num_sms,
                                          cudaStream_t stream) {
  return sm90_fp8_forms::launch_form<false, ACT>(prob, bias, num_sms, stream);
}

}  // namespace jax_sm100::host
