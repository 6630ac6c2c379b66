// FastDivisor: division of non-negative 31-bit integers by a divisor fixed at launch, as
// one 32x32->64-bit multiply and a shift. A run-time integer division on the GPU is a
// dependent chain of ~20 instructions (I2F, MUFU.RCP, F2I, corrections); the persistent
// tile order does three per tile, on the path between one tile's last K block and the
// next tile's first wgmma.
//
// Constants (made once, on the host): with c = ceil(log2(d)) and p = 31 + c,
// mul = ceil(2^p / d) < 2^32. For x < 2^31, x * mul / 2^p = x / d + x * e / (d * 2^p)
// with e = mul * d - 2^p in [0, d), so the error term is below 1/d and
// floor(x * mul / 2^p) == floor(x / d).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::kernels {

struct FastDivisor {
  uint32_t d = 1;          // the divisor
  uint32_t mul = 1u << 31;  // ceil(2^shift / d)
  uint32_t shift = 31;      // 31 + ceil(log2(d))

  /// Constants for divisor d (1 <= d < 2^31).
  static JAX_SM100_HD FastDivisor make(uint32_t d) {
    uint32_t c = 0;
    while ((1ull << c) < d) ++c;
    FastDivisor f;
    f.d = d;
    f.shift = 31 + c;
    f.mul = static_cast<uint32_t>(((1ull << f.shift) + d - 1) / d);
    return f;
  }
  /// x / d for 0 <= x < 2^31.
  JAX_SM100_HD uint32_t div(uint32_t x) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(x) * mul) >> shift);
  }
  /// x % d, given q = div(x).
  JAX_SM100_HD uint32_t rem(uint32_t x, uint32_t q) const { return x - q * d; }
};

}  // namespace jax_sm100::kernels
