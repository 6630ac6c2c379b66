// sm_90a blockwise-scaled FP8 GEMM, part 3 of 5: the math warpgroups' building blocks:
// freeing input stages across the cluster, wgmma descriptors, scale reads, one K block's
// wgmmas, the per-K-block promotion, the per-WG state (MathWG) and the epilogue
// (store_tile). The main loops that combine them are in fp8_gemm_mainloop.cuh.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include <utility>

#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_config.cuh"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/ld_shared.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/stmatrix.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"
#include "jax_sm100/ptx/sm90/wgmma_fp8.cuh"

namespace jax_sm100::kernels::sm90_fp8 {

/// Free a consumed input stage (its empty barrier): one arrival per math warp on that
/// stage's empty barrier of every CTA of the cluster (lane l signals CTA l; the peer's
/// multicast writes into our stage too, so it must wait for our consumers as well). The
/// math loops hold a stage across the next one's issue (or the epilogue), so they drive
/// the ring through its stage-index API and free stages by barrier.
template <class Cfg>
__device__ __forceinline__ void release_input_barrier(pipeline::DeviceBarrier* empty, int lane) {
  if constexpr (Cfg::kCluster == 1) {
    if (lane == 0) empty->arrive();
  } else {
    if (lane < Cfg::kCluster) empty->arrive_cluster(static_cast<uint32_t>(lane));
  }
}

/// Element offset of (row, col) in a WG's D/C staging: 64-column chunks of 64 rows x
/// 128 bytes with the 128-byte swizzle (16-byte unit index XOR row % 8), which is what
/// TMA's SWIZZLE_128B reads and writes, and bank-conflict free for the accumulator
/// layout (8 rows x 4 threads per store).
template <class Cfg>
__device__ __forceinline__ int staging_offset(int row, int col) {
  const int chunk = col / Cfg::kEpiChunk, c = col % Cfg::kEpiChunk;
  return chunk * (Cfg::WG_M * Cfg::kEpiChunk) + row * Cfg::kEpiChunk +
         (((c / 8) ^ (row % 8)) * 8) + (c % 8);
}

/// The two products a_scale[row] * b_scale a thread needs for one K block (rows r0 and
/// r0 + 8; the tile lies in one B-scale block).
struct KScales {
  float s0, s8;
};

/// Row offset in the tile of WG wg's 64 rows of wave `wave`.
template <class Cfg>
__device__ __forceinline__ int wave_row0(int wg, int wave) {
  return wave * Cfg::kMathWGs * Cfg::WG_M + wg * Cfg::WG_M;
}

/// The wgmma shared-memory descriptors of every stage's A (this WG's rows) and B tile,
/// kept as 32-bit low words computed once per kernel: the main loop then builds each
/// descriptor with an add (start address >> 4 in the low word; the high word, SBO 1024
/// and the 128-byte swizzle, is the same for every tile), instead of re-deriving shared
/// addresses from generic pointers every K block.
template <class Cfg>
struct TileDescs {
  uint32_t a_lo0, b_lo0;  // stage 0: A at this WG's wave-0 rows, B
  static constexpr uint32_t kAStride = Cfg::Tiles::a_bytes >> 4, kBStride = Cfg::Tiles::b_bytes >> 4;
  __device__ __forceinline__ TileDescs(typename Cfg::Tiles& tiles, int wg, int r0) {
    sfa0 = ptx::smem_addr(tiles.sfa_tile(0) + wave_row0<Cfg>(wg, 0) + r0);
    a_lo0 = static_cast<uint32_t>(ptx::make_smem_desc(
        ptx::smem_addr(tiles.a_tile(0) + wave_row0<Cfg>(wg, 0) * Cfg::BLOCK_K), 0, 1024,
        ptx::WgmmaSwizzle::k128B));
    b_lo0 = static_cast<uint32_t>(
        ptx::make_smem_desc(ptx::smem_addr(tiles.b_tile(0)), 0, 1024, ptx::WgmmaSwizzle::k128B));
    // Opaque to the compiler: under the two-wave loop's register pressure it otherwise
    // re-derives these from the shared window (S2R SR_CgaCtaId + ~30 ALU ops) every K
    // block, on the path from the full barrier to the first wgmma. The descriptor words
    // also go through a shuffle from lane 0: provably warp-uniform, they (and the stage
    // index, shuffled likewise) live in uniform registers, so a wave's 4 wgmmas issue
    // back to back instead of each waiting on R2UR moves (+1-2%, H200, with the
    // full-tile loop).
    a_lo0 = __shfl_sync(0xffffffffu, a_lo0, 0);
    b_lo0 = __shfl_sync(0xffffffffu, b_lo0, 0);
    asm volatile("" : "+r"(sfa0));  // per thread (its rows)
  }
  __device__ __forceinline__ uint32_t a_lo(uint32_t stage, int wave) const {
    return a_lo0 + stage * kAStride + (wave * Cfg::kMathWGs * Cfg::WG_M * Cfg::BLOCK_K >> 4);
  }
  __device__ __forceinline__ uint32_t b_lo(uint32_t stage) const { return b_lo0 + stage * kBStride; }
  /// Shared address of A's scale for row r0 of this WG's wave-0 rows in stage `stage`.
  uint32_t sfa0;
  static constexpr uint32_t kSfaStride = Cfg::Tiles::sfa_stride * sizeof(float);
  __device__ __forceinline__ uint32_t sfa(uint32_t stage, int wave) const {
    return sfa0 + stage * kSfaStride + wave * Cfg::kMathWGs * Cfg::WG_M * sizeof(float);
  }
  static __device__ __forceinline__ uint64_t desc(uint32_t lo) {
    const uint64_t hi = ptx::make_smem_desc(0, 0, 1024, ptx::WgmmaSwizzle::k128B) >> 32;
    return (hi << 32) | lo;
  }
};

/// The products a_scale[row] * b_scale of K block kb for rows r0, r0 + 8 of wave `wave`
/// (stage `stage`); `sfb` is the shared address of this tile's B-scale row.
template <class Cfg>
__device__ __forceinline__ KScales read_scales(const TileDescs<Cfg>& descs, uint32_t stage, int wave,
                                               uint32_t sfb, int kb) {
  const uint32_t sfa = descs.sfa(stage, wave);
  const float sa0 = ptx::ld_shared_f32(sfa), sa1 = ptx::ld_shared_f32(sfa + 8 * sizeof(float));
  const float sb = ptx::ld_shared_f32(sfb + kb * sizeof(float));
  return KScales{sa0 * sb, sa1 * sb};
}

/// 4 x wgmma m64nNk32 over one 128-wide K block into a fresh accumulator (descriptor low
/// words of the A rows and B tile, see TileDescs); committed as one group (not waited for).
template <class Cfg>
__device__ __forceinline__ void issue_k_block(float (&acc)[Cfg::kAcc], uint32_t a_lo, uint32_t b_lo) {
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < Cfg::BLOCK_K / 32; ++k)  // k32 slices: +32 bytes = +2 in the desc
    Cfg::Mma::mma(acc, TileDescs<Cfg>::desc(a_lo + 2 * k), TileDescs<Cfg>::desc(b_lo + 2 * k),
                  k > 0 ? 1 : 0);
  ptx::wgmma_commit();
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
}

/// final += acc * scale (each group of 4 accumulators: 2 in row r0, 2 in row r0 + 8).
template <class Cfg>
__device__ __forceinline__ void promote(float (&final_acc)[Cfg::kAcc], const float (&acc)[Cfg::kAcc],
                                        const KScales& sc) {
#pragma unroll
  for (int g = 0; g < Cfg::kAcc / 4; ++g) {
    final_acc[4 * g + 0] += sc.s0 * acc[4 * g + 0];
    final_acc[4 * g + 1] += sc.s0 * acc[4 * g + 1];
    final_acc[4 * g + 2] += sc.s8 * acc[4 * g + 2];
    final_acc[4 * g + 3] += sc.s8 * acc[4 * g + 3];
  }
}


/// One tile as a math WG sees it: where it lies, which B-scale row it reads, and how
/// much of it is this WG's to compute and store.
struct TileJob {
  int t;           // index in the tile order
  int mt, nt, n0;  // M tile, N tile, first column
  int waves_live;  // this WG's waves holding rows < M (0: nothing to compute or store)
  uint32_t sfb;    // shared address of the tile's B-scale row
  float bias;      // bias kernels: bias[n0 + t128] (0 past N, without a bias or t128 >= BLOCK_N)
};

/// Per-WG state the main loops and epilogues share.
template <class Cfg>
struct MathWG {
  int wg, t128, lane, r0;  // r0: accumulator rows r0 and r0 + 8 of the WG's 64
  int sfb_words;           // floats in one B-scale buffer
  float* sfb_all;          // the two B-scale buffers
  typename Cfg::ScalePipe sfb_pipe;  // this thread's view of the B-scale ring
  bool holds_scales = false;         // a begun tile's B-scale stage is not yet freed
  __nv_bfloat16* d_wg;     // this WG's D staging
  const __nv_bfloat16* c_wg;
  float* bias_wg;          // bias kernels: this WG's copy of the tile's BLOCK_N bias columns

  __device__ __forceinline__ MathWG(typename Cfg::Smem* smem, float* sfb, const Fp8GemmParams& p)
      : wg(threadIdx.x / 128), t128(threadIdx.x % 128), lane(threadIdx.x % 32),
        r0(((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4),
        sfb_words(p.num_kb), sfb_all(sfb), sfb_pipe(smem->sfb_bars, "fp8_b_scales") {
    d_wg = smem->d[wg];
    c_wg = smem->c[Cfg::kResidual ? wg : 0];
    bias_wg = smem->bias[Cfg::kBias ? wg : 0];
  }

  /// How many of this WG's waves of tile (mt, nt) hold rows < M (0 when the N tile lies
  /// past N).
  __device__ __forceinline__ int waves_live(const Fp8GemmParams& p, int mt, int nt) const {
    const int row_wg = mt * Cfg::BLOCK_M + wg * Cfg::WG_M;
    return (nt * Cfg::BLOCK_N < p.n && row_wg < p.m)
               ? min(Cfg::kWaves, (p.m - row_wg + Cfg::kWaveRows - 1) / Cfg::kWaveRows)
               : 0;
  }
  /// The same for tile t of the order.
  __device__ __forceinline__ int waves_live(const TileScheduler& order, const Fp8GemmParams& p,
                                            int t) const {
    int mt, nt;
    order.tile(t, mt, nt);
    return waves_live(p, mt, nt);
  }

  /// Start tile t: free the previous tile's B-scale stage (its last scale was read: the
  /// caller has issued all of that tile's K blocks), wait for this tile's. Every thread
  /// of every math WG calls it for every tile of the order, in order.
  __device__ __forceinline__ TileJob begin_tile(const TileScheduler& order, const Fp8GemmParams& p,
                                                int t) {
    TileJob job;
    job.t = t;
    order.tile(t, job.mt, job.nt);
    job.n0 = job.nt * Cfg::BLOCK_N;
    job.waves_live = waves_live(p, job.mt, job.nt);
    job.sfb = next_scales();
    // The bias column this thread stages at the tile's epilogue, loaded now so the
    // global load's latency hides behind the tile's main loop. Not with three math WGs
    // (192-row tiles): at their 128 registers the held value made ptxas spill, so
    // store_tile loads it there.
    job.bias = 0.f;
    if constexpr (Cfg::kBias && Cfg::kMathWGs == 2) job.bias = load_bias(p, job.n0);
    return job;
  }

  /// This thread's bias column of the N tile at n0 (0 without a bias, past N, or for a
  /// thread past BLOCK_N).
  __device__ __forceinline__ float load_bias(const Fp8GemmParams& p, int n0) const {
    const int col = n0 + t128;
    return p.bias != nullptr && t128 < Cfg::BLOCK_N && col < p.n ? __ldg(p.bias + col) : 0.f;
  }

  /// The B-scale part of begin_tile: hand the held stage back, wait for the next one;
  /// its shared address.
  __device__ __forceinline__ uint32_t next_scales() {
    if (holds_scales) {
      __syncwarp();  // the warp's reads of the stage come before its one arrival
      if (lane == 0) sfb_pipe.consumer_mbar(sfb_pipe.consumer_stage())->arrive();
      sfb_pipe.consumer_step();
    }
    sfb_pipe.wait_producer();  // filled by the B-scale warp, normally long ago
    holds_scales = true;
    return ptx::smem_addr(sfb_all + sfb_pipe.consumer_stage() * sfb_words);
  }
};

/// (x, y) rounded to bf16, x in the low half, as a 32-bit register.
__device__ __forceinline__ uint32_t bf16x2_bits(float x, float y) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&v);
}

/// The WG's final accumulators as bf16 into its D staging (staging_offset layout), by
/// stmatrix x4: two 8-column groups of the warp's 16 rows per instruction. Lane l
/// addresses row l % 8 of tile l / 8: rows +8 for odd tiles, the second group for tiles 2
/// and 3. (The caller has made sure the last store left the staging.)
/// Bias kernels (Cfg::kBias) store act(acc + bias[col]) instead, the bias read from
/// `bias_slice` (the tile's BLOCK_N columns, published by the caller): a thread's
/// accumulators 4 g .. 4 g + 3 are columns 8 g + 2 (lane % 4) + {0, 1} of rows r0 and
/// r0 + 8, so one 8-byte shared load per 8-column group serves both rows (the 8 lanes of
/// a lane % 4 class read the same address: a broadcast).
template <class Cfg>
__device__ __forceinline__ void stage_final_acc(const float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                const MathWG<Cfg>& m, const float* bias_slice = nullptr) {
  const int tile = m.lane / 8;
  const int row = (m.t128 / 32) * 16 + (tile % 2) * 8 + m.lane % 8;
  const uint32_t d_addr = ptx::smem_addr(m.d_wg);
#pragma unroll
  for (int w = 0; w < Cfg::kWaves; ++w) {
#pragma unroll
    for (int g = 0; g < Cfg::kAcc / 4; g += 2) {
      const int off = w * Cfg::WG_M * Cfg::BLOCK_N + staging_offset<Cfg>(row, (g + tile / 2) * 8);
      float f[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = final_acc[w][4 * g + i];
      if constexpr (Cfg::kBias) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // groups g and g + 1
          const float2 b = *reinterpret_cast<const float2*>(bias_slice + 8 * (g + h) + 2 * (m.lane % 4));
#pragma unroll
          for (int r = 0; r < 2; ++r) {  // rows r0 and r0 + 8
            f[4 * h + 2 * r] = apply_activation<Cfg::kActivation>(f[4 * h + 2 * r] + b.x);
            f[4 * h + 2 * r + 1] = apply_activation<Cfg::kActivation>(f[4 * h + 2 * r + 1] + b.y);
          }
        }
      }
      ptx::stmatrix_x4(d_addr + off * 2, bf16x2_bits(f[0], f[1]), bf16x2_bits(f[2], f[3]),
                       bf16x2_bits(f[4], f[5]), bf16x2_bits(f[6], f[7]));
    }
  }
}

/// Epilogue of one tile: fp32 (+ beta*C, or act(. + bias) for a bias kernel) -> bf16 ->
/// swizzled smem -> TMA store of the WG's live rows. With the residual, it consumes the WG's C stage even when nothing is
/// stored (the loader streams C for every tile).
template <class Cfg>
__device__ __forceinline__ void store_tile(const float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                           const MathWG<Cfg>& m, typename Cfg::EpiPipe& epi,
                                           const CUtensorMap* map_d, const Fp8GemmParams& p,
                                           const TileJob& job) {
  if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();  // last tile's store left smem
  // Bias kernels: this thread's bias column into the WG's slice, published by the barrier
  // below. The WG's reads of the previous tile's slice all precede that tile's second
  // barrier, which every thread has passed, so the overwrite is safe.
  if constexpr (Cfg::kBias) {
    const float bias = Cfg::kMathWGs == 2 ? job.bias : m.load_bias(p, job.n0);
    if (m.t128 < Cfg::BLOCK_N) m.bias_wg[m.t128] = bias;
  }
  named_barrier_sync(1 + m.wg, 128);
  if constexpr (Cfg::kResidual) {
    static_assert(Cfg::kWaves == 1, "residual: one wave");
    const int quad = m.lane % 4;
    auto c_stage = epi.acquire_consumer();  // C rows of this WG have landed
    const float beta = p.beta;
#pragma unroll
    for (int g = 0; g < Cfg::kAcc / 4; ++g) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int off = staging_offset<Cfg>(m.r0 + 8 * h, g * 8 + 2 * quad);
        const float2 cv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(m.c_wg + off));
        *reinterpret_cast<__nv_bfloat162*>(m.d_wg + off) = __floats2bfloat162_rn(
            fmaf(beta, cv.x, final_acc[0][4 * g + 2 * h]), fmaf(beta, cv.y, final_acc[0][4 * g + 2 * h + 1]));
      }
    }
    std::move(c_stage).release();  // each of the 128 threads arrives once
  } else {
    stage_final_acc<Cfg>(final_acc, m, m.bias_wg);
  }
  ptx::fence_proxy_async_shared_cta();  // st.shared -> TMA store (async proxy)
  named_barrier_sync(1 + m.wg, 128);
  if (m.t128 == 0 && job.waves_live > 0) {
#pragma unroll
    for (int w = 0; w < Cfg::kWaves; ++w) {
      if (w < job.waves_live) {
#pragma unroll
        for (int ch = 0; ch < Cfg::BLOCK_N / Cfg::kEpiChunk; ++ch)
          if (job.n0 + ch * Cfg::kEpiChunk < p.n)  // chunks wholly past N: nothing to write
            ptx::tma_store_2d(map_d, m.d_wg + (w * Cfg::BLOCK_N / Cfg::kEpiChunk + ch) * Cfg::WG_M * Cfg::kEpiChunk,
                              job.n0 + ch * Cfg::kEpiChunk, job.mt * Cfg::BLOCK_M + wave_row0<Cfg>(m.wg, w));
      }
    }
    ptx::tma_store_commit_group();
  }
}

}  // namespace jax_sm100::kernels::sm90_fp8
