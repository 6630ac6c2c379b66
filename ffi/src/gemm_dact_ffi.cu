// XLA FFI handler "jax_sm100_gemm_dact": the GEMM with the activation-backward epilogue,
// the input gradient of a layer below an activation in one kernel.
//
//   (a, b, c) -> (d, dbias)   attrs trans_a: bool, trans_b: bool,
//                                   block_m, block_n, cluster_m, group_m, split_k,
//                                   activation: i32
//
//   d = round(acc * act'(c)), acc the fp32 accumulation of op(a) @ op(b), c the saved
//   pre-activation z (relu: z or act(z)); dbias[j] = the fp32 sum of column j of the
//   unrounded d over every row and batch entry, or (0,) when not wanted. Validation and
//   the full contract: common/gemm_dact_validate.h.
//
// Dispatch: compute capability 9.0 -> the sm90 GEMM's dact kernels (a residual
// configuration whose epilogue multiplies by act'(C) instead of adding beta * C, and adds
// its column sums to dbias with f32 reductions; sm90/gemm_launch.h), compiled for the
// tiling 128x256 (cluster 1 or 2), no split-K. Compute capability 10.0
// -> the sm_100a GEMM's dact kernels (kernels/sm100/gemm_dact_roles.h: the GEMM's CTA with
// its C loads and an epilogue of its own; compiled, SASS-checked, emulated, self-tested on
// first use, never run on hardware here), tilings (128, 256, 1) and the 2-SM pair (128,
// 256, 2); K == 0 writes zeros (0 * act'(c), c finite) without reading c. Any other
// capability returns kUnimplemented naming the target.
//
// Graph safety (kCmdBufferCompatible): no allocation, no host sync; dbias is zeroed by a
// memset on the call's stream before the launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/gemm_dact_validate.h"
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

constexpr const char* kName = "jax_sm100_gemm_dact";

ffi::Error gemm_dact_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                          ffi::AnyBuffer c, ffi::Result<ffi::AnyBuffer> d,
                          ffi::Result<ffi::AnyBuffer> dbias, bool trans_a, bool trans_b,
                          int32_t block_m, int32_t block_n, int32_t cluster_m, int32_t group_m,
                          int32_t split_k, int32_t activation) {
  GemmProblem pr{};
  ffi::Error verr = jax_sm100::host::validate_gemm_dact(
      kName, a, b, c, &(*d), &(*dbias), trans_a, trans_b,
      GemmTiling{block_m, block_n, cluster_m, group_m, split_k}, activation, &pr);
  if (verr.failure()) return verr;
  DeviceInfo dev;
  const std::string err = jax_sm100::host::current_device(&dev);
  if (!err.empty()) return ffi::Error::Internal(std::string(kName) + ": " + err);
  const bool bf16 = pr.in_type == GemmDtype::kBF16;
  // The kernels add into dbias; with no rows (or no batch entries) the sums are zeros.
  auto zero_dbias = [&] {
    return pr.dbias == nullptr || pr.n == 0 ||
           cudaMemsetAsync(pr.dbias, 0, static_cast<size_t>(pr.n) * sizeof(float), stream) == cudaSuccess;
  };
#if JAX_SM100_HAS_SM90
  if (dev.arch() == 90) {
    if (!zero_dbias()) return jax_sm100::host::last_cuda_error(kName);
    if (pr.empty()) return ffi::Error::Success();
    using jax_sm100::host::sm90_gemm_dact_launch;
    const std::string lerr = bf16 ? sm90_gemm_dact_launch<__nv_bfloat16>(pr, dev.num_sms, stream)
                                  : sm90_gemm_dact_launch<__half>(pr, dev.num_sms, stream);
    if (!lerr.empty()) return ffi::Error::Internal(std::string(kName) + ": " + lerr);
    return ffi::Error::Success();
  }
#endif
#if JAX_SM100_HAS_SM100
  if (dev.arch() == 100) {
    if (!zero_dbias()) return jax_sm100::host::last_cuda_error(kName);
    if (pr.empty()) return ffi::Error::Success();
    if (pr.k == 0) {
      const size_t bytes = static_cast<size_t>(pr.batch * pr.m * pr.n) * 2;
      if (cudaMemsetAsync(pr.d, 0, bytes, stream) != cudaSuccess) return jax_sm100::host::last_cuda_error(kName);
      return ffi::Error::Success();
    }
    using jax_sm100::host::sm100_gemm_dact_launch;
    const std::string lerr = bf16 ? sm100_gemm_dact_launch<__nv_bfloat16>(pr, stream)
                                  : sm100_gemm_dact_launch<__half>(pr, stream);
    if (!lerr.empty()) return ffi::Error::Internal(std::string(kName) + ": " + lerr);
    return ffi::Error::Success();
  }
#endif
  (void)bf16;
  (void)zero_dbias;
  return jax_sm100::host::no_kernel_for_arch(kName, dev.cc_major, dev.cc_minor);
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmDact, gemm_dact_impl,
                              bindings::gemm_dact(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
