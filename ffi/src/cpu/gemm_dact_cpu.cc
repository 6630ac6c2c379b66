// CPU (XLA Host platform) handler of "jax_sm100_gemm_dact": the CUDA handler's contract
// (ffi/src/gemm_dact_ffi.cu; validation in common/gemm_dact_validate.h) computed by plain
// loops, for JAX_SM100_BACKEND=cpu_ffi. Correctness, not speed.
//
// Numerics (the kernel epilogue's): the products of bf16/f16 values are exact in fp32 and
// accumulated in fp32 in K order; x = acc * act'(c) in fp32 (kernels/common/activation.h,
// the function the GPU epilogue calls), d = round(x) (to nearest even), dbias[j] += x in
// fp32 (row order; the kernel's order of additions differs). The tile attributes are
// validated as on the GPU, then ignored.
#include <algorithm>
#include <cstdint>

#include "common/bindings.h"
#include "common/gemm_dact_validate.h"
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
  const int64_t c_off = p.c_batched ? bi * p.m * n : 0;
  const Activation act = static_cast<Activation>(p.activation);
  jax_sm100::cpu::for_each_row(p, bi, [&](int64_t i, const float* acc) {
    for (int64_t j = 0; j < n; ++j) {
      const float z = jax_sm100::cpu::load(p.c, c_off + i * n + j, p.out_type);
      const float x = acc[j] * jax_sm100::kernels::activation_grad(act, z);
      jax_sm100::cpu::store(p.d, d_off + i * n + j, p.out_type, x);
      if (p.dbias != nullptr) p.dbias[j] += x;
    }
  });
}

ffi::Error gemm_dact_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer c,
                          ffi::Result<ffi::AnyBuffer> d, ffi::Result<ffi::AnyBuffer> dbias,
                          bool trans_a, bool trans_b, int32_t block_m, int32_t block_n,
                          int32_t cluster_m, int32_t group_m, int32_t split_k, int32_t activation) {
  GemmProblem pr{};
  ffi::Error err = jax_sm100::host::validate_gemm_dact(
      "jax_sm100_gemm_dact", a, b, c, &(*d), &(*dbias), trans_a, trans_b,
      jax_sm100::host::GemmTiling{block_m, block_n, cluster_m, group_m, split_k}, activation, &pr);
  if (err.failure()) return err;
  if (pr.dbias != nullptr) std::fill(pr.dbias, pr.dbias + pr.n, 0.0f);
  if (pr.empty()) return err;
  for (int64_t bi = 0; bi < pr.batch; ++bi) run_batch(pr, bi);
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmDactCpu, gemm_dact_impl,
                              bindings::gemm_dact(ffi::Ffi::Bind()));
