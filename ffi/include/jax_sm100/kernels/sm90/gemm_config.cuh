// The sm90 bf16/fp16 GEMM's kernel parameters, tile configurations (shared-memory
// carve-up, static_asserted budgets) and epilogue fragment helpers: what the kernel
// (gemm.cuh), its bias/activation epilogue (gemm_bias_epilogue.cuh) and the grouped
// kernels share. See gemm.cuh for the kernel's structure.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/common/activation.h"

namespace jax_sm100::kernels::sm90 {

/// Everything the kernel needs, passed by value as a __grid_constant__ parameter
/// (the tensor maps must live in param/const space for TMA).
struct GemmParams {
  CUtensorMap tma_a;  ///< A: box {64, BLOCK_M} (K-major) or {64, 64} (M-major)
  CUtensorMap tma_b;  ///< B: box {64, 64} (N-major) or {64, BLOCK_N} (K-major)
  CUtensorMap tma_c;  ///< C (residual kernels only): box {EPI_N, 64}
  CUtensorMap tma_d;  ///< D: box {EPI_N, 64}
  int m, n, k;        ///< problem size per batch
  int batch;          ///< batch count of D
  int a_batched, b_batched, c_batched;  ///< 0: operand broadcast (TMA batch coordinate 0)
  int trans_a, trans_b;                 ///< operand layouts, see the file comment
  float alpha, beta;
  TileOrder order;  ///< tile order over (batch, cluster rows, N tiles), made on the host
  /// Bytes TMA brings per input stage: the payload's A and B tiles, less the A rows past
  /// M when A's box stops at M (one M tile, K-major A: see launch_config).
  uint32_t stage_tx_bytes;
  // Bias/activation kernels only (GemmBiasConfig); after the fields above so that the
  // plain and residual kernels read their parameters at the same offsets as without them.
  const float* bias;   ///< (n,) f32 added to every row, or null (no bias)
  int has_pre;         ///< 1: also store z (the pre-activation) through tma_pre
  CUtensorMap tma_pre; ///< pre (when has_pre): D's shape, dtype and box
  // Dact kernels only (GemmDactConfig): the column sums of D, accumulated (f32 atomics)
  // into a zeroed (n,) vector, or null (not wanted).
  float* dbias;
};

/// Tile configuration. BM in {64, 128}; the two consumer warpgroups split the tile
/// along M (BM = 128) or along N (BM = 64). CStages == 0: plain GEMM (no C pipeline).
/// DBufs > 0: the plain kernel's D staging buffers per warpgroup (default 0: 4 for
/// 256-wide warpgroup tiles, else 2); fewer leave room for another input stage.
template <int BM, int BN, int Stages, int CStages, int NumWG = 2, int Cluster = 1, int DBufs = 0>
struct GemmConfig {
  static constexpr int kBlockM = BM;
  static constexpr int kBlockN = BN;
  static constexpr int kBlockK = 64;  // 64 x 16-bit = 128 B = one swizzle row
  static constexpr int kStages = Stages;
  static constexpr int kCStages = CStages;
  static constexpr bool kResidual = CStages > 0;
  static constexpr int kNumWG = NumWG;            // consumer warpgroups
  static constexpr int kCluster = Cluster;        // CTAs per cluster along M (B multicast)
  static constexpr int kThreads = 128 * (1 + NumWG);
  static constexpr int kNumConsumerWarps = 4 * NumWG;
  static constexpr int kWgM = BM / 64;            // consumer warpgroups along M
  static constexpr int kWgN = NumWG / kWgM;       // ... along N
  static constexpr int kWgTileN = BN / kWgN;      // N extent of one warpgroup's accumulator
  static constexpr int kEpiTileBytes = 64 * 128;  // one epilogue chunk: 64 rows x 128 B
  static constexpr bool kBiasAct = false;         // GemmBiasConfig: the bias/activation epilogue
  static constexpr bool kDact = false;            // GemmDactConfig: D = acc * act'(C)
  static constexpr Activation kActivation = Activation::kNone;

  static_assert(NumWG == 1 || NumWG == 2, "one or two consumer warpgroups");
  static_assert((BM == 64 || BM == 128) && BM / 64 <= NumWG, "BLOCK_M is 64 rows per warpgroup");
  static_assert(kWgTileN == 64 || kWgTileN == 128 || kWgTileN == 256, "wgmma N per warpgroup");
  static_assert(BN <= 256, "a TMA box dimension is at most 256");
  static_assert(Cluster == 1 || (Cluster == 2 && BN % 128 == 0),
                "cluster of 2: each CTA multicasts whole 64-wide (N-major) / 8-row blocks of B");
  static_assert(DBufs >= 0, "D buffers: 0 (the default) or a count");
  static_assert(CStages == 0 || CStages >= 2,
                "residual: a C stage stays held until the next chunk's store is issued");

  // Shared-memory carve-up (bytes from a 1024-aligned base).
  static constexpr uint32_t kATileBytes = BM * kBlockK * 2;  // (BM, 64) 16-bit
  static constexpr uint32_t kBTileBytes = BN * kBlockK * 2;  // (BN, 64) 16-bit
  static constexpr uint32_t kPayloadBytes = Stages * (kATileBytes + kBTileBytes);
  static constexpr uint32_t kDOffset = kPayloadBytes;
  // Plain: (NumWG, kDBufs) D staging chunks; all chunks of a group are written, then
  // stored together. Residual: D is staged in the C chunks (no D buffers).
  static constexpr int kDBufs = CStages > 0 ? 0 : DBufs > 0 ? DBufs : (kWgTileN >= 256 ? 4 : 2);
  static constexpr uint32_t kDBytes = NumWG * kDBufs * kEpiTileBytes;
  static constexpr uint32_t kCOffset = kDOffset + kDBytes;
  static constexpr uint32_t kCBytes = CStages * NumWG * kEpiTileBytes;  // (CStages, NumWG)
  static constexpr uint32_t kBarOffset = kCOffset + kCBytes;
  static constexpr uint32_t kBarBytes = (2 * Stages + 2 * (CStages > 0 ? CStages : 1)) * 8;
  /// Dynamic shared memory to request (with slack to align the base to 1024).
  static constexpr uint32_t smem_bytes() { return kBarOffset + kBarBytes + 1024; }
  static_assert(smem_bytes() <= 232448, "exceeds the 227 KB of shared memory per block");
};

/// A plain tile configuration with the fused bias/activation epilogue
/// (gemm_bias_epilogue.cuh): z = alpha * acc + bias[col], d = act(z), and z itself
/// through tma_pre when GemmParams::has_pre. The activation is compile-time; bias and pre
/// are per-launch flags read once per tile / group, outside the per-element loop. Same
/// input stages and D staging buffers as Base, plus each consumer warpgroup's slice of
/// the bias row (kWgTileN floats) after the barriers.
template <class Base, Activation A>
struct GemmBiasConfig : Base {
  static_assert(!Base::kResidual, "the bias epilogue stages D like the plain kernel (no C)");
  static_assert(static_cast<int32_t>(A) >= 0 && static_cast<int32_t>(A) < kNumActivations,
                "activation");
  static constexpr bool kBiasAct = true;
  static constexpr Activation kActivation = A;
  static constexpr uint32_t kBiasOffset = (Base::kBarOffset + Base::kBarBytes + 15) / 16 * 16;
  static constexpr uint32_t kBiasBytes = Base::kNumWG * Base::kWgTileN * 4;  // (NumWG, kWgTileN) f32
  static constexpr uint32_t smem_bytes() { return kBiasOffset + kBiasBytes + 1024; }
  static_assert(smem_bytes() <= 232448, "exceeds the 227 KB of shared memory per block");
};

/// A residual tile configuration whose epilogue combines the C tile by the activation's
/// derivative instead of adding it: D = alpha * acc * act'(C) (fp32, rounded once), with
/// C the saved pre-activation z (for relu, z or act(z)) -- the input gradient of a layer
/// below an activation, dz = (g @ W^T) * act'(z), in the GEMM that computes g. Column
/// sums of D (the bias gradient) go to GemmParams::dbias when it is not null. Same
/// stages, C ring and in-place D staging as Base, plus the column sums' staging area.
template <class Base, Activation A>
struct GemmDactConfig : Base {
  static_assert(Base::kResidual, "the dact epilogue reads C through the epilogue-load pipeline");
  static_assert(A != Activation::kNone && static_cast<int32_t>(A) > 0 &&
                    static_cast<int32_t>(A) < kNumActivations,
                "an activation with a derivative other than 1");
  static constexpr bool kDact = true;
  static constexpr Activation kActivation = A;
  // Each consumer warpgroup's (4 warps, kWgTileN) f32 column sums of the tile
  // (gemm_bias_epilogue.cuh, "bias gradient"), after the barriers.
  static constexpr uint32_t kSumOffset = (Base::kBarOffset + Base::kBarBytes + 15) / 16 * 16;
  static constexpr uint32_t kSumBytes = Base::kNumWG * 4 * Base::kWgTileN * 4;
  static constexpr uint32_t smem_bytes() { return kSumOffset + kSumBytes + 1024; }
  static_assert(smem_bytes() <= 232448, "exceeds the 227 KB of shared memory per block");
};

namespace detail {

/// Byte offset of (row, byte) inside a [rows][128 B] tile with the 128B swizzle
/// (16-byte chunk index XOR row % 8), matching TMA's CU_TENSOR_MAP_SWIZZLE_128B.
__device__ __forceinline__ uint32_t swizzle128(uint32_t row, uint32_t byte) {
  return row * 128u + ((((byte >> 4) ^ row) & 7u) << 4) + (byte & 15u);
}

template <class Out>
struct Pack2;  // two consecutive output elements <-> two floats
template <>
struct Pack2<__nv_bfloat16> {
  using Storage = __nv_bfloat162;
  static __device__ __forceinline__ Storage pack(float x, float y) { return __floats2bfloat162_rn(x, y); }
  static __device__ __forceinline__ float2 unpack(Storage v) { return __bfloat1622float2(v); }
};
template <>
struct Pack2<__half> {
  using Storage = __half2;
  static __device__ __forceinline__ Storage pack(float x, float y) { return __floats2half2_rn(x, y); }
  static __device__ __forceinline__ float2 unpack(Storage v) { return __half22float2(v); }
};
template <>
struct Pack2<float> {
  using Storage = float2;
  static __device__ __forceinline__ Storage pack(float x, float y) { return make_float2(x, y); }
  static __device__ __forceinline__ float2 unpack(Storage v) { return v; }
};

}  // namespace detail

}  // namespace jax_sm100::kernels::sm90
