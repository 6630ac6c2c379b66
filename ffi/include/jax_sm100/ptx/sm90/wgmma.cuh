// Thin wrappers for Hopper (sm_90a) warpgroup MMA: wgmma.mma_async with both
// operands in shared memory (described by 64-bit matrix descriptors), plus the
// fence / commit / wait instructions that order it.
//
// The Wgmma specialisations (N in {32, 64, 128, 256}, bf16 and fp16 inputs, fp32
// accumulators) live in wgmma_generated.inc, written by tools/gen_wgmma.py: the asm
// operand list has one entry per accumulator register, which C++ cannot spell
// generically. Change the script and rerun it; do not edit the .inc by hand.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// True only while compiling device code for sm_90a (wgmma / setmaxnreg exist
// there and nowhere else: sm_100a has tcgen05 instead).
#ifndef JAX_SM100_SM90A_DEVICE
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define JAX_SM100_SM90A_DEVICE 1
#else
#define JAX_SM100_SM90A_DEVICE 0
#endif
#endif

namespace jax_sm100::ptx {

/// Shared-memory swizzle modes of a wgmma matrix descriptor (bits 62-63).
enum class WgmmaSwizzle : uint64_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

/// Builds a wgmma shared-memory matrix descriptor.
/// smem_addr: 16-byte-aligned shared address (cvta'd, 32-bit) of the operand's first element
/// (for a k-slice inside a swizzle atom, the atom base plus the slice's byte offset);
/// lbo_bytes / sbo_bytes: leading / stride byte offsets as the PTX ISA defines them for the
/// operand's major-ness (K-major 128B swizzle: LBO unused, SBO = 1024 = 8 rows of 128 B;
/// MN-major 128B swizzle: LBO = stride between 64-element MN blocks, SBO = stride between
/// groups of 8 K rows).
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes,
                                                   uint32_t sbo_bytes, WgmmaSwizzle swizzle) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  // base_offset (bits 49-51) stays 0: every swizzle atom we point at is 1024-byte aligned,
  // k-slice offsets inside an atom are handled by the hardware's address swizzle.
  desc |= static_cast<uint64_t>(swizzle) << 62;
  return desc;
}

/// wgmma.fence: orders prior register / shared-memory accesses before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#if JAX_SM100_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// wgmma.commit_group: closes the batch of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
#if JAX_SM100_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// wgmma.wait_group N: waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if JAX_SM100_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/// Keeps the compiler from moving accesses to an accumulator register across a wgmma
/// boundary (the hardware writes it asynchronously).
__device__ __forceinline__ void fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

/// setmaxnreg.inc / .dec: re-balance the register file between warp roles.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if JAX_SM100_SM90A_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if JAX_SM100_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

/// One warpgroup MMA m64 x N x k16 with fp32 accumulators, A and B from shared memory.
/// kTransA / kTransB: 0 = K-major operand, 1 = M- (resp. N-) major ("transposed").
/// Specialised (in wgmma_generated.inc) for the (N, T) pairs tools/gen_wgmma.py lists; any
/// other pair is an incomplete type. Members: kAccRegs = N / 2 (fp32 accumulators per
/// thread) and mma(float (&d)[kAccRegs], desc_a, desc_b, scale_d).
template <int N, typename T, int kTransA, int kTransB>
struct Wgmma;

}  // namespace jax_sm100::ptx

#include "jax_sm100/ptx/sm90/wgmma_generated.inc"
