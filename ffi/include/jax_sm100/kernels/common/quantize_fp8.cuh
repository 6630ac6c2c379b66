// Blockwise FP8 (e4m3) quantization kernels, DeepSeek style: one fp32 scale per block.
//
//   scale[b] = amax(|x| over block b) * f32(1/448)  (448 = largest finite e4m3)
//   scale[b] = 1 where that is 0                    (all-zero block, or underflow)
//   q[i]     = e4m3_rn_satfinite(x[i] * f32(1 / scale[b]))
//
// Semantics (must match jax_sm100._fp8._quantize bit for bit, which spells out the
// multiplications XLA would rewrite its divisions into):
//   * everything in fp32 on the input converted to fp32, each operation rounded once
//     (__fmul_rn / __fdiv_rn: no contraction, no approximate reciprocal);
//   * an all-zero block gets scale 1 and q = 0 (never 0/0);
//   * a NaN anywhere in a block gives that block a NaN scale (NaN q), as jnp.max does;
//   * |x / s| > 448 (only from fp32 rounding of amax/448) saturates to +-448 and NaN
//     stays NaN (cvt ... .satfinite == clip-then-cast);
//   * partial blocks (R or C not multiples of 128) take the amax over the elements
//     that exist.
//
// Two block shapes:
//   quantize_1x128_kernel:   scale (R, ceil(C/128)), or transposed (ceil(C/128), Rp) with
//                            Rp = round_up(R, 4): the layout the sm90 FP8 GEMM TMA-loads
//                            A's scales from (pad entries [R, Rp) are written as 1).
//   quantize_128x128_kernel: scale (ceil(R/128), ceil(C/128)).
// And one kernel that quantizes x and its transpose in a single read of x (what a
// training step needs: Q(x) for the forward product, Q(x^T) for the weight gradient):
//   quantize_dual_kernel:    (q, scale)   = kQRows x 128 of x: 1x128 as quantize_1x128_kernel,
//                            or 128x128 (then kTRows is 128 too: x's tiles and x^T's are the
//                            same tiles, so qt = q^T and scale_t = scale^T; what a weight
//                            needs, w^T for the forward product and w for the backward);
//                            (qt, scale_t) = kTRows x 128 of x^T: qt (C, R), scale_t
//                            (C, ceil(R/128)) for kTRows == 1 (128x1 blocks of x), or
//                            (ceil(C/128), ceil(R/128)) for kTRows == 128.
//                            Either 1x128 scale may be written transposed for the GEMM,
//                            as quantize_1x128_kernel's: scale (ceil(C/128), round_up(R, 4)),
//                            scale_t (kTRows == 1) (ceil(R/128), round_up(C, 4)).
//                            A prologue may replace each element read before it is
//                            quantized (Prologue below): the activation of a layer's
//                            pre-activation, or the activation's backward g * act'(z) with
//                            the column sums of that product (a bias gradient) written too.
//
// Memory-bound: every thread moves 16 elements with 16-byte vector loads and one
// 16-byte store of e4m3 when the row is 16-element aligned (C % 16 == 0); otherwise
// (or at a ragged row end) it falls back to per-element accesses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "jax_sm100/kernels/common/activation.h"

namespace jax_sm100::kernels::quant {

constexpr float kE4M3Max = 448.0f;
constexpr float kInvE4M3Max = 1.0f / 448.0f;  // == np.float32(1.0 / 448.0) (checked: 0x3b124925)
constexpr int kBlock = 128;       // block edge (elements)
constexpr int kChunk = 16;        // elements per thread per access
constexpr int kThreadsPerRowBlock = kBlock / kChunk;  // 8 threads cover one 1x128 block

/// What quantize_dual_kernel quantizes, element by element, as it reads x:
///   kInput: x itself;
///   kAct:   act(x) rounded to T (x a layer's pre-activation z; its output never stored);
///   kDact:  g * act'(z) rounded to T (x = g, z a second input of x's shape: the
///           activation's backward), plus that product's column sums per 128-row block
///           (a bias gradient's partial sums, fp32, over the rounded values).
/// Rounding to T first keeps the numbers of the unfused sequence (the activation, or its
/// backward, as an elementwise pass writing T, then the quantizer).
enum class Prologue { kInput, kAct, kDact };

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

/// 16 consecutive elements of one row in their input format (16 x sizeof(T) bytes):
/// kept raw in registers so a thread can hold several chunks cheaply.
template <typename T>
struct RawChunk {
  static constexpr int kVecs = kChunk * sizeof(T) / 16;
  uint4 v[kVecs];
};

/// Loads x[c0 .. c0+16) of one row; elements at or past `cols` read as 0.
/// `vec`: the 16 elements exist and are 16-byte aligned (then 16-byte loads).
template <typename T>
__device__ __forceinline__ void load_raw(const T* row, int64_t c0, int64_t cols, bool vec,
                                         RawChunk<T>& r) {
  if (vec) {
    const uint4* p = reinterpret_cast<const uint4*>(row + c0);
#pragma unroll
    for (int i = 0; i < RawChunk<T>::kVecs; ++i) r.v[i] = __ldg(p + i);
  } else {
    T* e = reinterpret_cast<T*>(r.v);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) e[i] = (c0 + i < cols) ? row[c0 + i] : T(0.0f);
  }
}

/// load_raw for a second read of the same data: an opaque (asm volatile) L2-cached load,
/// so the compiler cannot keep the first read's registers alive instead.
template <typename T>
__device__ __forceinline__ void reload_raw(const T* row, int64_t c0, int64_t cols, bool vec,
                                           RawChunk<T>& r) {
  if (vec) {
    const uint4* p = reinterpret_cast<const uint4*>(row + c0);
#pragma unroll
    for (int i = 0; i < RawChunk<T>::kVecs; ++i)
      asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r.v[i].x), "=r"(r.v[i].y), "=r"(r.v[i].z), "=r"(r.v[i].w)
                   : "l"(p + i));
  } else {
    load_raw<T>(row, c0, cols, false, r);
  }
}

template <typename T>
__device__ __forceinline__ void zero_raw(RawChunk<T>& r) {
#pragma unroll
  for (int i = 0; i < RawChunk<T>::kVecs; ++i) r.v[i] = make_uint4(0, 0, 0, 0);
}

template <typename T>
__device__ __forceinline__ void to_floats(const RawChunk<T>& r, float (&v)[kChunk]) {
  const T* e = reinterpret_cast<const T*>(r.v);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) v[i] = to_f32<T>(e[i]);
}

/// The prologue (see Prologue) on one chunk, in place: r holds x's elements (g for
/// kDact), z the pre-activation's for kDact. Zero chunks (past R or C) stay zero: every
/// activation maps 0 to 0.
template <typename T, Prologue P, Activation A>
__device__ __forceinline__ void apply_prologue(RawChunk<T>& r, const RawChunk<T>& z) {
  if constexpr (P != Prologue::kInput) {
    T* e = reinterpret_cast<T*>(r.v);
    const T* ze = reinterpret_cast<const T*>(z.v);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float v = to_f32<T>(e[i]);
      if constexpr (P == Prologue::kAct) e[i] = from_f32<T>(apply_activation<A>(v));
      else e[i] = from_f32<T>(v * activation_grad<A>(to_f32<T>(ze[i])));
    }
  }
}

/// NaN propagates through amax like the reference's jnp.max (fmaxf would drop it):
/// max.NaN is one instruction (FMNMX.NAN), where a compare-and-select took four.
__device__ __forceinline__ float nan_max(float a, float b) {
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
}

/// max |v| over a chunk (NaN-propagating).
__device__ __forceinline__ float chunk_absmax(const float (&v)[kChunk]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) m = nan_max(m, fabsf(v[i]));
  return m;
}

/// Converts a thread's chunk to floats (`v`) and returns the amax of its 1x128 block: the
/// 8 consecutive lanes that hold the block's 8 chunks combine theirs, so all 32 lanes of
/// the warp must call this together.
template <typename T>
__device__ __forceinline__ float row_block_amax(const RawChunk<T>& r, float (&v)[kChunk]) {
  to_floats<T>(r, v);
  float amax = chunk_absmax(v);
#pragma unroll
  for (int off = 1; off < kThreadsPerRowBlock; off <<= 1)
    amax = nan_max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  return amax;
}

/// Quantizes 16 values by the block's scale `s` (times its once-rounded reciprocal, as
/// the reference does) and stores them.
__device__ __forceinline__ void store_chunk(uint8_t* row, int64_t c0, int64_t cols, bool vec,
                                            const float (&v)[kChunk], float s) {
  const float inv = __fdiv_rn(1.0f, s);
  uint16_t pairs[kChunk / 2];
#pragma unroll
  for (int i = 0; i < kChunk / 2; ++i) {
    float2 f = make_float2(__fmul_rn(v[2 * i], inv), __fmul_rn(v[2 * i + 1], inv));
    pairs[i] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
  }
  if (vec) {
    uint4 out;
    out.x = pairs[0] | (uint32_t(pairs[1]) << 16);
    out.y = pairs[2] | (uint32_t(pairs[3]) << 16);
    out.z = pairs[4] | (uint32_t(pairs[5]) << 16);
    out.w = pairs[6] | (uint32_t(pairs[7]) << 16);
    *reinterpret_cast<uint4*>(row + c0) = out;
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      if (c0 + i < cols) row[c0 + i] = static_cast<uint8_t>(pairs[i / 2] >> (8 * (i % 2)));
    }
  }
}

/// The stored scale of a block: amax * f32(1/448), or 1 where that is 0 (an all-zero
/// block, or underflow). NaN stays NaN, as in the reference.
__device__ __forceinline__ float block_scale(float amax) {
  const float sc = __fmul_rn(amax, kInvE4M3Max);
  return sc == 0.0f ? 1.0f : sc;
}

/// 1x128 blocks. Groups of 8 consecutive threads own one (row, column-block); a warp
/// owns 8 groups per step, and loops stay warp-uniform so the shuffles see all lanes.
/// scale_transposed: write scale[cb * scale_ld + row] (scale_ld = Rp) instead of
/// scale[row * Cb + cb]; the pad rows [R, Rp) get 1.
template <typename T, bool kScaleTransposed>
__global__ void __launch_bounds__(256) quantize_1x128_kernel(const T* __restrict__ x,
                                                             uint8_t* __restrict__ q,
                                                             float* __restrict__ scale, int64_t rows,
                                                             int64_t cols, int64_t scale_ld,
                                                             bool aligned) {
  const int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  const int64_t groups = rows * col_blocks;
  const int lane = threadIdx.x % 32;
  const int sub = lane % kThreadsPerRowBlock;
  const int64_t warps_total = int64_t(gridDim.x) * (blockDim.x / 32);
  const int64_t warp_global = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;

  if (kScaleTransposed && blockIdx.x == 0) {
    const int64_t pad = (scale_ld - rows) * col_blocks;
    for (int64_t i = threadIdx.x; i < pad; i += blockDim.x) {
      const int64_t cb = i / (scale_ld - rows), r = rows + i % (scale_ld - rows);
      scale[cb * scale_ld + r] = 1.0f;
    }
  }

  // Each step a warp owns 8 groups (2 per thread): both chunks' loads are issued before
  // either is used, so 64 bytes per thread are in flight.
  constexpr int kU = 2;
  for (int64_t base = warp_global * 4 * kU; base < groups; base += warps_total * 4 * kU) {
    RawChunk<T> raw[kU];
    int64_t row[kU], cb[kU], c0[kU];
    bool live[kU], vec[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t g = base + u * 4 + lane / kThreadsPerRowBlock;
      live[u] = g < groups;
      row[u] = live[u] ? g / col_blocks : 0;
      cb[u] = live[u] ? g - row[u] * col_blocks : 0;
      c0[u] = cb[u] * kBlock + sub * kChunk;
      vec[u] = aligned && (c0[u] + kChunk <= cols);
      if (live[u]) load_raw<T>(x + row[u] * cols, c0[u], cols, vec[u], raw[u]);
      else zero_raw<T>(raw[u]);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float v[kChunk];
      const float amax = row_block_amax<T>(raw[u], v);
      const float sc = block_scale(amax);
      if (live[u]) {
        if (sub == 0) {
          if (kScaleTransposed) scale[cb[u] * scale_ld + row[u]] = sc;
          else scale[row[u] * col_blocks + cb[u]] = sc;
        }
        store_chunk(q + row[u] * cols, c0[u], cols, vec[u], v, sc);
      }
    }
  }
}

/// 128x128 blocks: one CTA of 256 threads per block. Thread t covers 16 columns
/// (t % 8) of rows t/8 + 32*i, i < 4; the block amax goes through shared memory; the
/// quantization pass re-reads the block (L2) rather than holding it in registers.
template <typename T>
__global__ void __launch_bounds__(256, sizeof(T) == 4 ? 3 : 4) quantize_128x128_kernel(const T* __restrict__ x,
                                                               uint8_t* __restrict__ q,
                                                               float* __restrict__ scale,
                                                               int64_t rows, int64_t cols,
                                                               bool aligned) {
  constexpr int kRowsPerPass = 256 / kThreadsPerRowBlock;  // 32
  constexpr int kPasses = kBlock / kRowsPerPass;           // 4
  __shared__ float warp_amax[8];
  const int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  const int64_t rb = blockIdx.x / col_blocks, cb = blockIdx.x % col_blocks;
  const int sub = threadIdx.x % kThreadsPerRowBlock;
  const int r_in = threadIdx.x / kThreadsPerRowBlock;
  const int64_t c0 = cb * kBlock + sub * kChunk;
  const bool vec = aligned && (c0 + kChunk <= cols);

  // Pass 1: amax. The chunks are NOT kept for pass 2 (that took ~90 registers and
  // capped the SM at 2 CTAs); pass 2 re-reads them, mostly from L2.
  float amax = 0.0f;
  {
    RawChunk<T> raw[kPasses];
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int64_t row = rb * kBlock + r_in + p * kRowsPerPass;
      if (row < rows) load_raw<T>(x + row * cols, c0, cols, vec, raw[p]);
      else zero_raw<T>(raw[p]);
    }
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      float v[kChunk];
      to_floats<T>(raw[p], v);
      amax = nan_max(amax, chunk_absmax(v));
    }
  }
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) amax = nan_max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  if (threadIdx.x % 32 == 0) warp_amax[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_amax[0];
#pragma unroll
  for (int w = 1; w < 8; ++w) amax = nan_max(amax, warp_amax[w]);

  const float s = block_scale(amax);
  if (threadIdx.x == 0) scale[rb * col_blocks + cb] = s;
#pragma unroll 1
  for (int p = 0; p < kPasses; ++p) {  // one chunk at a time: few live registers
    const int64_t row = rb * kBlock + r_in + p * kRowsPerPass;
    if (row < rows) {
      RawChunk<T> raw;
      reload_raw<T>(x + row * cols, c0, cols, vec, raw);
      float v[kChunk];
      to_floats<T>(raw, v);
      store_chunk(q + row * cols, c0, cols, vec, v, s);
    }
  }
}

/// Shared memory of quantize_dual_kernel: the raw 128x128 tile (rows padded by 16 bytes
/// so the row-phase 16-byte stores of four rows spread over all banks), qt's 128 rows
/// staged for coalesced stores (padded likewise), and cross-warp amax partials.
template <typename T>
struct DualSmem {
  static constexpr int kTileRowBytes = kBlock * sizeof(T) + 16;
  static constexpr int kStageRowBytes = kBlock + 16;
  static constexpr int kTileBytes = kBlock * kTileRowBytes;
  static constexpr int kStageBytes = kBlock * kStageRowBytes;
  // + column amax halves (2, 128), warp maxima (8), column-sum halves (2, 128)
  static constexpr int kBytes = kTileBytes + kStageBytes + 2 * kBlock * 4 + 8 * 4 + 2 * kBlock * 4;
};

/// quantize(x, kQRows x 128) and quantize(x^T, kTRows x 128) from one read of x; see the
/// file comment. One CTA of 256 threads per 128x128 tile (blockIdx.x = rb * col_blocks + cb):
///   row phase:    thread t owns 16 columns (t % 8) of rows t/8 + 32i: 1x128 row amax by
///                 8-lane shuffles, q and scale stored as in quantize_1x128_kernel (kQRows
///                 == 128: after the tile amax is known, from the parked chunks), the raw
///                 chunk parked in shared memory (zeros past R / C);
///   column phase: warp w, lane l owns tile column 32 (w % 4) + l over rows
///                 [64 (w / 4), +64): column amax (kTRows == 1: two halves combined through
///                 shared memory; kTRows == 128: the tile amax from the row phase), then
///                 16 e4m3 per 16 rows into qt's staged row, which leaves as 16-byte stores.
/// `aligned_x`: x and q 16-byte aligned and C % 16 == 0; `aligned_t`: qt 16-byte aligned
/// and R % 16 == 0. `scale_ld` > 0: scale is written transposed, scale[cb * scale_ld + row]
/// (scale_ld = round_up(R, 4), pad entries 1); likewise `scale_t_ld` > 0 (kTRows == 1):
/// scale_t[rb * scale_t_ld + col] (scale_t_ld = round_up(C, 4)). The GEMM TMA-loads A's
/// scales in that layout. P, A: the prologue (kDact: `z` is read beside x, aligned as x,
/// and col_sums (ceil(R/128), C) gets each 128-row block's column sums: rows 0-63 and
/// 64-127 each summed in order, then added). Dynamic shared memory: DualSmem<T>::kBytes.
template <typename T, int kQRows, int kTRows, Prologue P = Prologue::kInput,
          Activation A = Activation::kNone>
__global__ void __launch_bounds__(256) quantize_dual_kernel(const T* __restrict__ x,
                                                            uint8_t* __restrict__ q,
                                                            float* __restrict__ scale,
                                                            uint8_t* __restrict__ qt,
                                                            float* __restrict__ scale_t,
                                                            int64_t rows, int64_t cols,
                                                            bool aligned_x, bool aligned_t,
                                                            int64_t scale_ld, int64_t scale_t_ld,
                                                            const T* __restrict__ z,
                                                            float* __restrict__ col_sums) {
  static_assert(kTRows == 1 || kTRows == kBlock, "x^T in 1x128 or 128x128 blocks");
  static_assert(kQRows == 1 || (kQRows == kBlock && kTRows == kBlock),
                "x in 1x128 blocks, or x and x^T both in 128x128 blocks");
  using Smem = DualSmem<T>;
  constexpr int kRowsPerPass = 256 / kThreadsPerRowBlock;  // 32
  constexpr int kPasses = kBlock / kRowsPerPass;           // 4
  extern __shared__ __align__(16) uint8_t dual_smem[];
  uint8_t* tile = dual_smem;                               // (128, kTileRowBytes) raw T
  uint8_t* stage = dual_smem + Smem::kTileBytes;           // (128, kStageRowBytes) e4m3
  float* col_part = reinterpret_cast<float*>(stage + Smem::kStageBytes);  // (2, 128)
  float* warp_amax = col_part + 2 * kBlock;                                // (8)
  float* sum_part = warp_amax + 8;                                         // (2, 128)

  const int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  const int64_t row_blocks = (rows + kBlock - 1) / kBlock;
  const int64_t rb = blockIdx.x / col_blocks, cb = blockIdx.x % col_blocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // ---- row phase: 1x128 blocks of x (two chunks in flight per thread) ----
  const int sub = threadIdx.x % kThreadsPerRowBlock;
  const int r_in = threadIdx.x / kThreadsPerRowBlock;
  const int64_t c0 = cb * kBlock + sub * kChunk;
  const bool vec = aligned_x && (c0 + kChunk <= cols);
  float tile_amax = 0.0f;
#pragma unroll
  for (int pp = 0; pp < kPasses; pp += 2) {
    RawChunk<T> raw[2], zraw[2];  // zraw: kDact's pre-activation
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t row = rb * kBlock + r_in + (pp + u) * kRowsPerPass;
      if (row < rows) {
        load_raw<T>(x + row * cols, c0, cols, vec, raw[u]);
        if constexpr (P == Prologue::kDact) load_raw<T>(z + row * cols, c0, cols, vec, zraw[u]);
      } else {
        zero_raw<T>(raw[u]);
        if constexpr (P == Prologue::kDact) zero_raw<T>(zraw[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) apply_prologue<T, P, A>(raw[u], zraw[u]);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int tr = r_in + (pp + u) * kRowsPerPass;
      const int64_t row = rb * kBlock + tr;
      uint4* dst = reinterpret_cast<uint4*>(tile + tr * Smem::kTileRowBytes + sub * kChunk * sizeof(T));
#pragma unroll
      for (int i = 0; i < RawChunk<T>::kVecs; ++i) dst[i] = raw[u].v[i];
      float v[kChunk];
      const float amax = row_block_amax<T>(raw[u], v);
      tile_amax = nan_max(tile_amax, amax);
      if (kQRows != 1) continue;  // 128x128: q waits for the tile amax
      if (row < rows) {
        const float sc = block_scale(amax);
        if (sub == 0) {
          if (scale_ld > 0) scale[cb * scale_ld + row] = sc;
          else scale[row * col_blocks + cb] = sc;
        }
        store_chunk(q + row * cols, c0, cols, vec, v, sc);
      } else if (scale_ld > 0 && row < scale_ld && sub == 0) {
        scale[cb * scale_ld + row] = 1.0f;  // pad entry of the transposed layout
      }
    }
  }
  if constexpr (kTRows == kBlock) {
#pragma unroll
    for (int off = kThreadsPerRowBlock; off < 32; off <<= 1)
      tile_amax = nan_max(tile_amax, __shfl_xor_sync(0xffffffffu, tile_amax, off));
    if (lane == 0) warp_amax[warp] = tile_amax;
  }
  __syncthreads();  // the tile (and the warp maxima) are complete
  float tile_s = 0.0f;  // the 128x128 tile's scale (kTRows == 128)
  if constexpr (kTRows == kBlock) {
    float amax = warp_amax[0];
#pragma unroll
    for (int w = 1; w < 8; ++w) amax = nan_max(amax, warp_amax[w]);
    tile_s = block_scale(amax);
  }
  if constexpr (kQRows == kBlock) {  // x's 128x128 block: its rows again, from the parked chunks
    if (threadIdx.x == 0) scale[rb * col_blocks + cb] = tile_s;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int tr = r_in + p * kRowsPerPass;
      const int64_t row = rb * kBlock + tr;
      if (row >= rows) continue;
      RawChunk<T> raw;
      const uint4* src = reinterpret_cast<const uint4*>(tile + tr * Smem::kTileRowBytes + sub * kChunk * sizeof(T));
#pragma unroll
      for (int i = 0; i < RawChunk<T>::kVecs; ++i) raw.v[i] = src[i];
      float v[kChunk];
      to_floats<T>(raw, v);
      store_chunk(q + row * cols, c0, cols, vec, v, tile_s);
    }
  }

  // ---- column phase: blocks of x^T ----
  const int tc = 32 * (warp % 4) + lane;        // tile column = row of qt
  const int half = warp / 4;                    // tile rows [64 half, 64 half + 64)
  const int64_t col = cb * kBlock + tc;
  auto load_col = [&](int tr) {
    return to_f32<T>(*reinterpret_cast<const T*>(tile + tr * Smem::kTileRowBytes + tc * sizeof(T)));
  };
  float s;
  if constexpr (kTRows == 1) {
    float amax = 0.0f;
#pragma unroll 16
    for (int i = 0; i < kBlock / 2; ++i) amax = nan_max(amax, fabsf(load_col(64 * half + i)));
    col_part[half * kBlock + tc] = amax;
    __syncthreads();
    s = block_scale(nan_max(col_part[tc], col_part[kBlock + tc]));
    if (half == 0) {
      if (scale_t_ld > 0) {
        if (col < scale_t_ld) scale_t[rb * scale_t_ld + col] = col < cols ? s : 1.0f;  // pad: 1
      } else if (col < cols) {
        scale_t[col * row_blocks + rb] = s;
      }
    }
  } else {
    s = tile_s;
    if (threadIdx.x == 0) scale_t[cb * row_blocks + rb] = s;
  }
  const float inv = __fdiv_rn(1.0f, s);
  float col_sum = 0.0f;  // kDact: this half-column's sum, rows in order
#pragma unroll 1
  for (int j = 0; j < kBlock / 2 / kChunk; ++j) {  // 16 rows -> 16 bytes of qt's row
    const int tr0 = 64 * half + kChunk * j;
    uint32_t words[kChunk / 4];
#pragma unroll
    for (int i = 0; i < kChunk / 2; ++i) {
      const float e0 = load_col(tr0 + 2 * i), e1 = load_col(tr0 + 2 * i + 1);
      if constexpr (P == Prologue::kDact) {
        col_sum = __fadd_rn(col_sum, e0);
        col_sum = __fadd_rn(col_sum, e1);
      }
      const float2 f = make_float2(__fmul_rn(e0, inv), __fmul_rn(e1, inv));
      const uint32_t pair = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
      if (i % 2 == 0) words[i / 2] = pair;
      else words[i / 2] |= pair << 16;
    }
    *reinterpret_cast<uint4*>(stage + tc * Smem::kStageRowBytes + tr0) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
  if constexpr (P == Prologue::kDact) sum_part[half * kBlock + tc] = col_sum;
  __syncthreads();  // qt's rows are staged (and kDact's half-column sums)
  if constexpr (P == Prologue::kDact) {
    if (half == 0 && col < cols) col_sums[rb * cols + col] = __fadd_rn(sum_part[tc], sum_part[kBlock + tc]);
  }

  // ---- qt stores: 8 threads per staged row, 16 bytes each ----
  const int64_t r0 = rb * kBlock + sub * kChunk;  // first x row (= qt column) of this thread
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    const int sr = r_in + p * kRowsPerPass;
    const int64_t qrow = cb * kBlock + sr;
    if (qrow >= cols) continue;
    const uint8_t* src = stage + sr * Smem::kStageRowBytes + sub * kChunk;
    uint8_t* dst = qt + qrow * rows + r0;
    if (aligned_t && r0 + kChunk <= rows) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        if (r0 + i < rows) dst[i] = src[i];
    }
  }
}

}  // namespace jax_sm100::kernels::quant
