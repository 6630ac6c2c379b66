// CPU (XLA Host platform) handlers of "jax_sm100_fp8_gemm", "jax_sm100_fp8_gemm_residual"
// and "jax_sm100_fp8_gemm_bias": the CUDA handlers' contract (ffi/src/fp8_ffi.cu,
// ffi/src/fp8_bias_ffi.cu: operands, the transposed padded a_scale_t layout, attributes,
// validation and messages) computed by plain loops. Correctness, not speed.
//
//   a (M, K) e4m3, a_scale_t (ceil(K/128), round_up(M, 4)) f32 (pad columns unread),
//   b (N, K) e4m3, b_scale (ceil(N/128), ceil(K/128)) f32 [, c (M, N) bf16] -> d (M, N) bf16
//
// Numerics (the kernel's promotion): for each 128-wide K block kb, the block's dot of the
// decoded e4m3 values (exact products) is summed in fp32, then promoted:
//   acc = fma(a_scale[m, kb] * b_scale[n / 128, kb], partial, acc)
// and d = bf16_rn(fma(beta, c, acc)) with the residual term (beta == 0: c unread), else
// bf16_rn(acc); the bias target: d = bf16_rn(act(acc + bias[n])) (bias 0 without one).
// K == 0 (plain target): d = 0; the bias target refuses it, as its CUDA handler does. The tile attributes are validated as on the
// GPU (the residual forms when beta != 0), then ignored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/bindings.h"
#include "common/fp8_bias_validate.h"
#include "common/fp8_validate.h"
#include "jax_sm100/kernels/common/activation.h"
#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::Fp8GemmProblem;
using jax_sm100::kernels::Activation;
constexpr int64_t kBlock = 128;

/// d = the promoted product (+ beta * c), or with `bias` (null: none) and `act` the bias
/// target's act(acc + bias).
void run(const Fp8GemmProblem& p, const float* bias = nullptr, Activation act = Activation::kNone) {
  const auto* a = static_cast<const uint8_t*>(p.a);
  const auto* b = static_cast<const uint8_t*>(p.b);
  const auto* c = static_cast<const uint16_t*>(p.c);  // null: no residual term (or beta == 0)
  auto* d = static_cast<uint16_t*>(p.d);
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = jax_sm100::cpu::e4m3fn_to_f32(uint8_t(i));
  const int64_t m = p.m, n = p.n, k = p.k, kbs = (k + kBlock - 1) / kBlock;
  // b decoded as (K, N), so that the inner loop runs over contiguous n.
  std::vector<float> bt(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) bt[kk * n + j] = lut[b[j * k + kk]];
  std::vector<float> acc(static_cast<size_t>(n)), partial(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t kb = 0; kb < kbs; ++kb) {
      std::fill(partial.begin(), partial.end(), 0.0f);
      const int64_t k1 = std::min(k, (kb + 1) * kBlock);
      for (int64_t kk = kb * kBlock; kk < k1; ++kk) {
        const float av = lut[a[i * k + kk]];
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
      if (c != nullptr) v = std::fma(p.beta, jax_sm100::cpu::bf16_to_f32(c[i * n + j]), v);
      if (bias != nullptr) v += bias[j];
      if (act != Activation::kNone) v = jax_sm100::kernels::apply_activation(act, v);
      d[i * n + j] = jax_sm100::cpu::f32_to_bf16(v);
    }
  }
}

/// Validation (common/fp8_validate.h, as on the GPU) and computation shared by both
/// handlers; c is null for the plain target.
ffi::Error fp8_gemm_common(const char* name, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                           ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                           const ffi::Buffer<ffi::BF16>* c, float beta,
                           ffi::Result<ffi::Buffer<ffi::BF16>>& d, int32_t block_m,
                           int32_t block_n, int32_t cluster, bool pair_along_n, int32_t group_m) {
  Fp8GemmProblem o{};
  ffi::Error err = jax_sm100::host::validate_fp8_gemm(
      name, a, a_scale, b, b_scale, c, beta, *d,
      jax_sm100::host::Fp8Tiling{block_m, block_n, cluster, pair_along_n, group_m}, &o);
  if (err.failure() || o.empty()) return err;
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

ffi::Error fp8_gemm_bias_impl(ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                              ffi::AnyBuffer b_scale, ffi::AnyBuffer bias,
                              ffi::Result<ffi::Buffer<ffi::BF16>> d, int32_t block_m,
                              int32_t block_n, int32_t cluster, bool pair_along_n,
                              int32_t group_m, int32_t activation) {
  const char* name = "jax_sm100_fp8_gemm_bias";
  Fp8GemmProblem o{};
  const float* bias_ptr = nullptr;
  ffi::Error err = jax_sm100::host::validate_fp8_bias(
      name, a, a_scale, b, b_scale, bias, *d,
      jax_sm100::host::Fp8Tiling{block_m, block_n, cluster, pair_along_n, group_m}, activation,
      &o, &bias_ptr);
  if (err.failure() || o.empty()) return err;
  if (o.k == 0) return ffi::Error::InvalidArgument(std::string(name) + ": K must be positive");
  run(o, bias_ptr, static_cast<Activation>(activation));
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmCpu, fp8_gemm_impl,
                              bindings::fp8_gemm(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmResidualCpu, fp8_gemm_residual_impl,
                              bindings::fp8_gemm_residual(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmBiasCpu, fp8_gemm_bias_impl,
                              bindings::fp8_gemm_bias(ffi::Ffi::Bind()));
