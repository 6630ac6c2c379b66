// Model of how the tensor cores read a matrix operand from shared memory through a
// matrix descriptor, written from the PTX ISA ("Shared Memory Matrix Layout" and
// "Matrix Descriptor" of wgmma, and of tcgen05), independently of the kernels' encoders.
//
// decode_sm90 / decode_sm100 turn a 64-bit descriptor into a SmemLayout (the two
// formats differ only in where the swizzle mode sits and how it is numbered, and in the
// sm100 "version" field); byte_offset() then says which shared-memory byte holds
// element (mn, k) of the operand, for K-major or MN-major operands:
//
//   K-major, swizzle span S bytes (32/64/128): 8-row atoms, row r at r*S, K contiguous
//     inside the row; the atom repeats along MN every SBO bytes; one instruction's K
//     extent must fit in S.  off = (mn/8)*SBO + (mn%8)*S + k*e
//   K-major, no swizzle: 8x16-byte core matrices; rows 16 bytes apart; along MN every
//     SBO, along K every LBO.  off = (mn/8)*SBO + (mn%8)*16 + (k/T)*LBO + (k%T)*e
//   MN-major, swizzle span S: S bytes of MN contiguous, K rows S bytes apart, 8 K rows
//     per atom; the next S bytes of MN at LBO, the next 8 K rows at SBO.
//     off = (mn/(S/e))*LBO + (mn%(S/e))*e + (k/8)*SBO + (k%8)*S
//   MN-major, no swizzle: 16 bytes of MN per core-matrix row, K rows 16 bytes apart;
//     the next 16 bytes of MN at SBO, the next 8 K rows at LBO (LBO/SBO swap roles
//     relative to the swizzled MN-major forms).
//     off = (mn/T)*SBO + (mn%T)*e + (k/8)*LBO + (k%8)*16
//   (e: element bytes, T = 16/e elements per 16 bytes)
// and the swizzle is applied to the whole address (start + off):
//   Swizzle<b,4,3>: bits [4, 4+b) ^= bits [7, 7+b), b = log2(S/16)
// which is why swizzled operands start on a multiple of the pattern's 8*S-byte repeat
// (or say otherwise in the base-offset field; the kernels keep it 0 and align).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace jax_sm100::emu {

enum class Major { kK, kMN };

struct SmemLayout {
  uint32_t start = 0;        ///< byte address (14-bit field << 4)
  uint32_t lbo = 0;          ///< leading-dimension byte offset
  uint32_t sbo = 0;          ///< stride-dimension byte offset
  uint32_t swizzle = 0;      ///< swizzle span in bytes: 0 (none), 32, 64, 128
  uint32_t base_offset = 0;  ///< 3-bit matrix base offset
};

inline uint64_t desc_field(uint64_t d, int lo, int bits) { return (d >> lo) & ((1ull << bits) - 1); }

/// wgmma (sm_90) descriptor: start [0,14), LBO [16,30), SBO [32,46) (all >> 4),
/// base offset [49,52), swizzle [62,64): 0 none, 1 128B, 2 64B, 3 32B.
inline SmemLayout decode_sm90(uint64_t d) {
  SmemLayout l;
  l.start = static_cast<uint32_t>(desc_field(d, 0, 14) << 4);
  l.lbo = static_cast<uint32_t>(desc_field(d, 16, 14) << 4);
  l.sbo = static_cast<uint32_t>(desc_field(d, 32, 14) << 4);
  l.base_offset = static_cast<uint32_t>(desc_field(d, 49, 3));
  static const uint32_t kSpan[4] = {0, 128, 64, 32};
  l.swizzle = kSpan[desc_field(d, 62, 2)];
  return l;
}

/// tcgen05 (sm_100) descriptor: start, LBO, SBO as sm_90; version [46,48) must be 1;
/// base offset [49,52); LBO mode [52] (0 here); swizzle [61,64): 0 none, 2 128B,
/// 4 64B, 6 32B (1 = 128B with 32-byte atoms, not modelled).
inline SmemLayout decode_sm100(uint64_t d) {
  if (desc_field(d, 46, 2) != 1) throw std::runtime_error("sm100 smem descriptor: version field is not 1");
  if (desc_field(d, 52, 1) != 0) throw std::runtime_error("sm100 smem descriptor: LBO mode 1 is not modelled");
  SmemLayout l;
  l.start = static_cast<uint32_t>(desc_field(d, 0, 14) << 4);
  l.lbo = static_cast<uint32_t>(desc_field(d, 16, 14) << 4);
  l.sbo = static_cast<uint32_t>(desc_field(d, 32, 14) << 4);
  l.base_offset = static_cast<uint32_t>(desc_field(d, 49, 3));
  switch (desc_field(d, 61, 3)) {
    case 0: l.swizzle = 0; break;
    case 2: l.swizzle = 128; break;
    case 4: l.swizzle = 64; break;
    case 6: l.swizzle = 32; break;
    default: throw std::runtime_error("sm100 smem descriptor: unmodelled swizzle mode " +
                                      std::to_string(desc_field(d, 61, 3)));
  }
  return l;
}

/// Swizzle<b,4,3> of a byte address for a span of `span` bytes (0: identity).
inline uint32_t swizzle_address(uint32_t addr, uint32_t span) {
  if (span == 0) return addr;
  const uint32_t b = span == 128 ? 3 : span == 64 ? 2 : 1;
  const uint32_t mask = (1u << b) - 1;
  return addr ^ (((addr >> 7) & mask) << 4);
}

/// Shared-memory byte address of element (mn, k) of an operand read through `l`.
inline uint32_t element_address(const SmemLayout& l, Major major, uint32_t mn, uint32_t k,
                                uint32_t elem_bytes) {
  if (l.base_offset != 0) throw std::runtime_error("smem descriptor: base offset != 0 is not modelled");
  const uint32_t e = elem_bytes, S = l.swizzle;
  uint32_t off = 0;
  if (major == Major::kK) {
    if (S == 0) {
      const uint32_t t = 16 / e;
      off = (mn / 8) * l.sbo + (mn % 8) * 16 + (k / t) * l.lbo + (k % t) * e;
    } else {
      if ((k + 1) * e > S) throw std::runtime_error("K-major swizzled operand: K beyond the swizzle span");
      off = (mn / 8) * l.sbo + (mn % 8) * S + k * e;
    }
  } else {
    if (S == 0) {
      // Interleaved MN-major: 16 bytes of MN per core-matrix row, 8 K rows 16 bytes apart;
      // unlike the swizzled MN-major forms, the next 16 bytes of MN are at SBO and the
      // next 8 K rows at LBO (LBO is the K-direction stride whenever there is no swizzle).
      const uint32_t t = 16 / e;
      off = (mn / t) * l.sbo + (mn % t) * e + (k / 8) * l.lbo + (k % 8) * 16;
    } else {
      const uint32_t per_row = S / e;
      off = (mn / per_row) * l.lbo + (mn % per_row) * e + (k / 8) * l.sbo + (k % 8) * S;
    }
  }
  return swizzle_address(l.start + off, S);
}

/// tcgen05.mma kind::f16 instruction descriptor, field by field (PTX ISA table
/// "Instruction descriptor format for .kind::f16 and .kind::tf32").
struct InstrDescF16 {
  uint32_t d_format;   ///< [4,6): 0 F16, 1 F32
  uint32_t a_format;   ///< [7,10): 0 F16, 1 BF16
  uint32_t b_format;   ///< [10,13)
  bool negate_a;       ///< [13]
  bool negate_b;       ///< [14]
  Major a_major;       ///< [15]: 0 K-major, 1 MN-major
  Major b_major;       ///< [16]
  uint32_t n;          ///< [17,23) holds N >> 3
  uint32_t m;          ///< [24,29) holds M >> 4
};

inline InstrDescF16 decode_idesc_f16(uint32_t d) {
  if (d & 0x7u) throw std::runtime_error("idesc: sparsity bits set");
  if (d & (1u << 3)) throw std::runtime_error("idesc: saturate set (kind::f16 has none)");
  if (d & ((1u << 6) | (1u << 23) | (1u << 29))) throw std::runtime_error("idesc: reserved bit set");
  if (d >> 30) throw std::runtime_error("idesc: max shift set (weight-stationary only)");
  InstrDescF16 r;
  r.d_format = (d >> 4) & 3;
  r.a_format = (d >> 7) & 7;
  r.b_format = (d >> 10) & 7;
  r.negate_a = (d >> 13) & 1;
  r.negate_b = (d >> 14) & 1;
  r.a_major = ((d >> 15) & 1) ? Major::kMN : Major::kK;
  r.b_major = ((d >> 16) & 1) ? Major::kMN : Major::kK;
  r.n = ((d >> 17) & 0x3f) << 3;
  r.m = ((d >> 24) & 0x1f) << 4;
  if (r.d_format > 1) throw std::runtime_error("idesc: D format other than F16/F32");
  if (r.a_format > 1 || r.b_format > 1) throw std::runtime_error("idesc: A/B format other than F16/BF16");
  return r;
}

}  // namespace jax_sm100::emu
