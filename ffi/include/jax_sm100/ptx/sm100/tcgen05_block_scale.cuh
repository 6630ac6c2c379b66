// Block-scaled tcgen05 (Blackwell sm_100a): the MXFP8 UMMA
// (tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X), the shared -> tensor memory copy
// of its scale factors (tcgen05.cp.32x128b.warpx4), and the encoders of their descriptors.
//
// From the PTX ISA (tcgen05 "Block Scaling", "Instruction descriptor", tcgen05.cp):
//  * D += (A * scale_A) * (B * scale_B): with scale_vec::1X one UE8M0 scale per row of A
//    and per column of B (N) for each MMA of K = 32 (8-bit elements: 32 bytes of K).
//  * scale_A / scale_B live in tensor memory. A scale is one byte of a 32-bit TMEM cell:
//    row r of the 128-row scale matrix sits in column (col + r / 32) at lane r % 32, in
//    the byte the instruction descriptor's scale-factor ID (0..3) selects, and the data
//    must be duplicated into all four 32-lane partitions (a warp of the epilogue quarter
//    q reads lanes 32q..32q+31). Four scale IDs = four K blocks of 32 share one column.
//  * tcgen05.cp.32x128b.warpx4 copies a 32-row x 128-bit matrix from shared memory
//    (described by a matrix descriptor, here K-major without swizzle: row i at 16 * i,
//    8-row core matrices SBO = 128 bytes apart) to TMEM lanes 0..31, columns col..col+3,
//    and multicasts it to all four lane partitions: exactly the duplication the MMA
//    needs. Shared memory therefore holds, per 128 rows and 4 K blocks, 512 bytes with
//    the scale of (row r, K block j) at byte (r % 32) * 16 + (r / 32) * 4 + j.
//  * tcgen05.cp -> tcgen05.mma issued by one thread execute in order (a pipelined pair);
//    tcgen05.commit tracks both. An MMA followed by a cp that overwrites the scales it
//    reads is NOT such a pair: kernels keep the scales of each input stage in their own
//    TMEM columns, rewritten only after that stage's commit released it.
//
// The encoders are CUDA-free (the CPU emulator's tests print and decode them); the device
// wrappers go through CCCL's cuda::ptx and exist only for __CUDA_ARCH__ >= 1000 (trap
// elsewhere). Never run on hardware here: compiled, SASS-checked
// (tests/test_sm100_mxfp8_sass.py) and modelled by the emulator (tests/emu/emu_mx_ops.h).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/ptx/sm100/umma_desc.h"

namespace jax_sm100::ptx {

/// Element formats of kind::mxf8f6f4 (instruction descriptor atype / btype, 3 bits).
enum class MxFormat : uint32_t { kE4M3 = 0, kE5M2 = 1 };

/// Bytes of one 128-row x 4-K-block scale-factor chunk (a tcgen05.cp.32x128b source).
constexpr uint32_t kMxScaleChunkBytes = 512;
/// TMEM columns one chunk occupies (32 lanes x 128 bits).
constexpr uint32_t kMxScaleChunkCols = 4;

/// Byte offset of the scale of (row r, K block j), r < 128, j < 4, inside one chunk.
JAX_SM100_HD constexpr uint32_t mx_scale_chunk_offset(uint32_t r, uint32_t j) {
  return (r % 32u) * 16u + (r / 32u) * 4u + j;
}

/// kind::mxf8f6f4 instruction descriptor ("Instruction descriptor format for
/// .kind::mxf8f6f4"): B scale ID at [4,6), atype [7,10), btype [10,13), A / B transpose
/// [15] / [16] (0: K-major), N >> 3 at [17,23), scale type [23] = 1 (UE8M0), M >> 7 at
/// [27,29), A scale ID at [29,31); dense, no negation; D is F32.
JAX_SM100_HD constexpr uint32_t make_umma_idesc_mx(MxFormat a, MxFormat b, uint32_t m, uint32_t n,
                                                   uint32_t a_sf_id, uint32_t b_sf_id) {
  return ((b_sf_id & 3u) << 4) | (static_cast<uint32_t>(a) << 7) | (static_cast<uint32_t>(b) << 10) |
         ((n >> 3) << 17) | (1u << 23) | ((m >> 7) << 27) | ((a_sf_id & 3u) << 29);
}

/// Matrix descriptor of one scale-factor chunk in shared memory (tcgen05.cp source):
/// K-major, no swizzle, 16-byte rows, 8-row core matrices 128 bytes apart (SBO); the
/// 128-bit row is a single core-matrix column, so LBO is unused (0).
JAX_SM100_HD constexpr uint64_t make_mx_scale_desc(uint32_t smem_addr) {
  return make_umma_smem_desc(smem_addr, 0, 128, UmmaSwizzle::kNone);
}

}  // namespace jax_sm100::ptx

#ifdef __CUDACC__
#include <cuda/ptx>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define JAX_SM100_BLOCK_SCALE_BODY(...) __VA_ARGS__
#else
#define JAX_SM100_BLOCK_SCALE_BODY(...) __trap()
#endif

namespace jax_sm100::ptx {

/// tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s_desc: asynchronous copy of the
/// 32 x 128-bit matrix `s_desc` describes into TMEM lanes 0..31 (and, multicast, the
/// three other lane partitions), columns (taddr & 0xffff) .. +3. One thread issues it.
__device__ __forceinline__ void tmem_cp_32x128b_warpx4(uint32_t taddr, uint64_t s_desc) {
  JAX_SM100_BLOCK_SCALE_BODY(cuda::ptx::tcgen05_cp_32x128b_warpx4(cuda::ptx::cta_group_1, taddr, s_desc));
}

/// tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [d], a_desc, b_desc,
/// idesc, [scale_a], [scale_b], accumulate: one 128 x N x 32 MXFP8 UMMA from shared
/// memory into TMEM, scaled by the UE8M0 scales at TMEM addresses scale_a / scale_b
/// (bytes chosen by idesc's scale IDs). Asynchronous, like umma_f16.
__device__ __forceinline__ void umma_mxf8f6f4(uint32_t tmem_d, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                              uint32_t tmem_scale_a, uint32_t tmem_scale_b, bool accumulate) {
  JAX_SM100_BLOCK_SCALE_BODY(cuda::ptx::tcgen05_mma_block_scale_vec_1x(
      cuda::ptx::kind_mxf8f6f4, cuda::ptx::cta_group_1, tmem_d, a_desc, b_desc, idesc, tmem_scale_a,
      tmem_scale_b, accumulate));
}

}  // namespace jax_sm100::ptx

#undef JAX_SM100_BLOCK_SCALE_BODY
#endif  // __CUDACC__
