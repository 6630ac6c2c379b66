// Validation of the FP8 bias/activation GEMM (target jax_sm100_fp8_gemm_bias), shared by
// its CUDA handler (ffi/src/fp8_bias_ffi.cu) and its CPU handler (ffi/src/cpu/
// fp8_gemm_cpu.cc). No CUDA headers here.
//
//   (a, a_scale_t, b, b_scale, bias) -> d (bf16)
//   attrs block_m, block_n, cluster, pair_along_n, group_m, activation: i32
//
// a, a_scale_t, b, b_scale, d and the tiling attributes: jax_sm100_fp8_gemm's
// (validate_fp8_gemm, no residual). bias: f32 of shape (N,), or (0,) for no bias.
// activation: kernels::Activation's value, 0..kNumActivations-1.
// Numerics: z = acc + bias[col] in fp32 (acc the FP8 GEMM's promoted fp32 sum);
// d = bf16_rn(act(z)).
#pragma once

#include <cstdint>
#include <string>

#include "common/fp8_validate.h"
#include "common/gemm_bias_validate.h"  // activation_error
#include "jax_sm100/kernels/common/activation.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// validate_fp8_gemm (no residual) plus the bias and activation checks; *bias_out is the
/// bias (null for a (0,) bias). Errors name `name`.
inline xla::ffi::Error validate_fp8_bias(const char* name, const xla::ffi::AnyBuffer& a,
                                         const xla::ffi::AnyBuffer& a_scale_t,
                                         const xla::ffi::AnyBuffer& b,
                                         const xla::ffi::AnyBuffer& b_scale,
                                         const xla::ffi::AnyBuffer& bias,
                                         xla::ffi::Buffer<xla::ffi::BF16>& d, const Fp8Tiling& tiling,
                                         int32_t activation, Fp8GemmProblem* out,
                                         const float** bias_out) {
  using xla::ffi::Error;
  const std::string who = std::string(name) + ": ";
  const std::string act_err = activation_error(who, activation);
  if (!act_err.empty()) return Error::InvalidArgument(act_err);
  Fp8GemmProblem o{};
  Error err = validate_fp8_gemm(name, a, a_scale_t, b, b_scale, nullptr, 0.0f, d, tiling, &o);
  if (err.failure()) return err;
  auto bd = bias.dimensions();
  if (bias.element_type() != xla::ffi::DataType::F32 || bd.size() != 1 ||
      (bd[0] != o.n && bd[0] != 0))
    return Error::InvalidArgument(who + "bias must be float32 of shape (N,) = (" +
                                  std::to_string(o.n) + ",), or (0,) for no bias (got " +
                                  dims_str(bd) + ")");
  *bias_out = bd[0] != 0 ? static_cast<const float*>(bias.untyped_data()) : nullptr;
  *out = o;
  return Error::Success();
}

}  // namespace jax_sm100::host
