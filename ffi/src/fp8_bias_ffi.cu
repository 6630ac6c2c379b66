// XLA FFI handler of the FP8 bias/activation GEMM, "jax_sm100_fp8_gemm_bias":
//
//   a (M, K) f8e4m3fn, a_scale_t (ceil(K/128), round_up(M, 4)) f32, b (N, K) f8e4m3fn,
//   b_scale (ceil(N/128), ceil(K/128)) f32, bias (N,) or (0,) f32 -> d (M, N) bf16
//   d = bf16(act(z)), z = the FP8 GEMM's fp32 sum + bias[col]
//
// jax_sm100_fp8_gemm's operands, layout, requirements and tiling attributes
// (ffi/src/fp8_ffi.cu) plus the bias and the attribute activation (i32,
// kernels::Activation); validation in common/fp8_bias_validate.h, shared with the CPU
// handler (cpu/fp8_gemm_cpu.cc).
//
// Dispatch: buffers and attributes are validated once, then the device's compute
// capability picks the kernel: 9.0 -> ffi/src/sm90/fp8_bias_launch.cu (every
// non-residual form of the sm90 FP8 GEMM, the tiling attributes as for
// jax_sm100_fp8_gemm); 10.0 -> ffi/src/sm100/fp8_bias_launch.cu where the build holds
// sm_100a code (the kernel has never run on hardware here; the Python layer runs the
// first-use self-test before it launches it; its one form is 128 x 128 on one CTA); any
// other -> kUnimplemented. K == 0 is refused (the Python layer never sends it).
//
// Graph-safe (kCmdBufferCompatible): tensor maps are built on the host per call, no
// allocation, no synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/fp8_bias_validate.h"
#include "jax_sm100/kernels/common/activation.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"
#if JAX_SM100_HAS_SM90
#include "sm90/fp8_bias_launch.h"
#endif
#if JAX_SM100_HAS_SM100
#include "sm100/fp8_bias_launch.h"
#include "sm100/fp8_gemm_launch.h"
#endif

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::Fp8GemmProblem;
using jax_sm100::host::Fp8Tiling;

#if JAX_SM100_HAS_SM90
/// The sm_90a path: any form the sm90 FP8 kernel has without a residual; K >= 1.
ffi::Error run_sm90(const std::string& name, const Fp8GemmProblem& o, const float* bias, int32_t activation,
                    const DeviceInfo& dev, cudaStream_t stream) {
  if (o.k == 0) return ffi::Error::InvalidArgument(name + ": K must be positive");
  const std::string err =
      jax_sm100::host::sm90_fp8_bias_gemm_launch(o, bias, activation, dev.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

#if JAX_SM100_HAS_SM100
/// The sm_100a path: the form must be the sm100 kernel's; K == 0 gives d = act(bias)
/// (a device-side fill has no kernel here: refused), else the kernel.
ffi::Error run_sm100(const std::string& name, const Fp8GemmProblem& o, const float* bias, int32_t activation,
                     cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_fp8_tiling(o.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (o.k == 0) return ffi::Error::InvalidArgument(name + ": K must be positive");
  const std::string err = jax_sm100::host::sm100_fp8_bias_gemm_launch(o, bias, activation, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

ffi::Error fp8_gemm_bias_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                              ffi::AnyBuffer b_scale, ffi::AnyBuffer bias, ffi::Result<ffi::Buffer<ffi::BF16>> d,
                              int32_t block_m, int32_t block_n, int32_t cluster, bool pair_along_n,
                              int32_t group_m, int32_t activation) {
  const char* name = "jax_sm100_fp8_gemm_bias";
  Fp8GemmProblem o{};
  const float* bias_ptr = nullptr;
  ffi::Error verr = jax_sm100::host::validate_fp8_bias(
      name, a, a_scale, b, b_scale, bias, *d, Fp8Tiling{block_m, block_n, cluster, pair_along_n, group_m},
      activation, &o, &bias_ptr);
  if (verr.failure() || o.empty()) return verr;
  DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal(std::string(name) + ": " + dev_err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM90
    case 90: return run_sm90(name, o, bias_ptr, activation, dev, stream);
#endif
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(name, o, bias_ptr, activation, stream);
#endif
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmBias, fp8_gemm_bias_impl,
                              bindings::fp8_gemm_bias(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
