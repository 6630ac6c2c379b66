// Split-K sm_90a GEMM: the bf16/fp16 product for shapes with fewer output tiles than SMs
// (small M against a long K: decode and short-M projections), where the persistent
// kernel (gemm.cuh) would leave most SMs idle and stream B at a fraction of the memory
// bandwidth.
//
// One cluster of `split` CTAs (cluster dims (split, 1, 1), split in [2, 8]) per 64 x BN
// output tile; CTA rank r of the cluster runs the K blocks [r * kb_per_split, ...) of that
// tile, so every SM streams its own slice of B. The partial sums are reduced through
// distributed shared memory, in rank order (deterministic), with no global workspace, no
// counter and no second kernel (so nothing to zero and nothing that breaks in a CUDA graph):
//   1. each consumer thread writes its fp32 accumulators into its CTA's shared memory
//      (over the input stages: every load landed and every wgmma retired);
//   2. cluster barrier (release / acquire);
//   3. the output pairs of the tile are dealt out over the cluster's CTAs and threads;
//      each sums the `split` partials of its pair (ld.shared::cluster) and applies the
//      epilogue: alpha, then either beta * C (residual) or the bias and the activation
//      (and the pre-activation), then one rounding to Out, stored straight to global
//      memory (the output of such a tile is small: a direct store is enough);
//   4. cluster barrier: no CTA leaves while a peer still reads its partials.
//
// Roles (256 threads): warp 0 lane 0 issues the TMA loads (load_ab_block of gemm.cuh, the
// persistent kernel's own); warpgroup 1 runs consumer_mainloop (gemm.cuh) on one 64 x BN
// accumulator; every thread takes part in the reduction. Operand layouts, partial tiles
// (TMA zero fill) and the epilogue's numerics are the persistent kernel's.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm90/gemm.cuh"
#include "jax_sm100/kernels/sm90/gemm_config.cuh"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/ld_shared.cuh"
#include "jax_sm100/ptx/common/tma.cuh"

namespace jax_sm100::kernels::sm90 {

/// Largest cluster the split-K kernel launches (the portable cluster size).
inline constexpr int kMaxSplitK = 8;

/// Everything the split-K kernel needs (a __grid_constant__ parameter, as GemmParams).
struct SplitKParams {
  CUtensorMap tma_a;  ///< as GemmParams::tma_a (box {64, 64})
  CUtensorMap tma_b;  ///< as GemmParams::tma_b
  const void* c;      ///< residual C (Out, D's layout) when beta != 0, else null
  void* d;            ///< (batch, m, n) row-major Out
  void* pre;          ///< the pre-activation (Out, D's layout), or null
  const float* bias;  ///< (n,) f32, or null
  int m, n, k, batch;
  int a_batched, b_batched, c_batched;
  int trans_a, trans_b;
  float alpha, beta;
  int activation;    ///< kernels::Activation
  int split;         ///< CTAs per cluster = K slices per tile
  int kb_per_split;  ///< K blocks of one slice (the last may be shorter or empty)
  int m_tiles, n_tiles;
  uint32_t stage_tx_bytes;  ///< as GemmParams::stage_tx_bytes
};

/// A split-K tile configuration: 64 x BN output tiles, one consumer warpgroup, `Stages`
/// input stages. The partials (64 x BN fp32) reuse the stages' shared memory.
template <int BN, int Stages>
struct SplitKConfig {
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = BN;
  static constexpr int kBlockK = 64;
  static constexpr int kStages = Stages;
  static constexpr int kCluster = 1;  // no multicast: each CTA loads its own stages
  static constexpr int kNumWG = 1;
  static constexpr int kThreads = 256;  // producer warpgroup + one consumer warpgroup
  static constexpr int kNumConsumerWarps = 4;
  static constexpr int kWgTileN = BN;
  static constexpr int kPairs = BN / 4 * 128;  // accumulator pairs of the tile
  static constexpr uint32_t kATileBytes = kBlockM * kBlockK * 2;
  static constexpr uint32_t kBTileBytes = BN * kBlockK * 2;
  static constexpr uint32_t kPayloadBytes = Stages * (kATileBytes + kBTileBytes);
  static constexpr uint32_t kPartialBytes = kBlockM * BN * 4;
  static constexpr uint32_t kBarOffset = kPayloadBytes;
  static constexpr uint32_t kBarBytes = 2 * Stages * 8;
  static constexpr uint32_t smem_bytes() { return kBarOffset + kBarBytes + 1024; }
  static_assert(BN == 64 || BN == 128, "wgmma N of the one consumer warpgroup");
  static_assert(kPartialBytes <= kPayloadBytes, "the partials reuse the input stages");
  // Two CTAs per SM, so that a cluster's CTAs find room beside another cluster's.
  static_assert(2 * smem_bytes() <= 232448, "two CTAs per SM");
};

namespace detail {

/// The pair (row, col) of accumulator pair q of consumer thread t in a 64 x N wgmma tile.
__device__ __forceinline__ void pair_coords(int q, int t, int& row, int& col) {
  row = (t / 32) * 16 + (t % 32) / 4 + 8 * (q % 2);
  col = 8 * (q / 2) + 2 * (t % 4);
}

}  // namespace detail

template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 2)
    sm90_gemm_splitk_kernel(const __grid_constant__ SplitKParams p) {
#if JAX_SM100_SM90A_DEVICE
  using namespace jax_sm100::pipeline;
  using Payload = StandardTilePayload<T, T, Cfg::kBlockM * Cfg::kBlockK, Cfg::kBlockN * Cfg::kBlockK,
                                      Cfg::kStages>;
  static_assert(sizeof(Payload) == Cfg::kPayloadBytes, "payload layout");
  using Pack = detail::Pack2<Out>;

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  auto* payload = reinterpret_cast<Payload*>(smem);
  auto* bars = reinterpret_cast<DeviceBarrier*>(smem + Cfg::kBarOffset);
  InputTilePipeline<Payload, Cfg::kStages> input(bars, payload, "sm90_gemm_splitk.input");

  const int warp = static_cast<int>(ptx::warp_idx_sync());
  const int lane = static_cast<int>(threadIdx.x % 32);
  // Cluster dims (split, 1, 1): the rank is the x index inside the cluster.
  const int rank = static_cast<int>(blockIdx.x) % p.split;
  int unit = static_cast<int>(blockIdx.x) / p.split;
  const int nt = unit % p.n_tiles;
  unit /= p.n_tiles;
  const int mt = unit % p.m_tiles;
  const int b = unit / p.m_tiles;
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  const int kb0 = min(k_blocks, rank * p.kb_per_split);
  const int kb1 = min(k_blocks, kb0 + p.kb_per_split);

  if (threadIdx.x == 0) {
    input.init_barriers(1, Cfg::kNumConsumerWarps);
    ptx::tma_prefetch_descriptor(&p.tma_a);
    ptx::tma_prefetch_descriptor(&p.tma_b);
  }
  __syncthreads();

  if (warp < 4) {
    if (warp == 0 && lane == 0) {
      auto producer = input.producer();
      const int za = p.a_batched ? b : 0, zb = p.b_batched ? b : 0;
      for (int kb = kb0; kb < kb1; ++kb) {
        auto st = producer.acquire_stage();
        st.expect_bytes(p.stage_tx_bytes);
        load_ab_block<Cfg, T>(&p.tma_a, &p.tma_b, st.mbar()->ptr(), st.a_tile(), st.b_tile(),
                              kb * Cfg::kBlockK, mt * Cfg::kBlockM, nt * Cfg::kBlockN, za, zb,
                              p.trans_a, p.trans_b, 0);
        std::move(st).release();
      }
    }
  } else {
    const int t = threadIdx.x % 128;
    float acc[Cfg::kWgTileN / 2];
#pragma unroll
    for (int i = 0; i < Cfg::kWgTileN / 2; ++i) acc[i] = 0.f;
    const int kbs = kb1 - kb0;
    consumer_mainloop_for_layout<Cfg, T>(p.trans_a, p.trans_b, input, acc, kbs, 0, 0, lane);
    // Partials pair-major (pair q of thread t at q * 128 + t): each reader's 8-byte loads
    // from a peer are then consecutive across a warp.
    auto* part = reinterpret_cast<float2*>(smem);
#pragma unroll
    for (int q = 0; q < Cfg::kWgTileN / 4; ++q)
      part[q * 128 + t] = make_float2(acc[2 * q], acc[2 * q + 1]);
  }
  ptx::cluster_sync();  // every CTA's partials written (release) and visible (acquire)

  const uint32_t part_addr = ptx::smem_addr(smem);
  const size_t out_row = static_cast<size_t>(p.n);
  for (int u = rank * Cfg::kThreads + static_cast<int>(threadIdx.x); u < Cfg::kPairs;
       u += p.split * Cfg::kThreads) {
    int row, col;
    detail::pair_coords(u / 128, u % 128, row, col);
    row += mt * Cfg::kBlockM;
    col += nt * Cfg::kBlockN;
    if (row >= p.m || col >= p.n) continue;
    float2 v[kMaxSplitK];
#pragma unroll
    for (int r = 0; r < kMaxSplitK; ++r)
      if (r < p.split) v[r] = ptx::ld_shared_cluster_f32x2(part_addr + u * 8u, r);
    float sx = 0.f, sy = 0.f;
#pragma unroll
    for (int r = 0; r < kMaxSplitK; ++r)
      if (r < p.split) {
        sx += v[r].x;
        sy += v[r].y;
      }
    const size_t off = (static_cast<size_t>(b) * p.m + row) * out_row + col;
    float x, y;
    if (p.bias != nullptr) {
      x = fmaf(p.alpha, sx, p.bias[col]);
      y = fmaf(p.alpha, sy, p.bias[col + 1]);
    } else {
      x = p.alpha * sx;
      y = p.alpha * sy;
    }
    if (p.c != nullptr) {
      const size_t coff = p.c_batched ? off : static_cast<size_t>(row) * out_row + col;
      const float2 cv = Pack::unpack(
          *reinterpret_cast<const typename Pack::Storage*>(static_cast<const Out*>(p.c) + coff));
      x = fmaf(p.beta, cv.x, x);
      y = fmaf(p.beta, cv.y, y);
    }
    if (p.pre != nullptr)
      *reinterpret_cast<typename Pack::Storage*>(static_cast<Out*>(p.pre) + off) = Pack::pack(x, y);
    if (p.activation != 0) {
      const auto a = static_cast<Activation>(p.activation);
      x = apply_activation(a, x);
      y = apply_activation(a, y);
    }
    *reinterpret_cast<typename Pack::Storage*>(static_cast<Out*>(p.d) + off) = Pack::pack(x, y);
  }
  ptx::cluster_sync();  // the peers have read this CTA's partials
#endif  // JAX_SM100_SM90A_DEVICE
}

}  // namespace jax_sm100::kernels::sm90
