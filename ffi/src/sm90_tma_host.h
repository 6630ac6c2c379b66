// Host-side creation of TMA tensor maps (CUtensorMap) for the sm90 GEMM.
//
// The module links cudart_static and NOT libcuda, so the driver entry point
// cuTensorMapEncodeTiled is looked up once through the runtime
// (cudaGetDriverEntryPointByVersion). Building a map is pure host work (no
// allocation, no device sync), so handlers may do it on every call and stay
// CUDA-graph safe: the map travels to the kernel as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>  // CUtensorMap and enums only (types, no libcuda symbols)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <cstdint>
#include <string>

namespace jax_sm100::host {

/// Returns the driver's cuTensorMapEncodeTiled, or nullptr when the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = []() -> PFN_cuTensorMapEncodeTiled_v12000 {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                       cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later checks see only our launches
      return nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

/// A rank-3 row-major tensor [batch, outer, inner] as TMA sees it.
struct TmaTensor3d {
  const void* base;       ///< device address of element (0, 0, 0); 16-byte aligned
  CUtensorMapDataType dtype;
  uint32_t elem_bytes;    ///< 2 or 4
  uint64_t inner;         ///< contiguous extent (elements)
  uint64_t outer;         ///< rows
  uint64_t batch;         ///< 1 for a broadcast operand
};

/// Encodes a 128B-swizzled tiled map with box {box_inner, box_outer, 1}.
/// box_inner * elem_bytes must be <= 128 (the swizzle span). Out-of-bounds
/// loads fill zeros, out-of-bounds stores are dropped. Returns "" or an error sentence.
inline std::string encode_tma_3d(CUtensorMap* map, const TmaTensor3d& t, uint32_t box_inner,
                                 uint32_t box_outer) {
  auto encode = tensor_map_encoder();
  if (encode == nullptr) return "the CUDA driver does not provide cuTensorMapEncodeTiled";
  const cuuint64_t dims[3] = {t.inner, t.outer, t.batch};
  // Strides of dims 1 and 2 in bytes (dim 0 is contiguous). Must be multiples of 16:
  // the handler checks (inner * elem_bytes) % 16 == 0 before calling.
  const cuuint64_t strides[2] = {t.inner * t.elem_bytes, t.inner * t.outer * t.elem_bytes};
  const cuuint32_t box[3] = {box_inner, box_outer, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUresult r = encode(map, t.dtype, 3, const_cast<void*>(t.base), dims, strides, box,
                      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) +
           ") for a tensor of shape [" + std::to_string(t.batch) + ", " +
           std::to_string(t.outer) + ", " + std::to_string(t.inner) + "]";
  }
  return "";
}

}  // namespace jax_sm100::host
