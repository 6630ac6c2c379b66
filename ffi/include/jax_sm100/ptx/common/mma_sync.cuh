// The warp-level tensor-core path (sm_80+; sm_90a too): cp.async copies into shared
// memory, ldmatrix fragment loads and mma.sync m16n8k16 with fp32 accumulation. Used by
// the short-K GEMM (kernels/sm90/gemm_short_k.cuh), whose single K stage needs no TMA
// pipeline and whose occupancy wants small register budgets. CCCL's cuda::ptx does not
// wrap these.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

namespace jax_sm100::ptx {

/// cp.async.cg.shared.global, 16 bytes: copies when `valid`, else writes 16 zero bytes
/// (src-size 0; `src` is then not read but must be a valid address expression).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  (void)dst; (void)src; (void)valid;
#endif
}

/// Ends the thread's current group of cp.async copies.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// Waits until at most `kPending` of the thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8j .. 8j + 7 give the row
/// addresses of 8x8 tile j (16 bytes each, 16-byte aligned); register j of lane l gets
/// tile j's row l / 4, elements 2 (l % 4) and + 1 (with .trans: the transposed tile's).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
  (void)addr;
  r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: acc (16x8 fp32, the C fragment) +=
/// a (16x16, 4 registers) @ b (16x8, 2 registers), in place.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)acc; (void)a; (void)b0; (void)b1;
#endif
}

}  // namespace jax_sm100::ptx
