// The one host-side encoder of TMA tensor maps (CUtensorMap) that every launcher uses.
//
// The module links cudart_static and NOT libcuda, so the driver entry point
// cuTensorMapEncodeTiled is looked up once through the runtime
// (cudaGetDriverEntryPointByVersion). Encoding is pure host work (no allocation, no
// device sync), so handlers do it on every call and stay CUDA-graph safe: the map
// travels to the kernel as a __grid_constant__ parameter.
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
      cudaGetLastError();  // clear it, so later checks see only our launches' errors
      return nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

/// A row-major tensor as TMA sees it: rank 2 ([outer, inner]) or rank 3
/// ([batch, outer, inner]), read and written in boxes of box_outer rows x box_inner
/// elements (x 1 batch entry).
struct TensorMapSpec {
  const void* base = nullptr;  ///< device address of element 0; 16-byte aligned
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  uint32_t elem_bytes = 1;     ///< bytes per element
  uint32_t rank = 2;           ///< 2 or 3
  uint64_t inner = 0;          ///< contiguous extent (elements)
  uint64_t outer = 0;          ///< rows
  uint64_t batch = 1;          ///< rank 3 only; 1 for a broadcast operand
  uint64_t row_pitch_bytes = 0;  ///< 0: inner * elem_bytes; a multiple of 16
  uint32_t box_inner = 0, box_outer = 0;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;  ///< box_inner bytes <= its span
};

/// Encodes a tiled map for `s`. Out-of-bounds loads fill zeros, out-of-bounds stores are
/// dropped. Returns "" or an error sentence.
inline std::string encode_tensor_map(CUtensorMap* map, const TensorMapSpec& s) {
  auto encode = tensor_map_encoder();
  if (encode == nullptr) return "the CUDA driver does not provide cuTensorMapEncodeTiled";
  if (s.rank != 2 && s.rank != 3) return "tensor maps here are of rank 2 or 3";
  const uint64_t pitch = s.row_pitch_bytes != 0 ? s.row_pitch_bytes : s.inner * s.elem_bytes;
  const cuuint64_t dims[3] = {s.inner, s.outer, s.batch};
  const cuuint64_t strides[2] = {pitch, pitch * s.outer};  // dims 1 and 2, in bytes
  const cuuint32_t box[3] = {s.box_inner, s.box_outer, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUresult r = encode(map, s.dtype, s.rank, const_cast<void*>(s.base), dims, strides, box,
                      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, s.swizzle,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string shape = s.rank == 3 ? std::to_string(s.batch) + ", " : "";
    return "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) +
           ") for a tensor of shape [" + shape + std::to_string(s.outer) + ", " +
           std::to_string(s.inner) + "]";
  }
  return "";
}

}  // namespace jax_sm100::host
