// CPU (XLA Host platform) handlers of "jax_sm100_fp8_gemm" and
// "jax_sm100_fp8_gemm_residual": the CUDA handlers' contract (ffi/src/fp8_ffi.cu:
// operands, the transposed padded a_scale_t layout, attributes, validation and messages)
// computed by plain loops. Correctness, not speed.
//
//   a (M, K) e4m3, a_scale_t (ceil(K/128), round_up(M, 4)) f32 (pad columns unread),
//   b (N, K) e4m3, b_scale (ceil(N/128), ceil(K/128)) f32 [, c (M, N) bf16] -> d (M, N) bf16
//
// Numerics (the kernel's promotion): for each 128-wide K block kb, the block's dot of the
// decoded e4m3 values (exact products) is summed in fp32, then promoted:
//   acc = fma(a_scale[m, kb] * b_scale[n / 128, kb], partial, acc)
// and d = bf16_rn(fma(beta, c, acc)) with the residual term (beta == 0: c unread), else
// bf16_rn(acc). K == 0 (plain target): d = 0. The tile attributes are validated as on the
// GPU (the residual forms when beta != 0), then ignored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/ffi_checks.h"
#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::dims_str;
constexpr int64_t kBlock = 128;

struct Fp8Problem {
  int64_t m, n, k, mp;
  const uint8_t* a;
  const float* a_scale_t;
  const uint8_t* b;
  const float* b_scale;
  const uint16_t* c;  // null: no residual term (or beta == 0)
  float beta;
  uint16_t* d;
};

void run(const Fp8Problem& p) {
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = jax_sm100::cpu::e4m3fn_to_f32(uint8_t(i));
  const int64_t m = p.m, n = p.n, k = p.k, kbs = (k + kBlock - 1) / kBlock;
  // b decoded as (K, N), so that the inner loop runs over contiguous n.
  std::vector<float> bt(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) bt[kk * n + j] = lut[p.b[j * k + kk]];
  std::vector<float> acc(static_cast<size_t>(n)), partial(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t kb = 0; kb < kbs; ++kb) {
      std::fill(partial.begin(), partial.end(), 0.0f);
      const int64_t k1 = std::min(k, (kb + 1) * kBlock);
      for (int64_t kk = kb * kBlock; kk < k1; ++kk) {
        const float av = lut[p.a[i * k + kk]];
        const float* brow = &bt[kk * n];
        for (int64_t j = 0; j < n; ++j) partial[j] += av * brow[j];
      }
      const float sa = p.a_scale_t[kb * p.mp + i];
      for (int64_t j = 0; j < n; ++j) {
        const float s = sa * p.b_scale[(j / kBlock) * kbs + kb];
        acc[j] = std::fma(s, partial[j], acc[j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      float v = acc[j];
      if (p.c != nullptr) v = std::fma(p.beta, jax_sm100::cpu::bf16_to_f32(p.c[i * n + j]), v);
      p.d[i * n + j] = jax_sm100::cpu::f32_to_bf16(v);
    }
  }
}

/// Shape/dtype validation shared by both targets (as in fp8_ffi.cu); fills `o`.
ffi::Error validate(const std::string& who, ffi::AnyBuffer a, ffi::AnyBuffer a_scale_t,
                    ffi::AnyBuffer b, ffi::AnyBuffer b_scale, ffi::Span<const int64_t> dd,
                    Fp8Problem& o) {
  if (a.element_type() != ffi::F8E4M3FN || b.element_type() != ffi::F8E4M3FN)
    return ffi::Error::InvalidArgument(who + "a and b must be float8_e4m3fn");
  if (a_scale_t.element_type() != ffi::F32 || b_scale.element_type() != ffi::F32)
    return ffi::Error::InvalidArgument(who + "a_scale and b_scale must be float32");
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 2 || ad[1] != bd[1])
    return ffi::Error::InvalidArgument(who + "a must be (M, K) and b (N, K) with the same K; got a " +
                                       dims_str(ad) + ", b " + dims_str(bd));
  o.m = ad[0];
  o.k = ad[1];
  o.n = bd[0];
  o.mp = (o.m + 3) / 4 * 4;
  const int64_t kb = (o.k + 127) / 128, nb = (o.n + 127) / 128;
  auto sad = a_scale_t.dimensions(), sbd = b_scale.dimensions();
  if (sad.size() != 2 || sad[0] != kb || sad[1] != o.mp)
    return ffi::Error::InvalidArgument(
        who + "a_scale must be given transposed and padded, shape "
              "(ceil(K/128), round_up(M, 4)) = (" + std::to_string(kb) + ", " +
        std::to_string(o.mp) + "); got " + dims_str(sad));
  if (sbd.size() != 2 || sbd[0] != nb || sbd[1] != kb)
    return ffi::Error::InvalidArgument(who + "b_scale must have shape (ceil(N/128), ceil(K/128)) = (" +
                                       std::to_string(nb) + ", " + std::to_string(kb) + "); got " +
                                       dims_str(sbd));
  if (dd.size() != 2 || dd[0] != o.m || dd[1] != o.n)
    return ffi::Error::InvalidArgument(who + "d must have shape (M, N)");
  if (o.k % 16 != 0 || o.n % 8 != 0)
    return ffi::Error::InvalidArgument(
        who + "K must be a multiple of 16 and N a multiple of 8 (TMA row alignment); pad "
              "the operands (zeros in K change nothing)");
  if (o.k > jax_sm100::host::kFp8MaxK)
    return ffi::Error::InvalidArgument(who + "K must be <= " +
                                       std::to_string(jax_sm100::host::kFp8MaxK));
  if (o.m > INT32_MAX / 2 || o.n > INT32_MAX / 2)
    return ffi::Error::InvalidArgument(who + "M and N must fit in int32");
  o.a = static_cast<const uint8_t*>(a.untyped_data());
  o.a_scale_t = static_cast<const float*>(a_scale_t.untyped_data());
  o.b = static_cast<const uint8_t*>(b.untyped_data());
  o.b_scale = static_cast<const float*>(b_scale.untyped_data());
  o.c = nullptr;
  o.beta = 0.0f;
  return ffi::Error::Success();
}

/// Validation and computation shared by both handlers; c is null for the plain target.
ffi::Error fp8_gemm_common(const char* name, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                           ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                           const ffi::Buffer<ffi::BF16>* c, float beta,
                           ffi::Result<ffi::Buffer<ffi::BF16>>& d, int32_t block_m,
                           int32_t block_n, int32_t cluster, bool pair_along_n, int32_t group_m) {
  const std::string who = std::string(name) + ": ";
  // beta == 0: C is not read at all (a NaN in C must not leak into D).
  const bool residual = c != nullptr && beta != 0.0f;
  const std::string tiling_err = jax_sm100::host::check_fp8_tiling(
      block_m, block_n, cluster, pair_along_n, group_m, residual);
  if (!tiling_err.empty()) return ffi::Error::InvalidArgument(who + tiling_err);
  Fp8Problem o{};
  ffi::Error err = validate(who, a, a_scale, b, b_scale, d->dimensions(), o);
  if (err.failure()) return err;
  if (c != nullptr) {
    auto cd = c->dimensions();
    if (cd.size() != 2 || cd[0] != o.m || cd[1] != o.n)
      return ffi::Error::InvalidArgument(who + "c must have shape (M, N)");
    if (o.k == 0 && o.m != 0 && o.n != 0)
      return ffi::Error::InvalidArgument(who + "K must be positive");
    if (residual) o.c = reinterpret_cast<const uint16_t*>(c->untyped_data());
    o.beta = beta;
  }
  o.d = reinterpret_cast<uint16_t*>(d->untyped_data());
  if (o.m == 0 || o.n == 0) return ffi::Error::Success();
  if (o.k == 0) {  // empty contraction (plain target only): D = 0
    std::memset(o.d, 0, size_t(o.m * o.n) * 2);
    return ffi::Error::Success();
  }
  run(o);
  return ffi::Error::Success();
}

ffi::Error fp8_gemm_impl(ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                         ffi::AnyBuffer b_scale, ffi::Result<ffi::Buffer<ffi::BF16>> d,
                         int32_t block_m, int32_t block_n, int32_t cluster, bool pair_along_n,
                         int32_t group_m) {
  return fp8_gemm_common("jax_sm100_fp8_gemm", a, a_scale, b, b_scale, nullptr, 0.0f, d, block_m,
                         block_n, cluster, pair_along_n, group_m);
}

ffi::Error fp8_gemm_residual_impl(ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                                  ffi::AnyBuffer b_scale, ffi::Buffer<ffi::BF16> c,
                                  ffi::Result<ffi::Buffer<ffi::BF16>> d, float beta,
                                  int32_t block_m, int32_t block_n, int32_t cluster,
                                  bool pair_along_n, int32_t group_m) {
  return fp8_gemm_common("jax_sm100_fp8_gemm_residual", a, a_scale, b, b_scale, &c, beta, d,
                         block_m, block_n, cluster, pair_along_n, group_m);
}

}  // namespace

#define JAX_SM100_FP8_CPU_OPERANDS \
  ffi::Ffi::Bind()                 \
      .Arg<ffi::AnyBuffer>()       \
      .Arg<ffi::AnyBuffer>()       \
      .Arg<ffi::AnyBuffer>()       \
      .Arg<ffi::AnyBuffer>()
#define JAX_SM100_FP8_CPU_TILING_ATTRS \
  .Attr<int32_t>("block_m")            \
      .Attr<int32_t>("block_n")        \
      .Attr<int32_t>("cluster")        \
      .Attr<bool>("pair_along_n")      \
      .Attr<int32_t>("group_m")

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmCpu, fp8_gemm_impl,
                              JAX_SM100_FP8_CPU_OPERANDS.Ret<ffi::Buffer<ffi::BF16>>()
                                  JAX_SM100_FP8_CPU_TILING_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmResidualCpu, fp8_gemm_residual_impl,
                              JAX_SM100_FP8_CPU_OPERANDS.Arg<ffi::Buffer<ffi::BF16>>()
                                  .Ret<ffi::Buffer<ffi::BF16>>()
                                  .Attr<float>("beta") JAX_SM100_FP8_CPU_TILING_ATTRS);
