// XLA FFI handlers "jax_sm100_gemm" and "jax_sm100_gemm_residual".
//
//   jax_sm100_gemm:          (a, b)    -> d    attrs trans_a: bool, trans_b: bool,
//                                                    block_m, block_n, cluster_m, group_m: i32
//   jax_sm100_gemm_residual: (a, b, c) -> d    attrs trans_a, trans_b, alpha: f32, beta: f32,
//                                                    block_m, block_n, cluster_m, group_m
//
//   a: (..., M, K), or (..., K, M) when trans_a;  b: (..., K, N), or (..., N, K) when trans_b;
//   d: (..., M, N) row-major; c: d's shape and dtype. Each operand's leading dims flatten
//   to one batch count that must be 1 (broadcast) or d's batch count.
//   a, b: both bf16 or both f16; d: bf16, f16 or f32. Every operand's last dimension
//   must span a multiple of 16 bytes (TMA row strides); the Python layer pads.
//
// Kernel choice (made in Python, so that it shows in the HLO and the jit cache key):
// (block_m, block_n, cluster_m) names one compiled kernel, one of kGemmTilings in common/ffi_checks.h;
// group_m in [1, 64] is the number of cluster rows per L2 group of the persistent tile
// order. Anything else is an InvalidArgument error, whatever the device.
//
// Semantics: D = alpha * (A @ B) + beta * C with fp32 accumulation and fp32 epilogue
// math, rounded once to d's dtype. beta == 0: C is never read (a NaN in C does not
// reach D). K == 0: D = beta * C (or zeros).
//
// Dispatch: the buffers and attributes are validated once, then the device's compute
// capability picks the kernels: 9.0 -> ffi/src/sm90/; 10.0 -> ffi/src/sm100/ (where the
// build holds sm_100a code; the sm100 kernel has its own tiling set, see
// sm100/gemm_launch.h); any other -> kUnimplemented (the Python layer takes its
// reference path there).
//
// Graph safety (kCmdBufferCompatible): the execute path only encodes tensor maps on the
// host (passed as __grid_constant__ kernel parameters), reads cached device attributes
// and launches; no allocation, no host synchronisation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/gemm_validate.h"
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

/// D = beta * C (K == 0 with a residual term): no matmul to run.
template <class Out>
__global__ void scale_c_kernel(const Out* c, Out* d, int64_t per_batch, int64_t total,
                               bool c_batched, float beta) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ci = c_batched ? i : i % per_batch;
    d[i] = static_cast<Out>(beta * static_cast<float>(c[ci]));
  }
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
#endif

/// K == 0: nothing to contract, D = beta * C (pr.c set) or zeros.
ffi::Error fill_without_product(const std::string& name, const GemmProblem& pr, int num_sms,
                                cudaStream_t stream) {
  const int64_t total = pr.batch * pr.m * pr.n;
  if (pr.c == nullptr) {
    const cudaError_t e =
        cudaMemsetAsync(pr.d, 0, total * jax_sm100::host::dtype_bytes(pr.out_type), stream);
    if (e != cudaSuccess) return ffi::Error::Internal(name + ": " + cudaGetErrorString(e));
    return ffi::Error::Success();
  }
  const int blocks = (int)std::min<int64_t>((total + 255) / 256, (int64_t)num_sms * 8);
  switch (pr.out_type) {
    case GemmDtype::kBF16:
      scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(pr.c),
                                                 static_cast<__nv_bfloat16*>(pr.d), pr.m * pr.n,
                                                 total, pr.c_batched, pr.beta);
      break;
    case GemmDtype::kF16:
      scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(pr.c),
                                                 static_cast<__half*>(pr.d), pr.m * pr.n, total,
                                                 pr.c_batched, pr.beta);
      break;
    case GemmDtype::kF32:
      scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(pr.c),
                                                 static_cast<float*>(pr.d), pr.m * pr.n, total,
                                                 pr.c_batched, pr.beta);
      break;
  }
  return jax_sm100::host::last_cuda_error(name);
}

#if JAX_SM100_HAS_SM90
/// The sm_90a path: the K == 0 fill, else the kernel that pr.tiling names.
ffi::Error run_sm90(const std::string& name, const GemmProblem& pr, const DeviceInfo& dev,
                    cudaStream_t stream) {
  if (pr.k == 0) return fill_without_product(name, pr, dev.num_sms, stream);
  const std::string err = pr.in_type == GemmDtype::kBF16
                              ? sm90_launch_for_out<__nv_bfloat16>(pr, dev.num_sms, stream)
                              : sm90_launch_for_out<__half>(pr, dev.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
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

/// The sm_100a path (compute capability 10.0; compiled only when the build holds sm_100a
/// code, JAX_SM100_HAS_SM100): the tiling must be one the sm100 kernel has; the K == 0 fill, else the kernel.
ffi::Error run_sm100(const std::string& name, const GemmProblem& pr, const DeviceInfo& dev,
                     cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_gemm_tiling(pr.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (pr.k == 0) return fill_without_product(name, pr, dev.num_sms, stream);
  const std::string err = pr.in_type == GemmDtype::kBF16 ? sm100_launch_for_out<__nv_bfloat16>(pr, stream)
                                                         : sm100_launch_for_out<__half>(pr, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

/// Shared validation (common/gemm_validate.h) + dispatch of both handlers. `c` is null for
/// the plain GEMM.
ffi::Error gemm_common(const char* name, cudaStream_t stream, const ffi::AnyBuffer& a,
                       const ffi::AnyBuffer& b, const ffi::AnyBuffer* c, ffi::AnyBuffer* d,
                       bool trans_a, bool trans_b, float alpha, float beta,
                       const GemmTiling& tiling) {
  GemmProblem pr{};
  ffi::Error verr = jax_sm100::host::validate_gemm(name, a, b, c, d, trans_a, trans_b, alpha,
                                                   beta, tiling, &pr);
  if (verr.failure() || pr.empty()) return verr;
  const std::string who = std::string(name) + ": ";
  DeviceInfo dev;
  const std::string err = jax_sm100::host::current_device(&dev);
  if (!err.empty()) return ffi::Error::Internal(who + err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM90
    case 90: return run_sm90(name, pr, dev, stream);
#endif
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(name, pr, dev, stream);
#endif
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

ffi::Error gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                     ffi::Result<ffi::AnyBuffer> d, bool trans_a, bool trans_b, int32_t block_m,
                     int32_t block_n, int32_t cluster_m, int32_t group_m, int32_t split_k) {
  return gemm_common("jax_sm100_gemm", stream, a, b, nullptr, &(*d), trans_a, trans_b, 1.0f, 0.0f,
                     GemmTiling{block_m, block_n, cluster_m, group_m, split_k});
}

ffi::Error gemm_residual_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                              ffi::AnyBuffer c, ffi::Result<ffi::AnyBuffer> d, bool trans_a,
                              bool trans_b, float alpha, float beta, int32_t block_m,
                              int32_t block_n, int32_t cluster_m, int32_t group_m, int32_t split_k) {
  return gemm_common("jax_sm100_gemm_residual", stream, a, b, &c, &(*d), trans_a, trans_b, alpha,
                     beta, GemmTiling{block_m, block_n, cluster_m, group_m, split_k});
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Gemm, gemm_impl,
                              bindings::gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmResidual, gemm_residual_impl,
                              bindings::gemm_residual(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
