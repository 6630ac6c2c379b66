// Thin device wrappers for tcgen05 (Blackwell sm_100a): tensor memory allocation and
// loads, the UMMA (tcgen05.mma kind::f16) and its commit, and the 2-SM TMA load.
//
// Never run on hardware here (no sm_100 machine is lent): compiled and SASS-checked
// (tests/test_sm100_sass.py); the PTX semantics they stand for are modelled by the CPU
// emulator (tests/emu/emu_ops.h). Bodies exist only when compiling for
// __CUDA_ARCH__ >= 1000; on other architectures they trap, so a misuse fails loudly.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda/ptx>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define JAX_SM100_TCGEN05_BODY(...) __VA_ARGS__
#else
#define JAX_SM100_TCGEN05_BODY(...) __trap()
#endif

namespace jax_sm100::ptx {

/// tcgen05.alloc.cta_group::1: the whole warp allocates `ncols` TMEM columns (power of
/// two, 32..512); the TMEM address is written to `*dst_smem` (shared memory).
__device__ __forceinline__ void tmem_alloc(uint32_t* dst_smem, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_alloc(cuda::ptx::cta_group_1, dst_smem, ncols));
}

/// tcgen05.alloc.cta_group::2 (pair of CTAs allocates together).
__device__ __forceinline__ void tmem_alloc_2sm(uint32_t* dst_smem, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_alloc(cuda::ptx::cta_group_2, dst_smem, ncols));
}

/// tcgen05.dealloc.cta_group::1: the warp that allocated frees `ncols` columns at `taddr`.
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_dealloc(cuda::ptx::cta_group_1, taddr, ncols));
}

/// tcgen05.relinquish_alloc_permit.cta_group::1: this CTA will allocate no more TMEM.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_relinquish_alloc_permit(cuda::ptx::cta_group_1));
}

/// tcgen05.commit.cta_group::1 ... mbarrier::arrive::one: arrive once on `bar` when all
/// previously issued UMMA of this thread have completed.
__device__ __forceinline__ void umma_commit(uint64_t* bar) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit(cuda::ptx::cta_group_1, bar));
}

/// tcgen05.commit ... multicast::cluster: arrive on `bar` in every CTA of `cta_mask`.
__device__ __forceinline__ void umma_commit_multicast(uint64_t* bar, uint16_t cta_mask) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit_multicast(cuda::ptx::cta_group_1, bar, cta_mask));
}

/// tcgen05.commit.cta_group::2 multicast (2-SM UMMA: arrive in the CTAs of `cta_mask`).
__device__ __forceinline__ void umma_commit_2sm_multicast(uint64_t* bar, uint16_t cta_mask) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_commit_multicast(cuda::ptx::cta_group_2, bar, cta_mask));
}

/// tcgen05.fence::before_thread_sync: order prior tcgen05 ops before a thread sync.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_fence_before_thread_sync());
}

/// tcgen05.fence::after_thread_sync: order later tcgen05 ops after a thread sync.
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_fence_after_thread_sync());
}

/// tcgen05.wait::ld: wait for this thread's outstanding tcgen05.ld.
__device__ __forceinline__ void tcgen05_wait_ld() { JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_wait_ld()); }

/// tcgen05.mma.cta_group::1.kind::f16 [d], a_desc, b_desc, idesc, accumulate: one
/// M x N x 16 UMMA from shared memory into TMEM (M = 128 here); accumulate = false
/// overwrites D. Asynchronous: completion is observed through umma_commit.
__device__ __forceinline__ void umma_f16(uint32_t tmem_d, uint64_t a_desc, uint64_t b_desc,
                                         uint32_t idesc, bool accumulate) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_mma(cuda::ptx::kind_f16, cuda::ptx::cta_group_1, tmem_d,
                                                a_desc, b_desc, idesc, accumulate));
}

/// tcgen05.mma.cta_group::2.kind::f16: the 2-SM UMMA (M = 256) issued by the even CTA of
/// a pair; each CTA holds 128 rows of A and half of B's N rows at the same shared-memory
/// offsets, and its own 128 rows of D in its TMEM.
__device__ __forceinline__ void umma_f16_pair(uint32_t tmem_d, uint64_t a_desc, uint64_t b_desc,
                                              uint32_t idesc, bool accumulate) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_mma(cuda::ptx::kind_f16, cuda::ptx::cta_group_2, tmem_d,
                                                a_desc, b_desc, idesc, accumulate));
}

// ---- kind::f8f6f4 (the blockwise FP8 GEMM, kernels/sm100/fp8_*) ----------------------
/// tcgen05.mma.cta_group::1.kind::f8f6f4 [d], a_desc, b_desc, idesc, accumulate: one
/// M x N x 32 UMMA of 8-bit floating-point operands (the formats are in the instruction
/// descriptor, make_umma_idesc_f8f6f4) from shared memory into fp32 TMEM; M = 128 here.
/// accumulate = false overwrites D. Asynchronous: completion is observed through
/// umma_commit. SASS: UTCQMMA (tests/test_sm100_fp8_sass.py).
__device__ __forceinline__ void umma_f8f6f4(uint32_t tmem_d, uint64_t a_desc, uint64_t b_desc,
                                            uint32_t idesc, bool accumulate) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_mma(cuda::ptx::kind_f8f6f4, cuda::ptx::cta_group_1, tmem_d,
                                                a_desc, b_desc, idesc, accumulate));
}
// ---- end kind::f8f6f4 ----------------------------------------------------------------

/// tcgen05.ld.sync.aligned.32x32b.x16.b32: warp-wide; lane i reads 16 consecutive
/// 32-bit columns of TMEM lane (taddr >> 16) + i starting at column taddr & 0xffff.
__device__ __forceinline__ void tmem_load_32x32b_x16(uint32_t taddr, uint32_t (&v)[16]) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_ld_32x32b(v, taddr));
}

/// tcgen05.alloc/dealloc/relinquish for a CTA pair (cta_group::2): one warp of each CTA.
__device__ __forceinline__ void tmem_dealloc_2sm(uint32_t taddr, uint32_t ncols) {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_dealloc(cuda::ptx::cta_group_2, taddr, ncols));
}
__device__ __forceinline__ void tmem_relinquish_alloc_permit_2sm() {
  JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_relinquish_alloc_permit(cuda::ptx::cta_group_2));
}

/// 3D TMA tile load of the 2-SM form (.cta_group::2): the box lands in this CTA's shared
/// memory and its bytes complete on the barrier at `bar`'s offset in the pair's even
/// CTA (addressed through mapa), which arms one transaction count for both CTAs.
__device__ __forceinline__ void tma_load_3d_pair(void* smem_dst, const void* map, uint64_t* bar,
                                                 int32_t c0, int32_t c1, int32_t c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  uint32_t leader_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, 0;"
               : "=r"(leader_bar)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2"
      " [%0], [%1, {%3, %4, %5}], [%2];"
      :
      : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst))), "l"(map), "r"(leader_bar),
        "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#else
  (void)smem_dst, (void)map, (void)bar, (void)c0, (void)c1, (void)c2;
  __trap();
#endif
}

/// tcgen05.wait::st: wait for this thread's outstanding tcgen05.st.
__device__ __forceinline__ void tcgen05_wait_st() { JAX_SM100_TCGEN05_BODY(cuda::ptx::tcgen05_wait_st()); }

}  // namespace jax_sm100::ptx

#undef JAX_SM100_TCGEN05_BODY
#endif  // __CUDACC__
