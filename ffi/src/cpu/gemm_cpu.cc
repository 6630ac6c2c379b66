// CPU (XLA Host platform) handlers of "jax_sm100_gemm" and "jax_sm100_gemm_residual":
// the CUDA handlers' contract (ffi/src/gemm_ffi.cu: operands, attributes, validation and
// messages) computed by plain loops, so that the launch layer, its padding, batching and
// partitioning run end to end on a CPU (JAX_SM100_BACKEND=cpu_ffi). Correctness, not speed.
//
// Numerics (the kernels'): every product of two bf16/f16 values is exact in fp32 and is
// accumulated in fp32 in K order; D = fma(beta, C, alpha * acc) in fp32, rounded once
// (to nearest even) to d's dtype. beta == 0: C is never read. K == 0: D = beta * C, or
// zeros. The tile attributes are validated as on the GPU, then ignored.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/bindings.h"
#include "common/gemm_validate.h"
#include "cpu/gemm_rows.h"
#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::GemmProblem;
using Problem = GemmProblem;

/// D of one batch entry: alpha * acc (+ beta * C) per element, rounded once.
void run_batch(const Problem& p, int64_t bi) {
  const int64_t n = p.n;
  const int64_t c_off = p.c_batched ? bi * p.m * n : 0;
  const int64_t d_off = bi * p.m * n;
  jax_sm100::cpu::for_each_row(p, bi, [&](int64_t i, const float* acc) {
    for (int64_t j = 0; j < n; ++j) {
      float v = p.alpha * acc[j];
      if (p.c != nullptr) v = std::fma(p.beta, jax_sm100::cpu::load(p.c, c_off + i * n + j, p.out_type), v);
      jax_sm100::cpu::store(p.d, d_off + i * n + j, p.out_type, v);
    }
  });
}

/// K == 0: nothing to contract, D = beta * C (residual term) or zeros.
void fill_without_product(const Problem& p) {
  const int64_t per = p.m * p.n, total = p.batch * per;
  if (p.c == nullptr) {
    std::memset(p.d, 0, size_t(total * jax_sm100::host::elem_bytes(p.out_type)));
    return;
  }
  for (int64_t i = 0; i < total; ++i) {
    const int64_t ci = p.c_batched ? i : i % per;
    jax_sm100::cpu::store(p.d, i, p.out_type, p.beta * jax_sm100::cpu::load(p.c, ci, p.out_type));
  }
}

/// Validation (common/gemm_validate.h, as on the GPU) and the computation, shared by both
/// handlers. `c` is null for the plain GEMM.
ffi::Error gemm_common(const char* name, const ffi::AnyBuffer& a, const ffi::AnyBuffer& b,
                       const ffi::AnyBuffer* c, ffi::AnyBuffer* d, bool trans_a, bool trans_b,
                       float alpha, float beta, int32_t block_m, int32_t block_n,
                       int32_t cluster_m, int32_t group_m, int32_t split_k) {
  Problem pr{};
  ffi::Error err = jax_sm100::host::validate_gemm(
      name, a, b, c, d, trans_a, trans_b, alpha, beta,
      jax_sm100::host::GemmTiling{block_m, block_n, cluster_m, group_m, split_k}, &pr);
  if (err.failure() || pr.empty()) return err;
  if (pr.k == 0) {
    fill_without_product(pr);
  } else {
    for (int64_t bi = 0; bi < pr.batch; ++bi) run_batch(pr, bi);
  }
  return ffi::Error::Success();
}

ffi::Error gemm_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> d,
                     bool trans_a, bool trans_b, int32_t block_m, int32_t block_n,
                     int32_t cluster_m, int32_t group_m, int32_t split_k) {
  return gemm_common("jax_sm100_gemm", a, b, nullptr, &(*d), trans_a, trans_b, 1.0f, 0.0f,
                     block_m, block_n, cluster_m, group_m, split_k);
}

ffi::Error gemm_residual_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer c,
                              ffi::Result<ffi::AnyBuffer> d, bool trans_a, bool trans_b,
                              float alpha, float beta, int32_t block_m, int32_t block_n,
                              int32_t cluster_m, int32_t group_m, int32_t split_k) {
  return gemm_common("jax_sm100_gemm_residual", a, b, &c, &(*d), trans_a, trans_b, alpha, beta,
                     block_m, block_n, cluster_m, group_m, split_k);
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmCpu, gemm_impl,
                              bindings::gemm(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmResidualCpu, gemm_residual_impl,
                              bindings::gemm_residual(ffi::Ffi::Bind()));
