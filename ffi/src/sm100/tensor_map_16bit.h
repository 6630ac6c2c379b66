// The tensor maps of the sm_100a bf16/fp16 kernels (GEMM, bias epilogue, M- and K-grouped):
// a MapSpec of their plans encoded with the element type X of the operand (bf16, f16 or
// f32), 128B swizzle, through the one encoder (common/tensor_map.h).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/map_spec.h"

namespace jax_sm100::host::sm100_detail {

template <class X>
CUtensorMapDataType map_dtype() {
  if constexpr (std::is_same_v<X, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (std::is_same_v<X, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/// MapSpec -> CUtensorMap of element type X.
template <class X>
std::string encode(const kernels::sm100::MapSpec& s, CUtensorMap* map) {
  TensorMapSpec t;
  t.base = s.base;
  t.dtype = map_dtype<X>();
  t.elem_bytes = s.elem_bytes;
  t.rank = 3;
  t.inner = s.inner;
  t.outer = s.outer;
  t.batch = s.batch;
  t.row_pitch_bytes = s.row_pitch;
  t.box_inner = s.box_inner;
  t.box_outer = s.box_outer;
  t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return encode_tensor_map(map, t);
}

}  // namespace jax_sm100::host::sm100_detail
