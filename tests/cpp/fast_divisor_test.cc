// FastDivisor (ffi/include/jax_sm100/common/fast_divisor.h) against the / and %
// operators: every divisor up to 4096 on x in [0, 65536] and on random x < 2^31; powers
// of two and their neighbours up to 2^30 at the ends of the range. Prints ALL PASSED.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "jax_sm100/common/fast_divisor.h"

using jax_sm100::kernels::FastDivisor;

static long failures = 0;
static void check(uint32_t d, uint32_t x) {
  const FastDivisor f = FastDivisor::make(d);
  const uint32_t q = f.div(x), r = f.rem(x, q);
  if (q != x / d || r != x % d) {
    if (++failures <= 10) std::printf("FAIL d=%u x=%u: %u r %u, want %u r %u\n", d, x, q, r, x / d, x % d);
  }
}

int main(int argc, char** argv) {
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  std::mt19937_64 rng(seed);
  const uint32_t kMaxX = 0x7fffffffu;
  for (uint32_t d = 1; d <= 4096; ++d) {
    for (uint32_t x = 0; x <= 65536; x += (d < 64 ? 1 : 7)) check(d, x);
    for (int i = 0; i < 2000; ++i) check(d, static_cast<uint32_t>(rng() % (uint64_t(kMaxX) + 1)));
    for (uint32_t x : {kMaxX, kMaxX - 1, kMaxX - d, kMaxX / d * d, kMaxX / d * d - 1}) check(d, x);
  }
  for (uint32_t c = 12; c <= 30; ++c) {
    for (int64_t delta = -2; delta <= 2; ++delta) {
      const uint32_t d = static_cast<uint32_t>((int64_t(1) << c) + delta);
      for (uint32_t x : {0u, 1u, d - 1, d, d + 1, kMaxX, kMaxX - 1, kMaxX / d * d, kMaxX / d * d - 1})
        check(d, x);
      for (int i = 0; i < 20000; ++i) check(d, static_cast<uint32_t>(rng() % (uint64_t(kMaxX) + 1)));
    }
  }
  for (int i = 0; i < 200000; ++i) {
    const uint32_t d = 1 + static_cast<uint32_t>(rng() % kMaxX);
    check(d, static_cast<uint32_t>(rng() % (uint64_t(kMaxX) + 1)));
  }
  if (failures) {
    std::printf("%ld FAILURES (seed %llu)\n", failures, static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("ALL PASSED (seed %llu)\n", static_cast<unsigned long long>(seed));
  return 0;
}
