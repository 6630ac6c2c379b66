// The tensor maps of the sm_100a FP8 kernels (the dense and the M-grouped blockwise GEMM):
// a MapSpec of their plans (kernels/sm100/fp8_plan.h, grouped_fp8_plan.h) encoded with the
// element type of the operand it describes (e4m3 bytes, f32 scales, bf16 C/D).
#pragma once

#include <cuda.h>

#include <string>

#include "common/tensor_map.h"
#include "jax_sm100/kernels/sm100/fp8_plan.h"

namespace jax_sm100::host {

/// MapSpec -> CUtensorMap through the one encoder (common/tensor_map.h).
inline std::string encode_fp8_map(const kernels::sm100::MapSpec& s, kernels::sm100::Fp8Operand which,
                                  CUtensorMap* map) {
  using kernels::sm100::Fp8Operand;
  TensorMapSpec t;
  t.base = s.base;
  t.dtype = which == Fp8Operand::kAScale                          ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
            : which == Fp8Operand::kC || which == Fp8Operand::kD ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                  : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  t.elem_bytes = s.elem_bytes;
  t.rank = 3;
  t.inner = s.inner;
  t.outer = s.outer;
  t.batch = s.batch;
  t.row_pitch_bytes = s.row_pitch;
  t.box_inner = s.box_inner;
  t.box_outer = s.box_outer;
  t.swizzle = s.swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  if (s.swizzle_bytes != 128 && s.swizzle_bytes != 0) return "unexpected TMA swizzle span";
  return encode_tensor_map(map, t);
}

}  // namespace jax_sm100::host
