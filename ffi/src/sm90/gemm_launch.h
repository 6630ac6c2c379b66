// Host side of the sm90 GEMM: problem description, the per-shape tile-config choice,
// tensor-map construction and the kernel launch. Used by gemm_ffi.cu (the FFI handlers)
// and the per-dtype instantiation files sm90_gemm_inst_*.cu.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/tensor_map.h"

namespace jax_sm100::host {

/// Element types the GEMM handles (a and b share one input type).
enum class GemmDtype { kBF16, kF16, kF32 };

/// Bytes per element.
inline uint32_t dtype_bytes(GemmDtype t) { return t == GemmDtype::kF32 ? 4 : 2; }

/// One (batched) GEMM call as validated by the handler.
struct GemmProblem {
  const void* a;
  const void* b;
  const void* c;  ///< nullptr when the residual term is off (beta == 0 or plain GEMM)
  void* d;
  GemmDtype in_type;   ///< bf16 or f16
  GemmDtype out_type;  ///< bf16, f16 or f32 (c has the same type)
  int64_t m, n, k;
  int64_t batch;  ///< D's batch count (>= 1)
  bool a_batched, b_batched, c_batched;
  bool trans_a, trans_b;
  float alpha, beta;
  int cluster = 1;  ///< CTAs per cluster along M (2: B tiles multicast), see choose_cluster
};

/// The tile configurations compiled (see sm90_gemm_inst.h for their shapes).
enum class Sm90TileConfig : int {
  k128x256 = 0,  ///< large problems
  k128x128 = 1,  ///< medium problems / better wave fill
  k64x128 = 2,   ///< small M (decode-like)
  k64x64 = 3,    ///< tiny M: one consumer warpgroup, twice the CTAs of 64x128
};

/// Name of a config, for logs and the benchmark.
inline const char* config_name(Sm90TileConfig c) {
  switch (c) {
    case Sm90TileConfig::k128x256: return "128x256";
    case Sm90TileConfig::k128x128: return "128x128";
    case Sm90TileConfig::k64x128: return "64x128";
    case Sm90TileConfig::k64x64: return "64x64";
  }
  return "?";
}

/// Deterministic config choice: estimated time = waves * tile area / efficiency, where
/// efficiency is a fixed per-config guess of how close a tile runs to the MMA peak
/// (bigger tiles reuse smem operands more). Ties keep the larger tile.
inline Sm90TileConfig choose_config(int64_t m, int64_t n, int64_t batch, int num_sms) {
  struct Cand {
    Sm90TileConfig cfg;
    int bm, bn;
    double eff;
  };
  const Cand cands[] = {{Sm90TileConfig::k128x256, 128, 256, 1.00},
                        {Sm90TileConfig::k128x128, 128, 128, 0.85},
                        {Sm90TileConfig::k64x128, 64, 128, 0.60},
                        {Sm90TileConfig::k64x64, 64, 64, 0.45}};
  Sm90TileConfig best = Sm90TileConfig::k128x256;
  double best_cost = 0;
  bool first = true;
  for (const Cand& c : cands) {
    const int64_t tiles = batch * ((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn);
    const int64_t waves = (tiles + num_sms - 1) / num_sms;
    const double cost = static_cast<double>(waves) * c.bm * c.bn / c.eff;
    if (first || cost < best_cost) {
      best = c.cfg;
      best_cost = cost;
      first = false;
    }
  }
  return best;
}

/// Cluster size along M: 2 (pairs of M tiles share a multicast B tile, halving B's
/// L2->SM traffic) for the 128-row configs when the M tiles pair up evenly and there is
/// more than one wave of tiles; else 1. Measured on H200 (2026-11-21): clusters gained
/// 3-20% on multi-wave shapes (8192^3, 4096x24576x1536, 3072x5000x2048) and lost ~8% on
/// the single-wave 2048^3.
inline int choose_cluster(Sm90TileConfig cfg, int64_t m, int64_t n, int64_t batch, int num_sms) {
  if (cfg != Sm90TileConfig::k128x256 && cfg != Sm90TileConfig::k128x128) return 1;
  const int64_t bn = cfg == Sm90TileConfig::k128x256 ? 256 : 128;
  const int64_t m_tiles = (m + 127) / 128;
  const int64_t tiles = batch * m_tiles * ((n + bn - 1) / bn);
  return (m_tiles >= 2 && m_tiles % 2 == 0 && tiles > num_sms) ? 2 : 1;
}

/// Launches the kernel for one (config, residual, in type, out type). Defined (and
/// explicitly instantiated) in sm90_gemm_inst_<in>_<out>.cu. Returns "" or an error.
template <class T, class Out>
std::string sm90_gemm_launch(const GemmProblem& prob, Sm90TileConfig cfg, int num_sms,
                             cudaStream_t stream);

extern template std::string sm90_gemm_launch<__nv_bfloat16, __nv_bfloat16>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, __half>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__nv_bfloat16, float>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __nv_bfloat16>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, __half>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);
extern template std::string sm90_gemm_launch<__half, float>(const GemmProblem&, Sm90TileConfig, int, cudaStream_t);

}  // namespace jax_sm100::host
