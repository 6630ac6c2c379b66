// The sm_100a activation-backward GEMM kernel entry: binds gemm_dact_roles.h to DeviceOps.
// Launched like the GEMM (gemm.cuh: clusters of Cfg::kClusterM CTAs along x, one cluster
// per output cluster tile, Cfg::kThreads threads) with gemm_dact_smem_bytes of dynamic
// shared memory (the carve-up aligned up to 1024 inside it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/gemm_dact_plan.h"
#include "jax_sm100/kernels/sm100/gemm_dact_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg, class T, Activation Act>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_gemm_dact_kernel(const __grid_constant__ GemmDactParams<DeviceOps> p) {
  static_assert(gemm_dact_smem_bytes<Cfg, DeviceOps>() <= kSm100MaxSmemBytes,
                "the sm100 dact GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  gemm_dact_cta<Cfg, DeviceOps, T, Act>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
