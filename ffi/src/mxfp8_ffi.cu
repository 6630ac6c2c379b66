// XLA FFI handler of the MXFP8 block-scaled GEMM, "jax_sm100_mxfp8_gemm": the contract
// (operands, the tiled scale layout, attributes, validation) is in
// common/mxfp8_validate.h, shared with the CPU handler (cpu/mxfp8_gemm_cpu.cc).
//
// Dispatch: buffers and attributes are validated once, then the device's compute
// capability picks the kernel: 10.0 -> ffi/src/sm100/mxfp8_gemm_launch.cu where the build
// holds sm_100a code (the kernel has never run on hardware here; the Python layer runs
// the first-use self-test before it launches it); any other -> kUnimplemented (the
// Python layer takes its reference path there, sm_90 included: Hopper has no
// block-scaled MMA).
//
// Graph-safe (kCmdBufferCompatible): tensor maps are built on the host per call, no
// allocation, no synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/mxfp8_validate.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"
#if JAX_SM100_HAS_SM100
#include "sm100/mxfp8_gemm_launch.h"
#endif

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::Mxfp8GemmProblem;

#if JAX_SM100_HAS_SM100
/// The sm_100a path: K == 0 gives D = 0, else the kernel o.block_n names.
ffi::Error run_sm100(const std::string& name, const Mxfp8GemmProblem& o, cudaStream_t stream) {
  if (o.k == 0) {
    const size_t bytes = size_t(o.m) * size_t(o.n) * jax_sm100::host::elem_bytes(o.out_type);
    const cudaError_t e = cudaMemsetAsync(o.d, 0, bytes, stream);
    if (e != cudaSuccess) return ffi::Error::Internal(name + ": " + cudaGetErrorString(e));
    return ffi::Error::Success();
  }
  const std::string err = jax_sm100::host::sm100_mxfp8_gemm_launch(o, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

ffi::Error mxfp8_gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale, ffi::AnyBuffer b,
                           ffi::AnyBuffer b_scale, ffi::Result<ffi::AnyBuffer> d, int32_t block_n,
                           int32_t group_m) {
  const char* name = "jax_sm100_mxfp8_gemm";
  Mxfp8GemmProblem o{};
  ffi::Error verr = jax_sm100::host::validate_mxfp8_gemm(name, a, a_scale, b, b_scale, *d, block_n, group_m, &o);
  if (verr.failure() || o.empty()) return verr;
  DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal(std::string(name) + ": " + dev_err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(name, o, stream);
#endif
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Mxfp8Gemm, mxfp8_gemm_impl,
                              bindings::mxfp8_gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
