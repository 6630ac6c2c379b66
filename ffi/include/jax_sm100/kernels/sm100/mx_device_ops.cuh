// MxDeviceOps: DeviceOps (device_ops.cuh) plus the three members the MXFP8 kernel adds to
// the seam (the MX part of ops_concept.h): a plain bulk copy global -> shared completing
// on an mbarrier, tcgen05.cp of a scale-factor chunk, and the block-scaled UMMA. Thin
// calls into the PTX wrappers, as the rest of DeviceOps.
#pragma once

#include <cstdint>

#include "jax_sm100/kernels/sm100/device_ops.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm100/tcgen05_block_scale.cuh"

namespace jax_sm100::kernels::sm100 {

struct MxDeviceOps : DeviceOps {
  /// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: `bytes` (a
  /// multiple of 16, both addresses 16-byte aligned) into this CTA's shared memory.
  static __device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes, Barrier* bar) {
    ptx::bulk_load(smem, gmem, bytes, bar->ptr());
  }
  /// tcgen05.cp.cta_group::1.32x128b.warpx4 (one thread).
  static __device__ __forceinline__ void tmem_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
    ptx::tmem_cp_32x128b_warpx4(taddr, sdesc);
  }
  /// tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X (one thread).
  static __device__ __forceinline__ void umma_mx(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
                                                 uint32_t tmem_sfa, uint32_t tmem_sfb, bool accumulate) {
    ptx::umma_mxf8f6f4(tmem_d, desc_a, desc_b, idesc, tmem_sfa, tmem_sfb, accumulate);
  }
};

}  // namespace jax_sm100::kernels::sm100
