// The FFI signature of every target, written once. The CUDA handler (ffi/src/*_ffi.cu)
// binds it after its stream context, the CPU handler (ffi/src/cpu/) as it is, so the two
// agree by construction on the order and types of operands and results and on the
// attribute names (jax_sm100/_launch/ passes the same call to either).
//
//   bindings::gemm(bindings::on_stream<cudaStream_t>())   // CUDA
//   bindings::gemm(ffi::Ffi::Bind())                      // CPU
//
// Host-only and free of CUDA headers: the CPU handlers are built without CUDA.
#pragma once

#include <cstdint>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host::bindings {

namespace ffi = xla::ffi;
using Any = ffi::AnyBuffer;

/// The start of a CUDA handler's binding: XLA's stream for the launch comes first.
template <class Stream>
auto on_stream() {
  return ffi::Ffi::Bind().Ctx<ffi::PlatformStream<Stream>>();
}

/// jax_sm100_gemm: a, b -> d.
template <class B>
auto gemm(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Attr<bool>("trans_a")
      .template Attr<bool>("trans_b")
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("cluster_m")
      .template Attr<int32_t>("group_m")
      .template Attr<int32_t>("split_k");
}

/// jax_sm100_gemm_residual: a, b, c -> d = alpha * op(a) @ op(b) + beta * c.
template <class B>
auto gemm_residual(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Attr<bool>("trans_a")
      .template Attr<bool>("trans_b")
      .template Attr<float>("alpha")
      .template Attr<float>("beta")
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("cluster_m")
      .template Attr<int32_t>("group_m")
      .template Attr<int32_t>("split_k");
}

/// jax_sm100_gemm_bias: a, b, bias -> d, pre.
template <class B>
auto gemm_bias(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Ret<Any>()
      .template Attr<bool>("trans_a")
      .template Attr<bool>("trans_b")
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("cluster_m")
      .template Attr<int32_t>("group_m")
      .template Attr<int32_t>("split_k")
      .template Attr<int32_t>("activation");
}

/// The FP8 GEMM's tiling attributes (both FP8 GEMM targets end with them).
template <class B>
auto fp8_tiling(B&& b) {
  return std::forward<B>(b)
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("cluster")
      .template Attr<bool>("pair_along_n")
      .template Attr<int32_t>("group_m");
}

/// jax_sm100_fp8_gemm: a, a_scale, b, b_scale -> d (bf16).
template <class B>
auto fp8_gemm(B&& b) {
  return fp8_tiling(std::forward<B>(b)
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Ret<ffi::Buffer<ffi::BF16>>());
}

/// jax_sm100_fp8_gemm_residual: a, a_scale, b, b_scale, c (bf16) -> d (bf16).
template <class B>
auto fp8_gemm_residual(B&& b) {
  return fp8_tiling(std::forward<B>(b)
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<ffi::Buffer<ffi::BF16>>()
                        .template Ret<ffi::Buffer<ffi::BF16>>()
                        .template Attr<float>("beta"));
}

/// jax_sm100_gemm_dact: a, b, c -> d, dbias.
template <class B>
auto gemm_dact(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Ret<Any>()
      .template Attr<bool>("trans_a")
      .template Attr<bool>("trans_b")
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("cluster_m")
      .template Attr<int32_t>("group_m")
      .template Attr<int32_t>("split_k")
      .template Attr<int32_t>("activation");
}

/// jax_sm100_fp8_gemm_bias: a, a_scale, b, b_scale, bias (f32 (N,) or (0,)) -> d (bf16).
template <class B>
auto fp8_gemm_bias(B&& b) {
  return fp8_tiling(std::forward<B>(b)
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Arg<Any>()
                        .template Ret<ffi::Buffer<ffi::BF16>>())
      .template Attr<int32_t>("activation");
}

/// jax_sm100_mxfp8_gemm: a, a_scale, b, b_scale -> d.
template <class B>
auto mxfp8_gemm(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Attr<int32_t>("block_n")
      .template Attr<int32_t>("group_m");
}

/// jax_sm100_quantize_fp8: x -> q, scale.
template <class B>
auto quantize(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Attr<int32_t>("block_rows")
      .template Attr<int32_t>("scale_transposed")
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>();
}

/// jax_sm100_quantize_fp8_dual: x -> q, scale, q of x^T, its scale.
template <class B>
auto quantize_dual(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Attr<int32_t>("block_rows")
      .template Attr<int32_t>("t_block_rows")
      .template Attr<int32_t>("scale_transposed")
      .template Attr<int32_t>("scale_t_transposed")
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>()
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>();
}

/// jax_sm100_quantize_fp8_act_dual: z -> Q(act(z)), its scale, Q(act(z)^T), its scale.
template <class B>
auto quantize_act_dual(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Attr<int32_t>("activation")
      .template Attr<int32_t>("scale_transposed")
      .template Attr<int32_t>("scale_t_transposed")
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>()
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>();
}

/// jax_sm100_quantize_fp8_dact_dual: g, z -> Q(dz), its scale, Q(dz^T), its scale,
/// dz's column sums per 128-row block; dz = g * act'(z).
template <class B>
auto quantize_dact_dual(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Attr<int32_t>("activation")
      .template Attr<int32_t>("scale_transposed")
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>()
      .template Ret<Any>()
      .template Ret<ffi::Buffer<ffi::F32>>()
      .template Ret<ffi::Buffer<ffi::F32>>();
}

/// jax_sm100_grouped_gemm: lhs, rhs, group_sizes -> out.
template <class B>
auto grouped_gemm(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Attr<bool>("trans_rhs")
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n");
}

/// jax_sm100_kgrouped_gemm: lhs, dy, group_sizes -> out (G, K, N).
template <class B>
auto kgrouped_gemm(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<Any>()
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n");
}

/// jax_sm100_fp8_grouped_gemm: a, a_scale_t, b, b_scale, group_sizes -> out (bf16).
template <class B>
auto fp8_grouped_gemm(B&& b) {
  return std::forward<B>(b)
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Arg<Any>()
      .template Ret<ffi::Buffer<ffi::BF16>>()
      .template Attr<int32_t>("block_m")
      .template Attr<int32_t>("block_n");
}

}  // namespace jax_sm100::host::bindings
