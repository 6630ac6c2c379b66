// Hopper (sm_90a) FP8 warpgroup MMA: wgmma.mma_async m64nNk32, e4m3 x e4m3 -> f32, both
// operands K-major in shared memory (FP8 wgmma has no transpose option). The fence /
// commit / wait / descriptor helpers are the ones in wgmma.cuh.
//
// The specialisations (N in {64, 96, 128, 160, 192, 256}) live in wgmma_fp8_generated.inc,
// written by tools/gen_wgmma.py: the asm operand list names every accumulator register,
// which C++ cannot spell generically. Change the script and rerun it; do not edit the .inc.
#pragma once

#include <stdint.h>

#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::ptx {

/// One warpgroup MMA m64 x N x k32, e4m3 inputs, fp32 accumulators (N/2 per thread).
/// Specialised (in wgmma_fp8_generated.inc) for the N tools/gen_wgmma.py lists; any other N
/// is an incomplete type. Members: kAccRegs = N / 2 and
/// mma(float (&d)[kAccRegs], desc_a, desc_b, scale_d).
template <int N>
struct WgmmaFp8E4M3;

}  // namespace jax_sm100::ptx

#include "jax_sm100/ptx/sm90/wgmma_fp8_generated.inc"
