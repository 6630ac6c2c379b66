// The activation-backward GEMM for a short K (<= 64): d = acc * act'(c) rounded to T, the
// fp32 column sums of the unrounded products into dbias (target jax_sm100_gemm_dact, the
// tiling (64, 256, 1)). At such a K the launch's time is its two M x N streams, c read
// and d written, not its main loop; the pipelined dact kernels (gemm.cuh) bring a TMA ring
// built for long K and one CTA of 8 math warps per SM. Measured on an H200: 6-8% faster
// than them at K = 16, slower at K = 64 (docs/sm90_gemm.md).
//
// Persistent CTAs of 8 warps (as many per SM as the occupancy query allows: shared memory
// grows with K, 95 KB at K = 32, 113 KB at 64; registers cap it at two), 64x256
// output tiles, each warp a 32x64 region. Per tile:
//   1. wait for the tile's operands and c region (cp.async, issued during the previous
//      tile's epilogue), then each warp computes its accumulator with mma.sync m16n8k16
//      (at most four K steps of 16; fragments by ldmatrix, .trans for a K-major operand);
//   2. after a CTA barrier (the operand buffers are free), issue the next tile's A, B and
//      c copies (c into the other of two buffers): they land while
//   3. each warp runs the epilogue on its fragments: c read in the fragment layout
//      (ldmatrix), d = acc * act'(c) in fp32 (activation.h), written back in place
//      (stmatrix) and out as 16-byte rows; the column sums reduced by shuffles, met in
//      shared memory and sent as one f32 atomic per column per tile.
//
// Contract (checked by the handler: common/gemm_dact_validate.h): K <= kShortKMaxK; every
// operand's contiguous dimension a multiple of 8 elements with 16-byte aligned rows;
// a, b, c and d of one 16-bit type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "jax_sm100/kernels/common/activation.h"
#include "jax_sm100/kernels/sm90/gemm_config.cuh"  // detail::Pack2
#include "jax_sm100/ptx/common/mbarrier.cuh"  // smem_addr
#include "jax_sm100/ptx/common/mma_sync.cuh"
#include "jax_sm100/ptx/common/stmatrix.cuh"

namespace jax_sm100::kernels::sm90 {

inline constexpr int kShortKBlockM = 64;
inline constexpr int kShortKBlockN = 256;
inline constexpr int kShortKMaxK = 64;
inline constexpr int kShortKThreads = 256;  // 8 warps: 2 along M x 4 along N, 32x64 each

/// One launch. Element strides between batch entries are 0 for a broadcast operand.
struct ShortKDactParams {
  const void* a;  ///< (M, K), or (K, M) when trans_a
  const void* b;  ///< (K, N), or (N, K) when trans_b
  const void* c;  ///< the saved pre-activation (M, N)
  void* d;        ///< (M, N)
  float* dbias;   ///< (N,), zeroed by the caller, or null
  int m, n, k, batch;  ///< each < 2^31 (the handler's check); offsets are 64-bit
  int64_t a_batch_stride, b_batch_stride, c_batch_stride;
  bool trans_a, trans_b;
};

namespace short_k {

// Shared memory, in elements: rows padded by 8 elements (16 bytes) so that the 8 row
// addresses of an ldmatrix / stmatrix are on 8 different bank groups. A and B take the
// room their layout needs at the launch's K rounded up to 16 (kp); then two c buffers and
// the column sums.
inline constexpr int kStrideM = kShortKBlockM + 8;  // [k][m] rows
inline constexpr int kStrideN = kShortKBlockN + 8;  // [k][n] and c rows
inline constexpr int kCElems = kShortKBlockM * kStrideN;

__host__ __device__ constexpr int a_elems(int kp, bool trans_a) {
  return trans_a ? kp * kStrideM : kShortKBlockM * (kp + 8);
}
__host__ __device__ constexpr int b_elems(int kp, bool trans_b) {
  return trans_b ? kShortKBlockN * (kp + 8) : kp * kStrideN;
}
/// Dynamic shared memory of a launch (16-byte multiples throughout).
__host__ __device__ constexpr int smem_bytes(int kp, bool trans_a, bool trans_b) {
  return 2 * (a_elems(kp, trans_a) + b_elems(kp, trans_b) + 2 * kCElems) + 2 * kShortKBlockN * 4;
}

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

/// Two packed 16-bit values (the low half first) as floats, and back rounded to T: the
/// GEMM epilogue's Pack2 on the 32-bit registers ldmatrix / stmatrix move.
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
  using Storage = typename detail::Pack2<T>::Storage;
  return detail::Pack2<T>::unpack(*reinterpret_cast<const Storage*>(&v));
}
template <class T>
__device__ __forceinline__ uint32_t pack2(float x0, float x1) {
  const typename detail::Pack2<T>::Storage v = detail::Pack2<T>::pack(x0, x1);
  return *reinterpret_cast<const uint32_t*>(&v);
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

/// The warp's 32 x 64 region of a c buffer to rows of (m, n) `out` at (row0, col0),
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

/// One tile's place: batch entry, first row, first column.
struct TileCoord {
  int bz, m0, n0;
};

__device__ __forceinline__ TileCoord tile_coord(int t, int tiles_m, int tiles_n) {
  const int tm = t % tiles_m, rest = t / tiles_m;
  return {rest / tiles_n, tm * kShortKBlockM, (rest % tiles_n) * kShortKBlockN};
}

/// cp.async of one tile's A and B (every thread) and of each warp's c region into
/// `c_buf` (by that warp), one commit group.
template <class T>
__device__ __forceinline__ void issue_tile_loads(const ShortKDactParams& p, TileCoord tc, int kp,
                                                 uint32_t a_base, uint32_t b_base,
                                                 uint32_t c_region, int tid, int wm, int wn) {
  constexpr int kKChunks = kShortKMaxK / 8, kMChunks = kShortKBlockM / 8;
  constexpr int kNChunks = kShortKBlockN / 8;
  const T* a = static_cast<const T*>(p.a) + tc.bz * p.a_batch_stride;
  const T* b = static_cast<const T*>(p.b) + tc.bz * p.b_batch_stride;
  const T* c = static_cast<const T*>(p.c) + tc.bz * p.c_batch_stride;
  if (p.trans_a)  // (K, M): [k][m]
    copy_box<kMChunks>(a_base, a, p.k, p.m, 0, tc.m0, kp, kMChunks, kStrideM, tid, kShortKThreads);
  else  // (M, K): [m][k]
    copy_box<kKChunks>(a_base, a, p.m, p.k, tc.m0, 0, kShortKBlockM, kp / 8, kp + 8, tid,
                       kShortKThreads);
  if (p.trans_b)  // (N, K): [n][k]
    copy_box<kKChunks>(b_base, b, p.n, p.k, tc.n0, 0, kShortKBlockN, kp / 8, kp + 8, tid,
                       kShortKThreads);
  else  // (K, N): [k][n]
    copy_box<kNChunks>(b_base, b, p.k, p.n, 0, tc.n0, kp, kNChunks, kStrideN, tid, kShortKThreads);
  copy_box<8>(c_region, c, p.m, p.n, tc.m0 + wm * 32, tc.n0 + wn * 64, 32, 8, kStrideN, tid % 32,
              32);
  ptx::cp_async_commit();
}

}  // namespace short_k

template <class T, Activation A>
__global__ void __launch_bounds__(kShortKThreads, 2) gemm_dact_short_k_kernel(const ShortKDactParams p) {
  using namespace short_k;
  extern __shared__ __align__(128) unsigned char smem[];
  const int kp = (p.k + 15) / 16 * 16;  // K rounded up to the MMA's step
  T* s_a = reinterpret_cast<T*>(smem);
  T* s_b = s_a + a_elems(kp, p.trans_a);
  T* s_c = s_b + b_elems(kp, p.trans_b);                  // [2][kCElems]
  float* s_sums = reinterpret_cast<float*>(s_c + 2 * kCElems);  // [2][kShortKBlockN]
  const uint32_t a_base = ptx::smem_addr(s_a), b_base = ptx::smem_addr(s_b);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;  // the warp's 32x64 region: rows 32 wm, cols 64 wn
  const int region_offset = wm * 32 * kStrideN + wn * 64;
  const int tiles_m = (p.m + kShortKBlockM - 1) / kShortKBlockM;
  const int tiles_n = (p.n + kShortKBlockN - 1) / kShortKBlockN;
  const int tiles = tiles_m * tiles_n * p.batch;  // < 2^31: the launch's check

  int t = blockIdx.x;
  if (t < tiles)
    issue_tile_loads<T>(p, tile_coord(t, tiles_m, tiles_n), kp, a_base, b_base,
                        ptx::smem_addr(s_c + region_offset), tid, wm, wn);
  for (int buf = 0; t < tiles; t += gridDim.x, buf ^= 1) {
    const TileCoord tc = tile_coord(t, tiles_m, tiles_n);
    ptx::cp_async_wait<0>();
    __syncthreads();

    // 1. The warp's 32x64 accumulator: [m16 tile i][n8 tile j][fragment element].
    float acc[2][8][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    const int stride_k = kp + 8;
#pragma unroll
    for (int ks = 0; ks < kShortKMaxK / 16; ++ks) {
      if (ks * 16 >= kp) break;
      uint32_t af[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if (p.trans_a)
          ptx::ldmatrix_x4<true>(box_lane_addr_t(a_base, ks * 16, wm * 32 + i * 16, kStrideM, lane), af[i]);
        else
          ptx::ldmatrix_x4<false>(box_lane_addr(a_base, wm * 32 + i * 16, ks * 16, stride_k, lane), af[i]);
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // n8 tiles 2q and 2q + 1
        uint32_t bf[4];
        if (p.trans_b)  // [n][k]: tiles (n 0-7 | 8-15) x (k 0-7 | 8-15), n along j / 2
          ptx::ldmatrix_x4<false>(box_lane_addr_t(b_base, wn * 64 + q * 16, ks * 16, stride_k, lane), bf);
        else  // [k][n] read transposed: k along j % 2, n along j / 2
          ptx::ldmatrix_x4<true>(box_lane_addr(b_base, ks * 16, wn * 64 + q * 16, kStrideN, lane), bf);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          ptx::mma_m16n8k16<T>(acc[i][2 * q], af[i], bf[0], bf[1]);
          ptx::mma_m16n8k16<T>(acc[i][2 * q + 1], af[i], bf[2], bf[3]);
        }
      }
    }

    // 2. A and B are free: the next tile's loads land during this tile's epilogue.
    __syncthreads();
    if (t + static_cast<int>(gridDim.x) < tiles)
      issue_tile_loads<T>(p, tile_coord(t + gridDim.x, tiles_m, tiles_n), kp, a_base, b_base,
                          ptx::smem_addr(s_c + (buf ^ 1) * kCElems + region_offset), tid, wm, wn);

    // 3. The epilogue. Fragment element e of tile (i, j): row 16 i + lane / 4 + 8 (e / 2),
    // column 8 j + 2 (lane % 4) + e % 2 of the warp's region; the region's 16x16 box
    // (i, q) holds tiles j = 2 q, 2 q + 1, ldmatrix / stmatrix registers (j 2q: rows 0-7,
    // 8-15; j 2q+1: rows 0-7, 8-15).
    T* s_region = s_c + buf * kCElems + region_offset;
    const uint32_t region = ptx::smem_addr(s_region);
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
          const float2 z = unpack2<T>(zf[r]);
          const float x0 = f[0] * activation_grad<A>(z.x);
          const float x1 = f[1] * activation_grad<A>(z.y);
          sums[2 * (r / 2)] += x0;
          sums[2 * (r / 2) + 1] += x1;
          out[r] = pack2<T>(x0, x1);
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
    T* d = static_cast<T*>(p.d) + static_cast<int64_t>(tc.bz) * p.m * p.n;
    store_region(s_region, d, p.m, p.n, tc.m0 + wm * 32, tc.n0 + wn * 64, lane);
    if (p.dbias != nullptr) {
      __syncthreads();
      const float sum = s_sums[tid] + s_sums[kShortKBlockN + tid];
      if (tc.n0 + tid < p.n) atomicAdd(p.dbias + tc.n0 + tid, sum);
    }
  }
}

}  // namespace jax_sm100::kernels::sm90
