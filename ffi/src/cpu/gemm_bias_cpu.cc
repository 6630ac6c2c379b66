// CPU (XLA Host platform) handler of "jax_sm100_gemm_bias": the CUDA handler's contract
// (ffi/src/gemm_bias_ffi.cu; validation in common/gemm_bias_validate.h) computed by plain
// loops, for JAX_SM100_BACKEND=cpu_ffi. Correctness, not speed.
//
// Numerics (the kernel epilogue's): the products of bf16/f16 values are exact in fp32 and
// accumulated in fp32 in K order; z = acc + bias[col] in fp32; pre = z and d = act(z)
// (kernels/common/activation.h, the same function the GPU epilogue calls), each rounded
// once (to nearest even) to d's dtype. K == 0: z = bias[col] (or 0). The tile attributes
// are validated as on the GPU, then ignored.
#include <cstdint>

#include "common/bindings.h"
#include "common/gemm_bias_validate.h"
#include "cpu/gemm_rows.h"
#include "cpu/numerics.h"
#include "jax_sm100/kernels/common/activation.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::GemmProblem;
using jax_sm100::kernels::Activation;

/// One batch entry: the epilogue on each row's fp32 accumulators.
void run_batch(const GemmProblem& p, int64_t bi) {
  const int64_t n = p.n, d_off = bi * p.m * n;
  const Activation act = static_cast<Activation>(p.activation);
  jax_sm100::cpu::for_each_row(p, bi, [&](int64_t i, const float* acc) {
    for (int64_t j = 0; j < n; ++j) {
      const float z = p.bias != nullptr ? acc[j] + p.bias[j] : acc[j];
      if (p.pre != nullptr) jax_sm100::cpu::store(p.pre, d_off + i * n + j, p.out_type, z);
      jax_sm100::cpu::store(p.d, d_off + i * n + j, p.out_type,
                            jax_sm100::kernels::apply_activation(act, z));
    }
  });
}

ffi::Error gemm_bias_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer bias,
                          ffi::Result<ffi::AnyBuffer> d, ffi::Result<ffi::AnyBuffer> pre,
                          bool trans_a, bool trans_b, int32_t block_m, int32_t block_n,
                          int32_t cluster_m, int32_t group_m, int32_t split_k, int32_t activation) {
  GemmProblem pr{};
  ffi::Error err = jax_sm100::host::validate_gemm_bias(
      "jax_sm100_gemm_bias", a, b, bias, &(*d), &(*pre), trans_a, trans_b,
      jax_sm100::host::GemmTiling{block_m, block_n, cluster_m, group_m, split_k}, activation, &pr);
  if (err.failure() || pr.empty()) return err;
  // K == 0 needs no special case: the accumulators stay 0 and the epilogue still runs.
  for (int64_t bi = 0; bi < pr.batch; ++bi) run_batch(pr, bi);
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmBiasCpu, gemm_bias_impl,
                              bindings::gemm_bias(ffi::Ffi::Bind()));
