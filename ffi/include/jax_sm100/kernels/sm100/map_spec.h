// MapSpec: a CUDA-free description of one TMA tiled tensor map of the sm_100a kernels.
//
// The host plan (ffi/src/sm100/gemm_plan.h) describes every operand with a MapSpec;
// the CUDA launcher encodes it into a CUtensorMap (cuTensorMapEncodeTiled), the CPU
// emulator (tests/emu/emu_ops.h) builds its own TensorMap model from the same value.
// Rank 3, row-major: element (i, r, b) (i innermost) lives at
//   base + b * batch_pitch + r * row_pitch + i * elem_bytes.
// A box is box_inner x box_outer x 1; out-of-bounds elements load as zero and are not
// stored. swizzle_bytes is the TMA swizzle span (0, 32, 64 or 128); with a span, one box
// row (box_inner * elem_bytes) must not exceed it.
#pragma once

#include <cstdint>

namespace jax_sm100::kernels::sm100 {

struct MapSpec {
  const void* base = nullptr;
  uint32_t elem_bytes = 2;
  uint64_t inner = 0, outer = 0, batch = 1;  ///< extents in elements / rows / batch entries
  uint64_t row_pitch = 0;                    ///< bytes between rows (multiple of 16)
  uint64_t batch_pitch = 0;                  ///< bytes between batch entries (0: batch == 1)
  uint32_t box_inner = 0, box_outer = 0;
  uint32_t swizzle_bytes = 128;
};

}  // namespace jax_sm100::kernels::sm100
