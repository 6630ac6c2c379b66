// Test data of the sm_100a FP8 emulator tests (sm100_fp8_emu_test.cc,
// sm100_grouped_fp8_emu_test.cc): random e4m3 codes and the CUDA toolkit's own decoding
// of 8-bit codes (cuda_fp8.h), so the float64 references and the emulated tensor core
// (emu_fp8_ops.h) do not share a decoder.
#pragma once

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace jax_sm100::emu {

/// The toolkit's value of an 8-bit code (independent of the emulator's decoder).
inline double toolkit_e4m3(uint8_t code) {
  __nv_fp8_e4m3 x;
  x.__x = code;
  return static_cast<double>(static_cast<float>(x));
}
inline double toolkit_e5m2(uint8_t code) {
  __nv_fp8_e5m2 x;
  x.__x = code;
  return static_cast<double>(static_cast<float>(x));
}

/// Random e4m3 codes (never NaN): mostly magnitudes 2^-2 .. 2^3, and one in eight drawn
/// from every finite code (zeros, subnormals, 448).
inline std::vector<uint8_t> random_e4m3(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255), exp(5, 10), mant(0, 7), pick(0, 7);
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    uint8_t c;
    do {
      c = pick(rng) == 0 ? static_cast<uint8_t>(byte(rng))
                         : static_cast<uint8_t>((byte(rng) & 0x80) | (exp(rng) << 3) | mant(rng));
    } while ((c & 0x7f) == 0x7f);
    x = c;
  }
  return v;
}

/// The float64 reference of one output element of a blockwise-scaled FP8 product: over the
/// 128-wide K blocks q of rows a and b (k decoded values each), sum of scale(q) * (a . b
/// over block q), and the same sum of |terms| (which bounds the fp32 evaluation's error).
template <class Scale>
std::pair<double, double> scaled_block_dot(const double* a, const double* b, int64_t k, Scale&& scale) {
  double ref = 0, absterms = 0;
  for (int64_t q = 0; q * 128 < k; ++q) {
    double part = 0, abspart = 0;
    for (int64_t kk = q * 128; kk < std::min<int64_t>(k, (q + 1) * 128); ++kk) {
      part += a[kk] * b[kk];
      abspart += std::fabs(a[kk] * b[kk]);
    }
    const double s = scale(q);
    ref += s * part;
    absterms += s * abspart;
  }
  return {ref, absterms};
}

}  // namespace jax_sm100::emu
