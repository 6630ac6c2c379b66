// The fused bias/activation epilogue of the sm90 GEMM (kernels of a GemmBiasConfig):
//
//   z   = alpha * acc + bias[col]      fp32, acc the warpgroup's wgmma accumulators
//   pre = round(z) to Out              only when GemmParams::has_pre (the backward's input)
//   d   = round(act(z)) to Out         act = Cfg::kActivation, computed in fp32
//
// The activation is a compile-time variant; bias (null: z = alpha * acc) and pre are
// per-launch flags, tested once per tile / group, so the per-element work is one FMA, the
// activation and the pack (bias zero-filled in shared memory when there is none).
//
// Bias: each consumer thread loads its share of the warpgroup's kWgTileN bias columns
// (one or two floats; 0 past n) BEFORE the tile's main loop, so the global load's latency
// hides behind it, and stages it in the warpgroup's shared-memory slice at the start of
// the epilogue. The first group barrier below publishes it; the previous tile's last
// reads of the slice all precede that tile's last barrier, so the overwrite is safe.
// A fragment's column pair is one 8-byte shared load, broadcast to the 8 lanes that
// share lane % 4 (no bank conflicts).
//
// Staging and stores use the plain kernel's kDBufs 64 x 128 B buffers per warpgroup, in
// groups of kDBufs chunks. Per group:
//   1. wait until the stores that last read the buffers (the previous group's, or the
//      previous tile's, issued one main loop ago) have read them; barrier;
//   2. (has_pre, act != none) stage z, fence, barrier, one thread stores the group to
//      tma_pre; every thread then applies the activation in registers (acc <- act(z))
//      while the TMA unit reads the buffers; the storing thread waits for that read
//      (cp.async.bulk.wait_group.read 0) and a barrier hands the buffers back;
//   3. stage act(z) (or z), fence, barrier, one thread stores the group to tma_d (and,
//      for act == none with has_pre, the same buffers to tma_pre: pre == d).
// A second staging area for z would avoid the wait in step 2, but every tiling already
// spends its shared memory on input stages and D buffers (free: 22 KB at 128x256, under
// 2 KB at 128x128 and 64x128). The wait is one read of <= 32 KB of shared memory per
// group, overlapped with the activation math, against a main loop of >= 24 K blocks of
// wgmma per tile on the shapes this op is for; with has_pre == 0 the epilogue has exactly
// the plain kernel's waits and barriers.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm90/column_sums.cuh"
#include "jax_sm100/kernels/sm90/gemm_config.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/tma.cuh"

namespace jax_sm100::kernels::sm90 {

/// One consumer thread's share of its warpgroup's bias columns: column tid_wg + 128 i of
/// the warpgroup tile in v[i].
template <class Cfg>
struct BiasSlice {
  static constexpr int kRegs = (Cfg::kWgTileN + 127) / 128;
  float v[kRegs];

  /// Loads the share of columns [col0, col0 + kWgTileN) (0 for no bias or past n).
  __device__ __forceinline__ void load(const GemmParams& p, int col0, int tid_wg) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      const int idx = tid_wg + 128 * i;
      const int col = col0 + idx;
      v[i] = p.bias != nullptr && idx < Cfg::kWgTileN && col < p.n ? __ldg(p.bias + col) : 0.f;
    }
  }

  /// Writes the share into the warpgroup's (kWgTileN,) shared-memory slice.
  __device__ __forceinline__ void stage(float* slice, int tid_wg) const {
#pragma unroll
    for (int i = 0; i < kRegs; ++i)
      if (tid_wg + 128 * i < Cfg::kWgTileN) slice[tid_wg + 128 * i] = v[i];
  }
};

namespace detail {

/// The bias pair of fragment f (columns 8 f + 2 (lane % 4) + {0, 1} of the warpgroup tile).
__device__ __forceinline__ float2 bias_pair(const float* slice, int f, int lane) {
  return *reinterpret_cast<const float2*>(slice + f * 8 + 2 * (lane % 4));
}

/// acc <- act(alpha * acc + bias) for the fragments of group g's chunks, in registers.
template <class Cfg, class Out>
__device__ __forceinline__ void activate_group(float (&acc)[Cfg::kWgTileN / 2], float alpha,
                                               const float* slice, int g, int lane) {
  constexpr int kEpiN = 128 / static_cast<int>(sizeof(Out));
  constexpr int kChunks = Cfg::kWgTileN / kEpiN;
#pragma unroll
  for (int i = 0; i < Cfg::kDBufs; ++i) {
    const int c = g * Cfg::kDBufs + i;
    if (c < kChunks) {
#pragma unroll
      for (int j = 0; j < kEpiN / 8; ++j) {
        const int f = c * (kEpiN / 8) + j;
        const float2 bv = bias_pair(slice, f, lane);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          acc[4 * f + 2 * h] = apply_activation<Cfg::kActivation>(fmaf(alpha, acc[4 * f + 2 * h], bv.x));
          acc[4 * f + 2 * h + 1] =
              apply_activation<Cfg::kActivation>(fmaf(alpha, acc[4 * f + 2 * h + 1], bv.y));
        }
      }
    }
  }
}

/// Writes group g's chunks into staging buffers 0.. (128B-swizzled, Out): z = alpha * acc +
/// bias when kZ, else acc itself (already activated by activate_group).
template <class Cfg, class Out, bool kZ>
__device__ __forceinline__ void stage_group(const float (&acc)[Cfg::kWgTileN / 2], float alpha,
                                            const float* slice, uint8_t* bufs, int g,
                                            uint32_t r_lo, int lane) {
  using P2 = Pack2<Out>;
  constexpr int kEpiN = 128 / static_cast<int>(sizeof(Out));
  constexpr int kChunks = Cfg::kWgTileN / kEpiN;
#pragma unroll
  for (int i = 0; i < Cfg::kDBufs; ++i) {
    const int c = g * Cfg::kDBufs + i;
    if (c < kChunks) {
      uint8_t* buf = bufs + i * Cfg::kEpiTileBytes;
#pragma unroll
      for (int j = 0; j < kEpiN / 8; ++j) {
        const int f = c * (kEpiN / 8) + j;
        const uint32_t byte = (j * 8 + 2 * (lane % 4)) * sizeof(Out);
        float2 bv = make_float2(0.f, 0.f);
        if constexpr (kZ) bv = bias_pair(slice, f, lane);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float x = acc[4 * f + 2 * h], y = acc[4 * f + 2 * h + 1];
          if constexpr (kZ) {
            x = fmaf(alpha, x, bv.x);
            y = fmaf(alpha, y, bv.y);
          }
          *reinterpret_cast<typename P2::Storage*>(buf + swizzle128(r_lo + 8 * h, byte)) = P2::pack(x, y);
        }
      }
    }
  }
}

/// One thread: TMA-stores group g's staged chunks to `map` (clipped at the tensor's edge).
template <class Cfg, class Out>
__device__ __forceinline__ void store_group(const CUtensorMap* map, uint8_t* bufs, int g, int col0,
                                            int row0, int zd) {
  constexpr int kEpiN = 128 / static_cast<int>(sizeof(Out));
  constexpr int kChunks = Cfg::kWgTileN / kEpiN;
#pragma unroll
  for (int i = 0; i < Cfg::kDBufs; ++i) {
    const int c = g * Cfg::kDBufs + i;
    if (c < kChunks) ptx::tma_store_3d(map, bufs + i * Cfg::kEpiTileBytes, col0 + c * kEpiN, row0, zd);
  }
}

}  // namespace detail

/// The epilogue of one warpgroup tile (64 x kWgTileN at (row0, col0) of batch zd): see the
/// file comment. `acc` is consumed (overwritten with act(z)); `slice` is the warpgroup's
/// (kWgTileN,) f32 shared-memory bias slice, `bufs` its kDBufs staging buffers; named
/// barrier 1 + w syncs the warpgroup's 128 threads.
template <class Cfg, class Out>
__device__ __forceinline__ void bias_act_epilogue(const GemmParams& p, float (&acc)[Cfg::kWgTileN / 2],
                                                  const BiasSlice<Cfg>& bias, float* slice,
                                                  uint8_t* bufs, int w, int tid_wg, int lane,
                                                  int row0, int col0, int zd) {
  static_assert(Cfg::kBiasAct && Cfg::kDBufs > 0, "a GemmBiasConfig");
  constexpr Activation kAct = Cfg::kActivation;
  constexpr int kChunks = Cfg::kWgTileN / (128 / static_cast<int>(sizeof(Out)));
  constexpr int kGroups = (kChunks + Cfg::kDBufs - 1) / Cfg::kDBufs;
  const uint32_t r_lo = (tid_wg / 32) * 16 + lane / 4;  // fragment rows r_lo, r_lo + 8
  const bool two_pass = kAct != Activation::kNone && p.has_pre != 0;
  bias.stage(slice, tid_wg);  // published by the first barrier below
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    // 1. Every buffer is rewritten: the stores that last read them must have read them.
    if (tid_wg == 0) ptx::tma_store_wait_group_read<0>();
    named_barrier_sync(1 + w, 128);
    if (two_pass) {
      // 2. z -> pre, then act(z) in registers while the TMA unit reads the buffers.
      detail::stage_group<Cfg, Out, true>(acc, p.alpha, slice, bufs, g, r_lo, lane);
      ptx::fence_proxy_async_shared_cta();  // st.shared -> visible to the TMA store
      named_barrier_sync(1 + w, 128);
      if (tid_wg == 0) {
        detail::store_group<Cfg, Out>(&p.tma_pre, bufs, g, col0, row0, zd);
        ptx::tma_store_commit_group();
      }
    }
    detail::activate_group<Cfg, Out>(acc, p.alpha, slice, g, lane);  // acc <- act(z)
    if (two_pass) {
      if (tid_wg == 0) ptx::tma_store_wait_group_read<0>();  // z read: buffers free again
      named_barrier_sync(1 + w, 128);
    }
    // 3. act(z) -> d.
    detail::stage_group<Cfg, Out, false>(acc, p.alpha, slice, bufs, g, r_lo, lane);
    ptx::fence_proxy_async_shared_cta();
    named_barrier_sync(1 + w, 128);
    if (tid_wg == 0) {
      detail::store_group<Cfg, Out>(&p.tma_d, bufs, g, col0, row0, zd);
      if constexpr (kAct == Activation::kNone) {
        if (p.has_pre) detail::store_group<Cfg, Out>(&p.tma_pre, bufs, g, col0, row0, zd);
      }
      ptx::tma_store_commit_group();
    }
  }
}

}  // namespace jax_sm100::kernels::sm90
