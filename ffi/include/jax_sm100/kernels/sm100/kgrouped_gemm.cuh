// The sm_100a K-grouped GEMM kernel entry: binds the role functions (kgrouped_gemm_roles.h)
// to DeviceOps. Launched with one CTA per cluster, one cluster per output tile
// (ceil(K / 128) x ceil(N / BlockN) x G; cluster launch control lets resident CTAs take
// over the rest), Cfg::kThreads threads and sm100_kgrouped_smem_bytes<Cfg>() of dynamic
// shared memory (the storage aligned up to 1024 inside it, the group table and the load
// warp's barrier after it).
#pragma once

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/kernels/sm100/kgrouped_gemm_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg>
constexpr uint32_t sm100_kgrouped_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, DeviceOps>)) + Cfg::kExtraBytes + 1024u;
}

template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_kgrouped_gemm_kernel(const __grid_constant__ KGroupedGemmParams<DeviceOps> p) {
  static_assert(sm100_kgrouped_smem_bytes<Cfg>() <= kSm100MaxSmemBytes,
                "the sm100 K-grouped GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, DeviceOps>*>(aligned);
  kgrouped_gemm_cta<Cfg, DeviceOps, T, Out>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
