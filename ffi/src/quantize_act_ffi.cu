// XLA FFI handlers of the quantizers with a prologue: a layer's activation, or its
// backward, applied to each element as the dual quantizer reads it (no pass of its own).
//
// "jax_sm100_quantize_fp8_act_dual":   z (R, C) bf16 | f16 | f32 -> Q(d) and Q(d^T), both in
//     1x128 blocks (the dual target's q, scale, qt, scale_t with block_rows = t_block_rows =
//     1), d = act(z) rounded to z's dtype: the next layer's FP8 input and its transpose
//     for the weight gradient, without d itself.
//     attrs: activation (1 relu, 2 gelu_tanh, 3 gelu_erf, 4 silu), scale_transposed,
//     scale_t_transposed (the dual target's).
// "jax_sm100_quantize_fp8_dact_dual":  g, z (R, C) -> Q(dz) in 1x128 blocks, Q(dz^T) in
//     128x128 blocks (block_rows 1, t_block_rows 128), and col_sums (ceil(R/128), C) f32:
//     dz = g * act'(z) rounded to g's dtype, col_sums[b, j] = the fp32 sum of dz[i, j] over
//     the rows i of 128-row block b (the bias gradient is their sum over b).
//     attrs: activation (0 none: dz = g, or 1..4 as above), scale_transposed.
// The activations and their derivatives are kernels/common/activation.h's (the GEMM
// epilogues' device forms); the kernel is quantize_dual_kernel's Prologue
// (kernels/common/quantize_fp8.cuh). Validation: common/quantize_problem.h, shared with
// the CPU handlers (cpu/quantize_cpu.cc). Plain CUDA: built for every architecture of the
// build; on sm_100a (never run on hardware here) the fp8_quantize self-test family's
// first-use cases (relu, exact) guard them.
// Graph-safe: no allocation, no host synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/bindings.h"
#include "common/quantize_dual_launch.cuh"
#include "common/quantize_problem.h"
#include "jax_sm100/kernels/common/activation.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::launch_dual;
using jax_sm100::host::launch_for_input_type;
using jax_sm100::host::QuantizeProblem;
using jax_sm100::kernels::Activation;
using jax_sm100::kernels::quant::kBlock;
using jax_sm100::kernels::quant::Prologue;

/// launch(std::integral_constant<Activation, A>{}) for the run-time activation code.
template <class F>
cudaError_t with_activation(int32_t code, F launch) {
  switch (code) {
    case 1: return launch(std::integral_constant<Activation, Activation::kRelu>{});
    case 2: return launch(std::integral_constant<Activation, Activation::kGeluTanh>{});
    case 3: return launch(std::integral_constant<Activation, Activation::kGeluErf>{});
    case 4: return launch(std::integral_constant<Activation, Activation::kSilu>{});
    default: return launch(std::integral_constant<Activation, Activation::kNone>{});
  }
}

ffi::Error act_dual_impl(cudaStream_t stream, ffi::AnyBuffer z, int32_t activation,
                         int32_t scale_transposed, int32_t scale_t_transposed,
                         ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale,
                         ffi::Result<ffi::AnyBuffer> qt, ffi::Result<ffi::Buffer<ffi::F32>> scale_t) {
  const char* op = "jax_sm100_quantize_fp8_act_dual";
  QuantizeProblem p{};
  ffi::Error verr = jax_sm100::host::validate_quantize_prologue(
      op, z, nullptr, activation, scale_transposed, scale_t_transposed, *q, *scale, *qt, *scale_t,
      nullptr, &p);
  if (verr.failure() || p.empty()) return verr;
  return launch_for_input_type(op, z.element_type(), [&](auto type) {
    using T = decltype(type);
    return with_activation(activation, [&](auto act) {
      constexpr Activation A = decltype(act)::value;
      if constexpr (A == Activation::kNone) {
        return cudaErrorInvalidValue;  // refused by the validation
      } else {
        return launch_dual<T, 1, 1, Prologue::kAct, A>(stream, p, z.untyped_data(), q->untyped_data(),
                                                       scale->typed_data(), qt->untyped_data(),
                                                       scale_t->typed_data());
      }
    });
  });
}

ffi::Error dact_dual_impl(cudaStream_t stream, ffi::AnyBuffer g, ffi::AnyBuffer z, int32_t activation,
                          int32_t scale_transposed, ffi::Result<ffi::AnyBuffer> q,
                          ffi::Result<ffi::Buffer<ffi::F32>> scale, ffi::Result<ffi::AnyBuffer> qt,
                          ffi::Result<ffi::Buffer<ffi::F32>> scale_t,
                          ffi::Result<ffi::Buffer<ffi::F32>> col_sums) {
  const char* op = "jax_sm100_quantize_fp8_dact_dual";
  QuantizeProblem p{};
  ffi::Error verr = jax_sm100::host::validate_quantize_prologue(
      op, g, &z, activation, scale_transposed, 0, *q, *scale, *qt, *scale_t, &(*col_sums), &p);
  if (verr.failure() || p.empty()) return verr;
  return launch_for_input_type(op, g.element_type(), [&](auto type) {
    using T = decltype(type);
    return with_activation(activation, [&](auto act) {
      return launch_dual<T, 1, kBlock, Prologue::kDact, decltype(act)::value>(
          stream, p, g.untyped_data(), q->untyped_data(), scale->typed_data(), qt->untyped_data(),
          scale_t->typed_data(), z.untyped_data(), col_sums->typed_data());
    });
  });
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8ActDual, act_dual_impl,
                              bindings::quantize_act_dual(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8DactDual, dact_dual_impl,
                              bindings::quantize_dact_dual(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
