// XLA FFI handlers of the blockwise-scaled FP8 GEMM:
//
//   "jax_sm100_fp8_gemm":          a (M, K) f8e4m3fn,
//                                  a_scale_t (ceil(K/128), round_up(M, 4)) f32: a's 1x128
//                                    scales TRANSPOSED (K-block major, rows 16-byte aligned;
//                                    pad entries ignored), so one TMA box brings a stage's
//                                    BLOCK_M scales in the stage's single transaction,
//                                  b (N, K) f8e4m3fn, b_scale (ceil(N/128), ceil(K/128)) f32
//                                  -> d (M, N) bf16
//   "jax_sm100_fp8_gemm_residual": the same + c (M, N) bf16, attribute beta (f32):
//                                  d = ... + beta * c  (beta == 0: c is not read)
// The op's documented a_scale layout (M, ceil(K/128)) has rows strided by ceil(K/128)
// floats, which no TMA box fits; the Python layer transposes it (or the quantizer writes
// the transposed layout directly).
// Requirements (TMA: 16-byte aligned row strides): K % 16 == 0, N % 8 == 0; K <= 65536.
//
// Kernel choice (made in Python, so that it shows in the HLO and the jit cache key):
// attributes block_m, block_n, cluster (i32), pair_along_n (bool) name one compiled
// kernel, one of kFp8Forms (common/ffi_checks.h); group_m (i32) in [1, 64] is the number
// of cluster rows per L2 group of the persistent tile order. The residual target takes the 128-row forms
// only (no shared memory for C staging otherwise); with beta == 0 it runs the plain
// kernel (C unread) and takes every form. Anything else is an InvalidArgument error,
// whatever the device.
//
// Dispatch: buffers and attributes are validated once, then the device's compute
// capability picks the kernels: 9.0 -> ffi/src/sm90/fp8_gemm_launch.cu; 10.0 ->
// ffi/src/sm100/fp8_gemm_launch.cu where the build holds sm_100a code (its own, smaller
// set of forms: 128 x 128 on one CTA, plain and residual; another form is an
// InvalidArgument error there); any other -> kUnimplemented (the Python layer takes its
// reference path there).
//
// Graph-safe (kCmdBufferCompatible): tensor maps are built on the host per call, no
// allocation, no synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/fp8_validate.h"
#include "sm90/fp8_gemm_launch.h"
#if JAX_SM100_HAS_SM100
#include "sm100/fp8_gemm_launch.h"
#endif
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::Fp8GemmProblem;
using jax_sm100::host::Fp8Tiling;

/// The sm_90a path: K == 0 gives D = 0, else the kernel o.tiling names.
#if JAX_SM100_HAS_SM90
ffi::Error run_sm90(const std::string& name, const Fp8GemmProblem& o, const DeviceInfo& dev,
                    cudaStream_t stream) {
  if (o.k == 0) {  // empty contraction (plain target only): D = 0
    const cudaError_t e = cudaMemsetAsync(o.d, 0, size_t(o.m) * o.n * 2, stream);
    if (e != cudaSuccess) return ffi::Error::Internal(name + ": " + cudaGetErrorString(e));
    return ffi::Error::Success();
  }
  const std::string err = jax_sm100::host::sm90_fp8_gemm_launch(o, dev.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

#if JAX_SM100_HAS_SM100
/// The sm_100a path (compute capability 10.0): the form must be one the sm100 kernel has;
/// K == 0 gives D = 0, else the kernel.
ffi::Error run_sm100(const std::string& name, const Fp8GemmProblem& o, cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_fp8_tiling(o.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (o.k == 0) {  // empty contraction (plain target only): D = 0
    const cudaError_t e = cudaMemsetAsync(o.d, 0, size_t(o.m) * o.n * 2, stream);
    if (e != cudaSuccess) return ffi::Error::Internal(name + ": " + cudaGetErrorString(e));
    return ffi::Error::Success();
  }
  const std::string err = jax_sm100::host::sm100_fp8_gemm_launch(o, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

/// Validation (common/fp8_validate.h) and dispatch shared by both handlers; c is null for
/// the plain target.
ffi::Error fp8_gemm_common(const char* name, cudaStream_t stream, ffi::AnyBuffer a,
                           ffi::AnyBuffer a_scale, ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                           const ffi::Buffer<ffi::BF16>* c, float beta,
                           ffi::Result<ffi::Buffer<ffi::BF16>>& d, const Fp8Tiling& tiling) {
  Fp8GemmProblem o{};
  ffi::Error verr = jax_sm100::host::validate_fp8_gemm(name, a, a_scale, b, b_scale, c, beta, *d,
                                                       tiling, &o);
  if (verr.failure() || o.empty()) return verr;
  const std::string who = std::string(name) + ": ";
  DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal(who + dev_err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM90
    case 90: return run_sm90(name, o, dev, stream);
#endif
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(name, o, stream);
#endif
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

ffi::Error fp8_gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                         ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                         ffi::Result<ffi::Buffer<ffi::BF16>> d, int32_t block_m, int32_t block_n,
                         int32_t cluster, bool pair_along_n, int32_t group_m) {
  return fp8_gemm_common("jax_sm100_fp8_gemm", stream, a, a_scale, b, b_scale, nullptr, 0.0f, d,
                         Fp8Tiling{block_m, block_n, cluster, pair_along_n, group_m});
}

ffi::Error fp8_gemm_residual_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                                  ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                                  ffi::Buffer<ffi::BF16> c, ffi::Result<ffi::Buffer<ffi::BF16>> d,
                                  float beta, int32_t block_m, int32_t block_n, int32_t cluster,
                                  bool pair_along_n, int32_t group_m) {
  return fp8_gemm_common("jax_sm100_fp8_gemm_residual", stream, a, a_scale, b, b_scale, &c, beta,
                         d, Fp8Tiling{block_m, block_n, cluster, pair_along_n, group_m});
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8Gemm, fp8_gemm_impl,
                              bindings::fp8_gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmResidual, fp8_gemm_residual_impl,
                              bindings::fp8_gemm_residual(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
