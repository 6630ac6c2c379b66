// The sm_100a GEMM kernel entry: binds the role functions (gemm_roles.h) to DeviceOps.
// Launched with clusters of Cfg::kClusterM CTAs along x, one cluster per output cluster
// tile (the grid is not persistent: cluster launch control steals not-yet-launched
// clusters), Cfg::kThreads threads and sizeof(storage) + 1024 bytes of dynamic shared
// memory (the storage is aligned up to 1024 inside it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/gemm_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg, class T, class Out>
constexpr uint32_t sm100_gemm_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, DeviceOps>)) + 1024u;
}

template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_gemm_kernel(const __grid_constant__ GemmParams<DeviceOps> p) {
  static_assert(sm100_gemm_smem_bytes<Cfg, T, Out>() <= kSm100MaxSmemBytes,
                "the sm100 GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  gemm_cta<Cfg, DeviceOps, T, Out>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
