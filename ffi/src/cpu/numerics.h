// Scalar number formats of the CPU handlers, in plain C++ (no CUDA, no compiler
// extensions): bf16/f16 <-> f32 and f32 -> float8_e4m3fn, all round-to-nearest-even,
// bit-exact with ml_dtypes / XLA's conversions (NaN: the canonical quiet NaN of the
// target format, as the CUDA kernels write it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/ffi_checks.h"  // ElemType

namespace jax_sm100::cpu {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// Magnitude bits (exponent << M | mantissa) of the finite, non-negative `ax` rounded to
/// nearest-even into a binary format with M mantissa bits and exponent bias `bias`
/// (subnormals included; an overflow shows as bits past the format's largest finite).
/// Exact integer arithmetic: `ax` is sig * 2^(e - 23) with a 24-bit significand sig; the
/// result's quantum is 2^(max(e, 1 - bias) - M), and sig is shifted down to it with
/// round-half-to-even. A carry out of the mantissa moves into the exponent by itself.
inline uint32_t round_magnitude(float ax, int M, int bias) {
  const uint32_t u = f32_bits(ax);
  if (u == 0) return 0;
  const int field = int(u >> 23);
  const int e = (field == 0 ? 1 : field) - 127;
  const uint32_t sig = (u & 0x7fffffu) | (field == 0 ? 0u : 0x800000u);
  const int min_e = 1 - bias;
  const int shift = ((e > min_e ? e : min_e) - M) - (e - 23);  // >= 23 - M > 0
  if (shift > 25) return 0;  // below a quarter of the smallest subnormal
  uint32_t r = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return e >= min_e ? (uint32_t(e + bias - 1) << M) + r : r;
}

/// float -> float8_e4m3fn bits, saturating to +-448 (clip, then round); NaN -> 0x7f.
/// This is the quantize recipe's jnp.clip(v, -448, 448).astype(float8_e4m3fn) and the
/// CUDA kernels' cvt.rn.satfinite.e4m3x2.f32.
inline uint8_t f32_to_e4m3fn_satfinite(float v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  float ax = std::fabs(v);
  if (ax > 448.0f) ax = 448.0f;
  return uint8_t(sign | round_magnitude(ax, 3, 7));  // 448 -> 0x7e, the largest finite
}

/// float8_e4m3fn bits -> float (exact).
inline float e4m3fn_to_f32(uint8_t b) {
  const bool neg = (b & 0x80) != 0;
  const int exp = (b >> 3) & 0xf, man = b & 0x7;
  float v;
  if (exp == 0xf && man == 0x7) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(float(man), -9);  // subnormal: man * 2^(1 - 7 - 3)
  } else {
    v = std::ldexp(float(8 + man), exp - 10);  // (1 + man/8) * 2^(exp - 7)
  }
  return neg ? -v : v;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);  // stays a (quiet) NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // RNE; overflow -> inf
}

inline float f16_to_f32(uint16_t h) {
  const bool neg = (h & 0x8000) != 0;
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0x1f) {
    v = man ? NAN : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(float(man), -24);
  } else {
    v = std::ldexp(float(1024 + man), exp - 25);
  }
  return neg ? -v : v;
}

inline uint16_t f32_to_f16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return uint16_t(sign | 0x7e00);
  const uint32_t bits = std::isinf(f) ? 0x7c00u : round_magnitude(std::fabs(f), 10, 15);
  return uint16_t(sign | (bits > 0x7c00u ? 0x7c00u : bits));  // past 65504: inf
}

/// The element types the handlers read and write, by FFI data type.
using Elem = jax_sm100::host::ElemType;

inline float load(const void* p, int64_t i, Elem t) {
  switch (t) {
    case Elem::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case Elem::kF16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case Elem::kF32: return static_cast<const float*>(p)[i];
  }
  return 0.0f;
}

/// Stores v rounded once (to nearest even) to the element type.
inline void store(void* p, int64_t i, Elem t, float v) {
  switch (t) {
    case Elem::kBF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); break;
    case Elem::kF16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); break;
    case Elem::kF32: static_cast<float*>(p)[i] = v; break;
  }
}

}  // namespace jax_sm100::cpu
