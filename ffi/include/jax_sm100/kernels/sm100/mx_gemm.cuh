// The sm_100a MXFP8 GEMM kernel entry: binds the role functions (mx_gemm_roles.h) to
// MxDeviceOps. Launched with one CTA per output tile (clusters of one: cluster launch
// control steals not-yet-launched CTAs), Cfg::kThreads threads and
// sizeof(storage) + 1024 bytes of dynamic shared memory (aligned up to 1024 inside).
#pragma once

#include "jax_sm100/kernels/sm100/mx_device_ops.cuh"
#include "jax_sm100/kernels/sm100/mx_gemm_roles.h"

namespace jax_sm100::kernels::sm100 {

template <class Cfg>
constexpr uint32_t sm100_mx_gemm_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, MxDeviceOps>)) + 1024u;
}

template <class Cfg, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm100_mx_gemm_kernel(const __grid_constant__ MxGemmParams<MxDeviceOps> p) {
  static_assert(sm100_mx_gemm_smem_bytes<Cfg>() <= kSm100MaxSmemBytes,
                "the sm100 MXFP8 GEMM's shared memory exceeds the 227 KiB a CTA may use");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023);
  auto& s = *reinterpret_cast<GemmStorage<Cfg, MxDeviceOps>*>(aligned);
  mx_gemm_cta<Cfg, MxDeviceOps, Out>(s, p);
#else
  __trap();  // sm_100a only; other archs never launch it
#endif
}

}  // namespace jax_sm100::kernels::sm100
