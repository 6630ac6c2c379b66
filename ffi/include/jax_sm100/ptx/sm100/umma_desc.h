// Encoders of the two descriptors a tcgen05.mma (UMMA) takes, written from the PTX ISA:
// the shared-memory matrix descriptor of each operand and the kind::f16 instruction
// descriptor. CUDA-free (host and device), so the CPU emulator's tests can print and
// compare them; the emulator decodes them with its own model (tests/emu/smem_desc_model.h).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::ptx {

/// Swizzle modes of the sm_100 shared-memory descriptor, bits [61, 64).
enum class UmmaSwizzle : uint32_t { kNone = 0, k128B = 2, k64B = 4, k32B = 6 };

/// Shared-memory matrix descriptor (sm_100 format): start address, leading- and
/// stride-dimension byte offsets (each >> 4, 14 bits), the fixed version 1 at [46, 48),
/// base offset 0 (the operand starts on its swizzle pattern's repeat), LBO mode 0.
JAX_SM100_HD constexpr uint64_t make_umma_smem_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo,
                                                    UmmaSwizzle swizzle) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3fffu) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3fffu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3fffu) << 32) | (1ull << 46) |
         (static_cast<uint64_t>(swizzle) << 61);
}

/// kind::f16 instruction descriptor: D in F32 ([4,6) = 1), A and B formats ([7,10),
/// [10,13): 0 F16, 1 BF16), A and B major-ness ([15], [16]: 0 K-major, 1 MN-major),
/// N >> 3 at [17, 23), M >> 4 at [24, 29); dense, no negation, no saturation.
JAX_SM100_HD constexpr uint32_t make_umma_idesc_f16(bool bf16, bool a_mn_major, bool b_mn_major,
                                                    uint32_t m, uint32_t n) {
  return (1u << 4) | (static_cast<uint32_t>(bf16) << 7) | (static_cast<uint32_t>(bf16) << 10) |
         (static_cast<uint32_t>(a_mn_major) << 15) | (static_cast<uint32_t>(b_mn_major) << 16) |
         ((n >> 3) << 17) | ((m >> 4) << 24);
}

// ---- kind::f8f6f4 (the blockwise FP8 GEMM) -------------------------------------------
/// Operand formats of the kind::f8f6f4 instruction descriptor ([7,10) A, [10,13) B).
enum class UmmaF8f6f4Format : uint32_t { kE4M3 = 0, kE5M2 = 1, kE2M3 = 3, kE3M2 = 4, kE2M1 = 5 };

/// kind::f8f6f4 instruction descriptor (the PTX ISA's table for .kind::tf32/f16/f8f6f4/i8):
/// D in F32 ([4,6) = 1), A and B formats as above, A and B major-ness ([15], [16]: 0
/// K-major), N >> 3 at [17, 23), M >> 4 at [24, 29); dense, no negation. K is 32 per
/// instruction (32 bytes of 8-bit elements).
JAX_SM100_HD constexpr uint32_t make_umma_idesc_f8f6f4(UmmaF8f6f4Format a, UmmaF8f6f4Format b,
                                                       bool a_mn_major, bool b_mn_major, uint32_t m,
                                                       uint32_t n) {
  return (1u << 4) | (static_cast<uint32_t>(a) << 7) | (static_cast<uint32_t>(b) << 10) |
         (static_cast<uint32_t>(a_mn_major) << 15) | (static_cast<uint32_t>(b_mn_major) << 16) |
         ((n >> 3) << 17) | ((m >> 4) << 24);
}
// ---- end kind::f8f6f4 ----------------------------------------------------------------

}  // namespace jax_sm100::ptx
