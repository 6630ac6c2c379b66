// Validation of the fused bias/activation GEMM (target jax_sm100_gemm_bias), shared by its
// CUDA handler (ffi/src/gemm_bias_ffi.cu) and its CPU handler (ffi/src/cpu/gemm_bias_cpu.cc).
// No CUDA headers here.
//
//   (a, b, bias) -> (d, pre)   attrs trans_a, trans_b, block_m, block_n, cluster_m, group_m,
//                                    activation: i32
//
// a, b, d, the attributes but `activation`: jax_sm100_gemm's (validate_gemm), except that
// d (and pre) must have a's dtype or float32: the sm90 kernels are compiled for those pairs
// (a configuration the GPU would refuse is refused on the CPU too).
// bias: f32 of shape (N,), or (0,) for no bias. pre: d's shape and dtype, or (0,) for "not
// written". activation: kernels::Activation's value, 0..kNumActivations-1.
// Numerics: z = acc + bias[col] in fp32; pre = round(z); d = round(act(z)).
#pragma once

#include <cstdint>
#include <string>

#include "common/gemm_validate.h"
#include "jax_sm100/kernels/common/activation.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// The attribute's name for each activation value, in the order of kernels::Activation.
inline const char* activation_name(int32_t a) {
  static const char* const kNames[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kernels::kNumActivations);
  return a >= 0 && a < kernels::kNumActivations ? kNames[a] : "?";
}

/// "" when `activation` is a kernels::Activation value, else the error sentence naming the
/// valid ones (after `who`).
inline std::string activation_error(const std::string& who, int32_t activation) {
  if (activation >= 0 && activation < kernels::kNumActivations) return "";
  std::string valid;
  for (int32_t i = 0; i < kernels::kNumActivations; ++i)
    valid += (i ? ", " : "") + std::to_string(i) + " " + activation_name(i);
  return who + "activation must be one of " + valid + " (got " + std::to_string(activation) + ")";
}

/// validate_gemm plus the bias, pre and activation checks; fills pr.bias (null for a
/// (0,) bias), pr.pre (null for a (0,) pre) and pr.activation. Errors name `name`.
inline xla::ffi::Error validate_gemm_bias(const char* name, const xla::ffi::AnyBuffer& a,
                                          const xla::ffi::AnyBuffer& b,
                                          const xla::ffi::AnyBuffer& bias, xla::ffi::AnyBuffer* d,
                                          xla::ffi::AnyBuffer* pre, bool trans_a, bool trans_b,
                                          const GemmTiling& tiling, int32_t activation,
                                          GemmProblem* out) {
  using xla::ffi::Error;
  const std::string who = std::string(name) + ": ";
  const std::string act_err = activation_error(who, activation);
  if (!act_err.empty()) return Error::InvalidArgument(act_err);
  GemmProblem pr{};
  Error err = validate_gemm(name, a, b, nullptr, d, trans_a, trans_b, 1.0f, 0.0f, tiling, &pr);
  if (err.failure()) return err;
  if (pr.out_type != pr.in_type && pr.out_type != GemmDtype::kF32)
    return Error::InvalidArgument(who + "the output must have the inputs' dtype or float32 "
                                        "(no kernel writes float16 from bfloat16 or back)");

  auto bd = bias.dimensions();
  if (bias.element_type() != xla::ffi::DataType::F32 || bd.size() != 1 ||
      (bd[0] != pr.n && bd[0] != 0))
    return Error::InvalidArgument(who + "bias must be float32 of shape (N,) = (" +
                                  std::to_string(pr.n) + ",), or (0,) for no bias (got " +
                                  dims_str(bd) + ")");
  auto pd = pre->dimensions();
  auto dd = d->dimensions();
  const bool pre_empty = pd.size() == 1 && pd[0] == 0;
  bool pre_like_d = pre->element_type() == d->element_type() && pd.size() == dd.size();
  for (size_t i = 0; pre_like_d && i < pd.size(); ++i) pre_like_d = pd[i] == dd[i];
  if (!pre_empty && !pre_like_d)
    return Error::InvalidArgument(who + "pre must have the output's shape " + dims_str(dd) +
                                  " and dtype, or shape (0,) for not written (got " +
                                  dims_str(pd) + ")");
  pr.bias = bd[0] != 0 ? static_cast<const float*>(bias.untyped_data()) : nullptr;
  pr.pre = pre_empty ? nullptr : pre->untyped_data();
  pr.activation = activation;
  *out = pr;
  return Error::Success();
}

}  // namespace jax_sm100::host
