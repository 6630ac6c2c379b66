// The sm_100a FP8 bias/activation GEMM kernel entry: binds fp8_bias_roles.h to DeviceOps.
// Launched like the FP8 GEMM (fp8_gemm.cuh: one CTA, a cluster of one, per 128 x 128
// output tile, Cfg::kThreads threads) with fp8_bias_smem_bytes of dynamic shared memory
// (the carve-up aligned up to 1024 inside it, the bias slice after it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/fp8_bias_plan.h"
#include "jax_sm100/kernels/sm100/fp8_bias_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg, Activation Act>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_fp8_bias_gemm_kernel(const __grid_constant__ Fp8BiasParams<DeviceOps> p) {
  static_assert(fp8_bias_smem_bytes<Cfg, DeviceOps>() <= kSm100MaxSmemBytes,
                "the sm100 FP8 bias GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  fp8_bias_gemm_cta<Cfg, DeviceOps, Act>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
