// CPU (XLA Host platform) handler of "jax_sm100_mxfp8_gemm": the CUDA handler's contract
// (common/mxfp8_problem.h and mxfp8_validate.h: operands, the tiled scale layout,
// attributes, validation and messages) computed by plain loops. Correctness, not speed.
//
//   a (M, K), b (N, K) float8_e4m3fn / float8_e5m2; a_scale, b_scale float8_e8m0fnu in the
//   tiled layout (kernels/sm100/mx_scale_layout.h) -> d (M, N) bf16 / f16 / f32
//
// Numerics (the kernel's, as the emulator models its UMMA): every element and scale is
// decoded exactly (e4m3: bias 7, no infinities, S.1111.111 NaN; e5m2: bias 15, IEEE
// infinities and NaNs; e8m0: 2^(code - 127), code 255 NaN). For each 32-element K block
// the products a * b * 2^(sa - 127) * 2^(sb - 127) are summed exactly (in double: each
// product is exact there), the block's sum is added to the fp32 accumulator and rounded
// to fp32; d is the accumulator rounded once to d's type. K == 0: d = 0. The tile
// attributes are validated as on the GPU, then ignored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/bindings.h"
#include "common/mxfp8_validate.h"
#include "cpu/numerics.h"
#include "jax_sm100/kernels/sm100/mx_scale_layout.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::Mxfp8GemmProblem;
namespace ks = jax_sm100::kernels::sm100;

/// float8_e5m2 bits -> double (exact).
double e5m2_to_double(uint8_t b) {
  const bool neg = (b & 0x80) != 0;
  const int exp = (b >> 2) & 0x1f, man = b & 0x3;
  double v;
  if (exp == 0x1f) {
    v = man ? NAN : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(double(man), -16);  // subnormal: man * 2^(1 - 15 - 2)
  } else {
    v = std::ldexp(double(4 + man), exp - 17);  // (1 + man/4) * 2^(exp - 15)
  }
  return neg ? -v : v;
}

/// float8_e8m0fnu code -> its value 2^(code - 127) (code 255: NaN), exact in double.
double e8m0_to_double(uint8_t code) { return code == 0xff ? NAN : std::ldexp(1.0, int(code) - 127); }

/// The element decoding table of one format.
void element_table(bool e5m2, double (&lut)[256]) {
  for (int i = 0; i < 256; ++i)
    lut[i] = e5m2 ? e5m2_to_double(uint8_t(i)) : double(jax_sm100::cpu::e4m3fn_to_f32(uint8_t(i)));
}

/// The (rows, ceil(k / 32)) scale values of an operand, read from the tiled layout.
std::vector<double> untile_scales(const void* tiled, int64_t rows, int64_t k) {
  const auto* s = static_cast<const uint8_t*>(tiled);
  const int64_t kbs = (k + ks::kMxBlock - 1) / ks::kMxBlock, rt = ks::mx_scale_row_tiles(rows);
  std::vector<double> out(static_cast<size_t>(rows * kbs));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kb = 0; kb < kbs; ++kb) out[r * kbs + kb] = e8m0_to_double(s[ks::mx_scale_tiled_offset(r, kb, rt)]);
  return out;
}

void run(const Mxfp8GemmProblem& p) {
  const auto* a = static_cast<const uint8_t*>(p.a);
  const auto* b = static_cast<const uint8_t*>(p.b);
  double la[256], lb[256];
  element_table(p.a_e5m2, la);
  element_table(p.b_e5m2, lb);
  const int64_t m = p.m, n = p.n, k = p.k, kbs = (k + ks::kMxBlock - 1) / ks::kMxBlock;
  const std::vector<double> sa = untile_scales(p.a_scale, m, k), sb = untile_scales(p.b_scale, n, k);
  // b decoded once, row j contiguous in K.
  std::vector<double> bd(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n * k; ++i) bd[i] = lb[b[i]];
  std::vector<double> ar(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) ar[kk] = la[a[i * k + kk]];
    for (int64_t j = 0; j < n; ++j) {
      const double* br = &bd[j * k];
      float acc = 0.0f;
      for (int64_t kb = 0; kb < kbs; ++kb) {
        const int64_t k0 = kb * ks::kMxBlock, k1 = std::min(k, k0 + ks::kMxBlock);
        double block = 0.0;
        for (int64_t kk = k0; kk < k1; ++kk) block += ar[kk] * br[kk];
        acc = static_cast<float>(double(acc) + block * sa[i * kbs + kb] * sb[j * kbs + kb]);
      }
      jax_sm100::cpu::store(p.d, i * n + j, p.out_type, acc);
    }
  }
}

ffi::Error mxfp8_gemm_impl(ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                           ffi::Result<ffi::AnyBuffer> d, int32_t block_n, int32_t group_m) {
  Mxfp8GemmProblem o{};
  ffi::Error err =
      jax_sm100::host::validate_mxfp8_gemm("jax_sm100_mxfp8_gemm", a, a_scale, b, b_scale, *d, block_n, group_m, &o);
  if (err.failure() || o.empty()) return err;
  if (o.k == 0) {
    std::memset(o.d, 0, size_t(o.m * o.n) * jax_sm100::host::elem_bytes(o.out_type));
    return ffi::Error::Success();
  }
  run(o);
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Mxfp8GemmCpu, mxfp8_gemm_impl,
                              bindings::mxfp8_gemm(ffi::Ffi::Bind()));
