// CPU (XLA Host platform) handlers of the grouped (mixture-of-experts) GEMM targets: the
// CUDA handlers' contract (ffi/src/grouped_ffi.cu: operands, attributes, validation and
// messages, common/grouped_problem.h) computed by plain loops, so that the grouped ops'
// launch layer and custom_vjp run end to end on a CPU (JAX_SM100_BACKEND=cpu_ffi).
// Correctness, not speed.
//
//   jax_sm100_grouped_gemm:      lhs (M, K), rhs (G, K, N) or (G, N, K) [trans_rhs],
//                                group_sizes (G,) i32 -> out (M, N)
//   jax_sm100_kgrouped_gemm:     lhs (M, K), dy (M, N), group_sizes (G,) i32 -> out (G, K, N)
//   jax_sm100_fp8_grouped_gemm:  a (M, K) e4m3, a_scale_t (ceil(K/128), round_up(M, 4)) f32,
//                                b (G, N, K) e4m3, b_scale (G, ceil(N/128), ceil(K/128)) f32,
//                                group_sizes (G,) i32 -> out (M, N) bf16
//
// Groups: common/grouped_problem.h (group_row_bounds). Rows in no group are zeros in the
// M-grouped outputs; an empty group's K-grouped slice is zeros.
// Numerics (the kernels'): bf16/f16 products are exact in fp32 and summed in fp32 (M-grouped:
// in K order; K-grouped: in row order), rounded once to the output type. FP8: per 128-wide K
// block the exact e4m3 products are summed in fp32, then promoted with
// acc = fma(a_scale * b_scale, partial, acc), as the dense FP8 GEMM does; bf16_rn(acc).
// The tile attributes are validated as on the GPU, then ignored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/bindings.h"
#include "common/grouped_validate.h"
#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::Fp8GroupedGemmProblem;
using jax_sm100::host::GroupedGemmProblem;
using jax_sm100::host::GroupedTiling;
using jax_sm100::host::KGroupedGemmProblem;
using jax_sm100::cpu::load;
using jax_sm100::cpu::store;
constexpr int64_t kBlock = 128;

std::vector<int64_t> bounds_of(const int32_t* sizes, int64_t g, int64_t m) {
  std::vector<int64_t> b(static_cast<size_t>(g + 1));
  jax_sm100::host::group_row_bounds(sizes, g, m, b.data());
  return b;
}

void zero(void* p, int64_t elems, jax_sm100::host::ElemType t) {
  std::memset(p, 0, size_t(elems) * jax_sm100::host::elem_bytes(t));
}

void run_grouped(const GroupedGemmProblem& p) {
  const int64_t m = p.m, n = p.n, k = p.k;
  const std::vector<int64_t> bounds = bounds_of(p.group_sizes, p.g, m);
  zero(p.out, m * n, p.out_type);  // rows in no group stay zero
  std::vector<float> bt(static_cast<size_t>(k * n)), acc(static_cast<size_t>(n));
  for (int64_t g = 0; g < p.g; ++g) {
    if (bounds[g + 1] == bounds[g]) continue;  // an empty group costs nothing
    // rhs[g] as fp32 (K, N), so that the inner loop runs over contiguous n.
    const int64_t off = g * k * n;
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < n; ++j)
        bt[kk * n + j] = load(p.rhs, off + (p.trans_rhs ? j * k + kk : kk * n + j), p.in_type);
    for (int64_t i = bounds[g]; i < bounds[g + 1]; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = load(p.lhs, i * k + kk, p.in_type);
        const float* brow = &bt[kk * n];
        for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];  // exact product, fp32 sum
      }
      for (int64_t j = 0; j < n; ++j) store(p.out, i * n + j, p.out_type, acc[j]);
    }
  }
}

void run_kgrouped(const KGroupedGemmProblem& p) {
  const int64_t k = p.k, n = p.n;
  const std::vector<int64_t> bounds = bounds_of(p.group_sizes, p.g, p.m);
  std::vector<float> acc(static_cast<size_t>(k * n)), dyrow(static_cast<size_t>(n));
  for (int64_t g = 0; g < p.g; ++g) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t r = bounds[g]; r < bounds[g + 1]; ++r) {
      for (int64_t j = 0; j < n; ++j) dyrow[j] = load(p.dy, r * n + j, p.in_type);
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = load(p.lhs, r * k + kk, p.in_type);
        float* out_row = &acc[kk * n];
        for (int64_t j = 0; j < n; ++j) out_row[j] += av * dyrow[j];
      }
    }
    for (int64_t i = 0; i < k * n; ++i) store(p.out, g * k * n + i, p.out_type, acc[i]);
  }
}

void run_fp8_grouped(const Fp8GroupedGemmProblem& p) {
  const auto* a = static_cast<const uint8_t*>(p.a);
  const auto* b = static_cast<const uint8_t*>(p.b);
  auto* out = static_cast<uint16_t*>(p.out);
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = jax_sm100::cpu::e4m3fn_to_f32(uint8_t(i));
  const int64_t m = p.m, n = p.n, k = p.k, kbs = (k + kBlock - 1) / kBlock;
  const int64_t nbs = (n + kBlock - 1) / kBlock;
  const std::vector<int64_t> bounds = bounds_of(p.group_sizes, p.g, m);
  std::memset(out, 0, size_t(m * n) * 2);  // rows in no group stay zero
  std::vector<float> bt(static_cast<size_t>(k * n));
  std::vector<float> acc(static_cast<size_t>(n)), partial(static_cast<size_t>(n));
  for (int64_t g = 0; g < p.g; ++g) {
    if (bounds[g + 1] == bounds[g]) continue;
    const uint8_t* bg = b + g * n * k;
    const float* sg = p.b_scale + g * nbs * kbs;
    for (int64_t j = 0; j < n; ++j)  // b[g] decoded as (K, N)
      for (int64_t kk = 0; kk < k; ++kk) bt[kk * n + j] = lut[bg[j * k + kk]];
    for (int64_t i = bounds[g]; i < bounds[g + 1]; ++i) {
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
        for (int64_t j = 0; j < n; ++j)
          acc[j] = std::fma(sa * sg[(j / kBlock) * kbs + kb], partial[j], acc[j]);
      }
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = jax_sm100::cpu::f32_to_bf16(acc[j]);
    }
  }
}

ffi::Error grouped_gemm_impl(ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer group_sizes,
                             ffi::Result<ffi::AnyBuffer> out, bool trans_rhs, int32_t block_m,
                             int32_t block_n) {
  GroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_grouped_gemm(
      "jax_sm100_grouped_gemm", lhs, rhs, group_sizes, &(*out), trans_rhs,
      GroupedTiling{block_m, block_n}, &p);
  if (err.failure() || jax_sm100::host::grouped_empty(p)) return err;
  if (jax_sm100::host::grouped_all_zero(p)) {
    zero(p.out, p.m * p.n, p.out_type);
    return ffi::Error::Success();
  }
  run_grouped(p);
  return ffi::Error::Success();
}

ffi::Error kgrouped_gemm_impl(ffi::AnyBuffer lhs, ffi::AnyBuffer dy, ffi::AnyBuffer group_sizes,
                              ffi::Result<ffi::AnyBuffer> out, int32_t block_m, int32_t block_n) {
  KGroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_kgrouped_gemm(
      "jax_sm100_kgrouped_gemm", lhs, dy, group_sizes, &(*out), GroupedTiling{block_m, block_n},
      &p);
  if (err.failure() || jax_sm100::host::grouped_empty(p)) return err;
  if (jax_sm100::host::grouped_all_zero(p)) {
    zero(p.out, p.g * p.k * p.n, p.out_type);
    return ffi::Error::Success();
  }
  run_kgrouped(p);
  return ffi::Error::Success();
}

ffi::Error fp8_grouped_gemm_impl(ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                                 ffi::AnyBuffer b_scale, ffi::AnyBuffer group_sizes,
                                 ffi::Result<ffi::Buffer<ffi::BF16>> out, int32_t block_m,
                                 int32_t block_n) {
  Fp8GroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_fp8_grouped_gemm(
      "jax_sm100_fp8_grouped_gemm", a, a_scale, b, b_scale, group_sizes, *out,
      GroupedTiling{block_m, block_n}, &p);
  if (err.failure() || jax_sm100::host::grouped_empty(p)) return err;
  if (jax_sm100::host::grouped_all_zero(p)) {
    std::memset(p.out, 0, size_t(p.m * p.n) * 2);
    return ffi::Error::Success();
  }
  run_fp8_grouped(p);
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GroupedGemmCpu, grouped_gemm_impl,
                              bindings::grouped_gemm(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100KGroupedGemmCpu, kgrouped_gemm_impl,
                              bindings::kgrouped_gemm(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GroupedGemmCpu, fp8_grouped_gemm_impl,
                              bindings::fp8_grouped_gemm(ffi::Ffi::Bind()));
