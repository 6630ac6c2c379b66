// The short-K GEMM with the fused epilogues, for K <= 64: the bias/activation forward
// (d = act(acc + bias), z = acc + bias written as `pre`) and the activation backward
// (d = acc * act'(c), column sums into dbias). At such a K a launch's time is its
// epilogue's memory traffic (two M x N outputs written, or one read and one written), not
// its main loop: the pipelined kernels (gemm.cuh) run one CTA of 8 math warps per SM
// through a TMA ring built for long K, and leave DRAM under a third busy there.
//
// This kernel has no pipeline and no persistent schedule. One CTA of 8 warps per 64x256
// output tile, two CTAs per SM:
//   1. every thread issues cp.async copies of the tile's A (64 x K) and B (K x 256) into
//      shared memory (zero-filled past M, N and K) and, for the backward, each warp of its
//      own 32x64 region of C;
//   2. each warp computes its 32x64 accumulator with mma.sync m16n8k16 (K <= 64: at most
//      four steps of 16), fragments from ldmatrix (.trans for a K-major operand);
//   3. the epilogue runs on the fragments in fp32 (activation.h's functions, the
//      numerics of the pipelined kernels' epilogues) and goes out through the warp's
//      region of the C buffer (ldmatrix / stmatrix in the fragment layout, then 16-byte
//      rows to global memory); the backward's column sums meet in shared memory and leave
//      as one f32 atomic per column per CTA.
// The other resident CTA's copies and stores overlap this one's math.
//
// Contract (checked by the handlers: common/gemm_bias_validate.h, gemm_dact_validate.h):
// K <= kShortKMaxK; every operand's contiguous dimension a multiple of 8 elements with
// 16-byte aligned rows; inputs, c and outputs of one 16-bit type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/ptx/common/mbarrier.cuh"  // smem_addr
#include "jax_sm100/ptx/common/mma_sync.cuh"
#include "jax_sm100/ptx/common/stmatrix.cuh"

namespace jax_sm100::kernels::sm90 {

inline constexpr int kShortKBlockM = 64;
inline constexpr int kShortKBlockN = 256;
inline constexpr int kShortKMaxK = 64;
inline constexpr int kShortKThreads = 256;  // 8 warps: 2 along M x 4 along N, 32x64 each

/// One short-K launch. Element strides between batch entries are 0 for a broadcast operand.
struct ShortKParams {
  const void* a;  ///< (M, K), or (K, M) when trans_a
  const void* b;  ///< (K, N), or (N, K) when trans_b
  const void* c;  ///< backward: the saved pre-activation (M, N); else unused
  void* d;        ///< (M, N)
  void* pre;      ///< forward: z (M, N), or null
  const float* bias;  ///< forward: (N,) or null
  float* dbias;       ///< backward: (N,), zeroed by the caller, or null
  int m, n, k, batch;  ///< each < 2^31 (the handlers' check); offsets are 64-bit
  int64_t a_batch_stride, b_batch_stride, c_batch_stride;
  bool trans_a, trans_b;
};

namespace short_k {

// Shared-memory layout, in elements: rows padded by 8 elements (16 bytes) so that the 8
// row addresses of an ldmatrix / stmatrix are on 8 different bank groups.
inline constexpr int kStrideK = kShortKMaxK + 8;       // [m][k] / [n][k] rows
inline constexpr int kStrideM = kShortKBlockM + 8;     // [k][m] rows
inline constexpr int kStrideN = kShortKBlockN + 8;     // [k][n] and C rows
inline constexpr int kAElems = kShortKBlockM * kStrideK;  // == kShortKMaxK * kStrideM
inline constexpr int kBElems =
    kShortKBlockN * kStrideK > kShortKMaxK * kStrideN ? kShortKBlockN * kStrideK
                                                      : kShortKMaxK * kStrideN;
inline constexpr int kCElems = kShortKBlockM * kStrideN;
static_assert(kAElems == kShortKMaxK * kStrideM);
inline constexpr int kSmemBytes = 2 * (kAElems + kBElems + kCElems) + 2 * kShortKBlockN * 4;

/// cp.async of a rows x (chunks * 8) box at (row0, col0) of a row-major (rows_total,
/// cols_total) matrix into shared memory rows of `stride` elements, zeros outside the
/// matrix. `nthreads` threads from `tid` share it: thread t copies chunk t % kChunks of
/// rows t / kChunks, + nthreads / kChunks, ... (kChunks >= chunks, a power of two: no
/// division in the loop).
template <int kChunks, class T>
__device__ __forceinline__ void copy_box(uint32_t dst, const T* src, int rows_total,
                                         int cols_total, int row0, int col0, int rows,
                                         int chunks, int stride, int tid, int nthreads) {
  static_assert((kChunks & (kChunks - 1)) == 0);
  const int ch = tid % kChunks;
  if (ch >= chunks) return;
  const int gc = col0 + 8 * ch;
  const bool col_ok = gc < cols_total;
  for (int r = tid / kChunks; r < rows; r += nthreads / kChunks) {
    const int gr = row0 + r;
    const bool valid = col_ok && gr < rows_total;
    ptx::cp_async_16(dst + 2u * (r * stride + 8 * ch),
                     valid ? src + static_cast<int64_t>(gr) * cols_total + gc : src, valid);
  }
}

__device__ __forceinline__ float lo(uint32_t v, __nv_bfloat16*) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(v & 0xffffu)));
}
__device__ __forceinline__ float hi(uint32_t v, __nv_bfloat16*) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(v >> 16)));
}
__device__ __forceinline__ float lo(uint32_t v, __half*) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xffffu)));
}
__device__ __forceinline__ float hi(uint32_t v, __half*) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
}

/// Two fp32 values rounded to T, the first in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack(float x0, float x1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x0, x1);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x0, x1);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

/// The shared address lane `lane` gives ldmatrix / stmatrix for the four 8x8 tiles
/// (rows 0-7 | 8-15) x (cols 0-7 | 8-15) of a 16x16 box at (row, col) of a row-major
/// buffer: tile j = lane / 8 holds rows 8 (j % 2) .. and columns 8 (j / 2) ...
__device__ __forceinline__ uint32_t box_lane_addr(uint32_t base, int row, int col, int stride,
                                                  int lane) {
  return base + 2u * ((row + (lane & 7) + ((lane >> 3) & 1) * 8) * stride + col + (lane >> 4) * 8);
}

/// The same box read transposed (ldmatrix .trans of a (cols, rows)-major buffer): tile j
/// holds stored rows 8 (j / 2) .. and stored columns 8 (j % 2) ...
__device__ __forceinline__ uint32_t box_lane_addr_t(uint32_t base, int row, int col, int stride,
                                                    int lane) {
  return base + 2u * ((row + (lane & 7) + (lane >> 4) * 8) * stride + col + ((lane >> 3) & 1) * 8);
}

/// The warp's 32 x 64 region of the C buffer to rows of (m, n) `out` at (row0, col0),
/// 16 bytes per lane and store, rows past m and columns past n skipped.
template <class T>
__device__ __forceinline__ void store_region(const T* s_region, T* out, int m, int n, int row0,
                                             int col0, int lane) {
#pragma unroll
  for (int it = 0; it < 8; ++it) {
    const int r = it * 4 + lane / 8, ch = lane % 8;
    const int gr = row0 + r, gc = col0 + 8 * ch;
    const uint4 v = *reinterpret_cast<const uint4*>(s_region + r * kStrideN + 8 * ch);
    if (gr < m && gc < n)
      *reinterpret_cast<uint4*>(out + static_cast<int64_t>(gr) * n + gc) = v;
  }
}

}  // namespace short_k

/// kDact false: the forward (bias, activation A, pre); true: the backward of A.
template <class T, Activation A, bool kDact>
__global__ void __launch_bounds__(kShortKThreads, 2) gemm_short_k_kernel(const ShortKParams p) {
  using namespace short_k;
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_a = reinterpret_cast<T*>(smem);
  T* s_b = s_a + kAElems;
  T* s_c = s_b + kBElems;
  // [2][kShortKBlockN] f32: the backward's column sums per warp row; the forward's bias
  // slice (first row).
  float* s_sums = reinterpret_cast<float*>(s_c + kCElems);
  const uint32_t a_base = ptx::smem_addr(s_a), b_base = ptx::smem_addr(s_b),
                 c_base = ptx::smem_addr(s_c);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;  // the warp's 32x64 region: rows 32 wm, cols 64 wn
  const int m0 = blockIdx.x * kShortKBlockM, n0 = blockIdx.y * kShortKBlockN;
  const int kp = (p.k + 15) / 16 * 16;  // K rounded up to the MMA's step

  for (int bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* a = static_cast<const T*>(p.a) + bz * p.a_batch_stride;
    const T* b = static_cast<const T*>(p.b) + bz * p.b_batch_stride;

    // 1. The operands (group 0) and, for the backward, the warp's C region (group 1).
    constexpr int kKChunks = kShortKMaxK / 8, kMChunks = kShortKBlockM / 8;
    constexpr int kNChunks = kShortKBlockN / 8;
    if (p.trans_a)  // (K, M): [k][m]
      copy_box<kMChunks>(a_base, a, p.k, p.m, 0, m0, kp, kMChunks, kStrideM, tid, kShortKThreads);
    else  // (M, K): [m][k]
      copy_box<kKChunks>(a_base, a, p.m, p.k, m0, 0, kShortKBlockM, kp / 8, kStrideK, tid,
                         kShortKThreads);
    if (p.trans_b)  // (N, K): [n][k]
      copy_box<kKChunks>(b_base, b, p.n, p.k, n0, 0, kShortKBlockN, kp / 8, kStrideK, tid,
                         kShortKThreads);
    else  // (K, N): [k][n]
      copy_box<kNChunks>(b_base, b, p.k, p.n, 0, n0, kp, kNChunks, kStrideN, tid, kShortKThreads);
    if constexpr (!kDact) {  // the tile's bias slice, f32, into s_sums' first row
      if (p.bias != nullptr && tid < kShortKBlockN / 4) {
        const bool valid = n0 + 4 * tid < p.n;  // n is a multiple of 8
        ptx::cp_async_16(ptx::smem_addr(s_sums + 4 * tid), valid ? p.bias + n0 + 4 * tid : p.bias,
                         valid);
      }
    }
    ptx::cp_async_commit();
    const uint32_t region = c_base + 2u * (wm * 32 * kStrideN + wn * 64);
    if constexpr (kDact) {
      const T* c = static_cast<const T*>(p.c) + bz * p.c_batch_stride;
      copy_box<8>(region, c, p.m, p.n, m0 + wm * 32, n0 + wn * 64, 32, 8, kStrideN, lane, 32);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();

    // 2. The warp's 32x64 accumulator: [m16 tile i][n8 tile j][fragment element].
    float acc[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kShortKMaxK / 16; ++ks) {
      if (ks * 16 >= kp) break;
      uint32_t af[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if (p.trans_a)
          ptx::ldmatrix_x4<true>(box_lane_addr_t(a_base, ks * 16, wm * 32 + i * 16, kStrideM, lane), af[i]);
        else
          ptx::ldmatrix_x4<false>(box_lane_addr(a_base, wm * 32 + i * 16, ks * 16, kStrideK, lane), af[i]);
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // n8 tiles 2q and 2q + 1
        uint32_t bf[4];
        if (p.trans_b) {  // [n][k]: tiles (n 0-7 | 8-15) x (k 0-7 | 8-15), n along j / 2
          ptx::ldmatrix_x4<false>(box_lane_addr_t(b_base, wn * 64 + q * 16, ks * 16, kStrideK, lane), bf);
        } else {  // [k][n] read transposed: k along j % 2, n along j / 2
          ptx::ldmatrix_x4<true>(box_lane_addr(b_base, ks * 16, wn * 64 + q * 16, kStrideN, lane), bf);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          ptx::mma_m16n8k16<T>(acc[i][2 * q], af[i], bf[0], bf[1]);
          ptx::mma_m16n8k16<T>(acc[i][2 * q + 1], af[i], bf[2], bf[3]);
        }
      }
    }

    // 3. The epilogue. Fragment element e of tile (i, j): row 16 i + lane / 4 + 8 (e / 2),
    // column 8 j + 2 (lane % 4) + e % 2 of the warp's region; the region's 16x16 box (i, q)
    // holds tiles j = 2 q, 2 q + 1, ldmatrix / stmatrix registers (j 2q: rows 0-7, 8-15;
    // j 2q+1: rows 0-7, 8-15).
    const int64_t out_offset = static_cast<int64_t>(bz) * p.m * p.n;
    T* d = static_cast<T*>(p.d) + out_offset;
    const int row0 = m0 + wm * 32, col0 = n0 + wn * 64;
    const T* s_region = s_c + wm * 32 * kStrideN + wn * 64;
    if constexpr (kDact) {
      ptx::cp_async_wait<0>();
      __syncwarp();
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float sums[4] = {0.f, 0.f, 0.f, 0.f};  // columns 16 q + 8 (s / 2) + 2 (lane % 4) + s % 2
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const uint32_t addr = box_lane_addr(region, i * 16, q * 16, kStrideN, lane);
          uint32_t zf[4];
          ptx::ldmatrix_x4<false>(addr, zf);
          uint32_t out[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {  // r: (tile 2q + r / 2, rows 8 (r % 2))
            const float* f = &acc[i][2 * q + r / 2][2 * (r % 2)];
            const float x0 = f[0] * activation_grad<A>(lo(zf[r], (T*)nullptr));
            const float x1 = f[1] * activation_grad<A>(hi(zf[r], (T*)nullptr));
            sums[2 * (r / 2)] += x0;
            sums[2 * (r / 2) + 1] += x1;
            out[r] = pack<T>(x0, x1);
          }
          ptx::stmatrix_x4(addr, out[0], out[1], out[2], out[3]);
        }
        if (p.dbias != nullptr) {
#pragma unroll
          for (int s = 0; s < 4; ++s) {
            sums[s] += __shfl_xor_sync(0xffffffffu, sums[s], 4);
            sums[s] += __shfl_xor_sync(0xffffffffu, sums[s], 8);
            sums[s] += __shfl_xor_sync(0xffffffffu, sums[s], 16);
          }
          if (lane < 4) {
#pragma unroll
            for (int s = 0; s < 4; ++s)
              s_sums[wm * kShortKBlockN + wn * 64 + 16 * q + 8 * (s / 2) + 2 * lane + s % 2] = sums[s];
          }
        }
      }
      __syncwarp();
      store_region(s_region, d, p.m, p.n, row0, col0, lane);
      if (p.dbias != nullptr) {
        __syncthreads();
        const float sum = s_sums[tid] + s_sums[kShortKBlockN + tid];
        if (n0 + tid < p.n) atomicAdd(p.dbias + n0 + tid, sum);
      }
    } else {
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {  // 0: z into pre (when wanted), 1: act(z) into d
        if (pass == 0 && p.pre == nullptr) continue;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          float bias[4];  // columns 16 q + 8 (s / 2) + 2 (lane % 4) + s % 2, as the fragments
#pragma unroll
          for (int s = 0; s < 4; ++s)
            bias[s] = p.bias != nullptr
                          ? s_sums[wn * 64 + 16 * q + 8 * (s / 2) + 2 * (lane % 4) + s % 2]
                          : 0.f;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            uint32_t out[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              const float* f = &acc[i][2 * q + r / 2][2 * (r % 2)];
              const float z0 = f[0] + bias[2 * (r / 2)];
              const float z1 = f[1] + bias[2 * (r / 2) + 1];
              out[r] = pass == 0 ? pack<T>(z0, z1)
                                 : pack<T>(apply_activation<A>(z0), apply_activation<A>(z1));
            }
            ptx::stmatrix_x4(box_lane_addr(region, i * 16, q * 16, kStrideN, lane), out[0],
                             out[1], out[2], out[3]);
          }
        }
        __syncwarp();
        T* out = pass == 0 ? static_cast<T*>(p.pre) + out_offset : d;
        store_region(s_region, out, p.m, p.n, row0, col0, lane);
        __syncwarp();
      }
    }
    __syncthreads();  // the buffers are reused by the next batch entry
  }
}

}  // namespace jax_sm100::kernels::sm90
