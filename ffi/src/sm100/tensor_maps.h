// The tensor maps of the sm_100a launchers: a MapSpec of a kernel's CUDA-free plan
// (kernels/sm100/*_plan.h) encoded through the one encoder (common/tensor_map.h) with the
// element type of the operand it describes. encode_map takes the type; encode<X> names it
// by the C++ element type (bf16, f16, f32); encode_fp8_map by the FP8 kernels' operand
// (e4m3 bytes, f32 A scales without swizzle, bf16 C / D).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/fp8_plan.h"
#include "jax_sm100/kernels/sm100/map_spec.h"

namespace jax_sm100::host::sm100_detail {

/// MapSpec -> CUtensorMap of element type `dtype`; the swizzle is the spec's (128B or none).
inline std::string encode_map(const kernels::sm100::MapSpec& s, CUtensorMapDataType dtype, CUtensorMap* map) {
  if (s.swizzle_bytes != 128 && s.swizzle_bytes != 0) return "unexpected TMA swizzle span";
  TensorMapSpec t;
  t.base = s.base;
  t.dtype = dtype;
  t.elem_bytes = s.elem_bytes;
  t.rank = 3;
  t.inner = s.inner;
  t.outer = s.outer;
  t.batch = s.batch;
  t.row_pitch_bytes = s.row_pitch;
  t.box_inner = s.box_inner;
  t.box_outer = s.box_outer;
  t.swizzle = s.swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  return encode_tensor_map(map, t);
}

template <class X>
CUtensorMapDataType map_dtype() {
  if constexpr (std::is_same_v<X, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (std::is_same_v<X, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

/// MapSpec -> CUtensorMap of element type X (bf16, f16 or f32).
template <class X>
std::string encode(const kernels::sm100::MapSpec& s, CUtensorMap* map) {
  return encode_map(s, map_dtype<X>(), map);
}

/// MapSpec of the FP8 kernels (dense and M-grouped) -> CUtensorMap.
inline std::string encode_fp8_map(const kernels::sm100::MapSpec& s, kernels::sm100::Fp8Operand which,
                                  CUtensorMap* map) {
  using kernels::sm100::Fp8Operand;
  const CUtensorMapDataType dtype = which == Fp8Operand::kAScale                          ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                    : which == Fp8Operand::kC || which == Fp8Operand::kD ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                                          : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  return encode_map(s, dtype, map);
}

}  // namespace jax_sm100::host::sm100_detail
