// The sm_100a blockwise-scaled FP8 GEMM kernel entry: binds the role functions
// (fp8_roles.h) to DeviceOps. Launched like the bf16 GEMM (gemm.cuh): one CTA (a cluster
// of one) per 128 x 128 output tile, cluster launch control stealing the tiles not yet
// launched, Cfg::kThreads threads, sm100_fp8_gemm_smem_bytes() of dynamic shared memory
// (the storage is aligned up to 1024 inside it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/fp8_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg>
constexpr uint32_t sm100_fp8_gemm_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, DeviceOps>)) + 1024u;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_fp8_gemm_kernel(const __grid_constant__ Fp8GemmParams<DeviceOps> p) {
  static_assert(sm100_fp8_gemm_smem_bytes<Cfg>() <= kSm100MaxSmemBytes,
                "the sm100 FP8 GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  fp8_gemm_cta<Cfg, DeviceOps>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
