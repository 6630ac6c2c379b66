// XLA FFI handler "jax_sm100_gemm_bias": the GEMM with the fused bias/activation epilogue.
//
//   (a, b, bias) -> (d, pre)   attrs trans_a: bool, trans_b: bool,
//                                    block_m, block_n, cluster_m, group_m, activation: i32
//
//   a, b, d and the tiling attributes: jax_sm100_gemm's (ffi/src/gemm_ffi.cu), with d of
//   a's dtype or float32 (the compiled epilogue's type pairs).
//   bias: float32 (N,), or (0,) for no bias. pre: d's shape and dtype, or (0,) when the
//   caller does not want it (the primal pass; the backward pass of gelu/silu reads it).
//   activation: 0 none, 1 relu, 2 gelu_tanh, 3 gelu_erf, 4 silu
//   (kernels/common/activation.h). Validation: common/gemm_bias_validate.h.
//
// Semantics: z = acc + bias[col] in fp32 (acc: the fp32 accumulation of A @ B);
// pre = round(z); d = round(act(z)), rounded once to d's dtype. K == 0: z = bias[col].
//
// Dispatch: compute capability 9.0 -> the sm90 GEMM (sm90/gemm_launch.h), whose epilogue
// reads GemmProblem's bias, pre and activation; 10.0 (when the build holds sm_100a code)
// -> the sm100 GEMM (sm100/gemm_launch.h), whose launch sends such a problem to its
// bias/activation kernels (kernels/sm100/gemm_bias_roles.h: compiled, SASS-checked,
// emulated, self-tested on first use, never run on hardware here); any other capability
// returns kUnimplemented naming the target.
//
// Graph safety (kCmdBufferCompatible): as jax_sm100_gemm, no allocation, no host sync.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/gemm_bias_validate.h"
#include "jax_sm100/kernels/common/activation.h"
#include "sm100/gemm_launch.h"
#include "sm90/gemm_launch.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::GemmDtype;
using jax_sm100::host::GemmProblem;
using jax_sm100::host::GemmTiling;
using jax_sm100::kernels::Activation;

constexpr const char* kName = "jax_sm100_gemm_bias";

/// K == 0: nothing to contract, z = bias[col] (or 0): pre = z, d = act(z).
template <class Out>
__global__ void fill_from_bias_kernel(const float* bias, Out* d, Out* pre, int64_t n,
                                      int64_t total, int32_t activation) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float z = bias != nullptr ? bias[i % n] : 0.0f;
    if (pre != nullptr) pre[i] = static_cast<Out>(z);
    d[i] = static_cast<Out>(
        jax_sm100::kernels::apply_activation(static_cast<Activation>(activation), z));
  }
}

template <class Out>
void fill_from_bias(const GemmProblem& pr, int blocks, cudaStream_t stream) {
  fill_from_bias_kernel<<<blocks, 256, 0, stream>>>(
      pr.bias, static_cast<Out*>(pr.d), static_cast<Out*>(pr.pre), pr.n,
      pr.batch * pr.m * pr.n, pr.activation);
}

ffi::Error fill_without_product(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  const int64_t total = pr.batch * pr.m * pr.n;
  const int blocks = (int)std::min<int64_t>((total + 255) / 256, (int64_t)num_sms * 8);
  switch (pr.out_type) {
    case GemmDtype::kBF16: fill_from_bias<__nv_bfloat16>(pr, blocks, stream); break;
    case GemmDtype::kF16: fill_from_bias<__half>(pr, blocks, stream); break;
    case GemmDtype::kF32: fill_from_bias<float>(pr, blocks, stream); break;
  }
  return jax_sm100::host::last_cuda_error(kName);
}

#if JAX_SM100_HAS_SM90
template <class T>
std::string sm90_launch_for_out(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  using jax_sm100::host::sm90_gemm_launch;
  switch (pr.out_type) {
    case GemmDtype::kBF16: return sm90_gemm_launch<T, __nv_bfloat16>(pr, num_sms, stream);
    case GemmDtype::kF16: return sm90_gemm_launch<T, __half>(pr, num_sms, stream);
    case GemmDtype::kF32: return sm90_gemm_launch<T, float>(pr, num_sms, stream);
  }
  return "unsupported output type";
}

/// The sm_90a path: the K == 0 fill, else the kernel that pr.tiling names, with the
/// bias/activation epilogue that pr.bias, pr.pre and pr.activation describe.
ffi::Error run_sm90(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream) {
  if (pr.k == 0) return fill_without_product(pr, dev.num_sms, stream);
  const std::string err = pr.in_type == GemmDtype::kBF16
                              ? sm90_launch_for_out<__nv_bfloat16>(pr, dev.num_sms, stream)
                              : sm90_launch_for_out<__half>(pr, dev.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(std::string(kName) + ": " + err);
  return ffi::Error::Success();
}
#endif

#if JAX_SM100_HAS_SM100
template <class T>
std::string sm100_launch_for_out(const GemmProblem& pr, cudaStream_t stream) {
  using jax_sm100::host::sm100_gemm_launch;
  switch (pr.out_type) {
    case GemmDtype::kBF16: return sm100_gemm_launch<T, __nv_bfloat16>(pr, stream);
    case GemmDtype::kF16: return sm100_gemm_launch<T, __half>(pr, stream);
    case GemmDtype::kF32: return sm100_gemm_launch<T, float>(pr, stream);
  }
  return "unsupported output type";
}

/// The sm_100a path (compute capability 10.0): the tiling must be one the sm100 kernel
/// has; the K == 0 fill, else the bias/activation kernel of pr.tiling and pr.activation.
ffi::Error run_sm100(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_gemm_tiling(pr.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(std::string(kName) + ": " + bad);
  if (pr.k == 0) return fill_without_product(pr, dev.num_sms, stream);
  const std::string err = pr.in_type == GemmDtype::kBF16 ? sm100_launch_for_out<__nv_bfloat16>(pr, stream)
                                                         : sm100_launch_for_out<__half>(pr, stream);
  if (!err.empty()) return ffi::Error::Internal(std::string(kName) + ": " + err);
  return ffi::Error::Success();
}
#endif

ffi::Error gemm_bias_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                          ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> d,
                          ffi::Result<ffi::AnyBuffer> pre, bool trans_a, bool trans_b,
                          int32_t block_m, int32_t block_n, int32_t cluster_m, int32_t group_m,
                          int32_t split_k, int32_t activation) {
  GemmProblem pr{};
  ffi::Error verr = jax_sm100::host::validate_gemm_bias(
      kName, a, b, bias, &(*d), &(*pre), trans_a, trans_b,
      GemmTiling{block_m, block_n, cluster_m, group_m, split_k}, activation, &pr);
  if (verr.failure() || pr.empty()) return verr;
  DeviceInfo dev;
  const std::string err = jax_sm100::host::current_device(&dev);
  if (!err.empty()) return ffi::Error::Internal(std::string(kName) + ": " + err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM90
    case 90: return run_sm90(pr, dev, stream);
#endif
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(pr, dev, stream);
#endif
    default:
      // No form of the bias/activation epilogue for this architecture: the Python layer
      // takes its reference path there.
      return jax_sm100::host::no_kernel_for_arch(kName, dev.cc_major, dev.cc_minor);
  }
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmBias, gemm_bias_impl,
                              bindings::gemm_bias(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
