// The sm_100a FP8 blockwise M-grouped GEMM kernel entry: binds the role functions
// (grouped_fp8_roles.h) to DeviceOps. Launched like the bf16 grouped kernel
// (grouped_gemm.cuh): one CTA per cluster, one cluster per possible tile, Cfg::kThreads
// threads, sm100_grouped_fp8_smem_bytes<Cfg>() of dynamic shared memory (the storage aligned
// up to 1024 inside it, the group table after it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/grouped_fp8_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg>
constexpr uint32_t sm100_grouped_fp8_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, DeviceOps>)) + Cfg::kTableBytes + 1024u;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_grouped_fp8_gemm_kernel(const __grid_constant__ GroupedFp8GemmParams<DeviceOps> p) {
  static_assert(sm100_grouped_fp8_smem_bytes<Cfg>() <= kSm100MaxSmemBytes,
                "the sm100 FP8 grouped GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  grouped_fp8_gemm_cta<Cfg, DeviceOps>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
