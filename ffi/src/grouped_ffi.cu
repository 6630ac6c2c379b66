// XLA FFI handlers of the grouped (mixture-of-experts) GEMMs:
//
//   "jax_sm100_grouped_gemm":     lhs (M, K), rhs (G, K, N) or (G, N, K) when trans_rhs,
//                                 group_sizes (G,) i32 -> out (M, N)
//                                 attrs trans_rhs: bool, block_m, block_n: i32
//                                 out[r] = lhs[r] @ rhs[g(r)] (ragged_dot's forward and its
//                                 lhs gradient); rows in no group are zeros.
//   "jax_sm100_kgrouped_gemm":    lhs (M, K), dy (M, N), group_sizes (G,) i32 -> out (G, K, N)
//                                 attrs block_m, block_n: i32
//                                 out[g] = lhs[rows of g]^T @ dy[rows of g] (ragged_dot's rhs
//                                 gradient); an empty group's slice is zeros.
//   "jax_sm100_fp8_grouped_gemm": a (M, K) e4m3, a_scale_t (ceil(K/128), round_up(M, 4)) f32
//                                 (a's 1x128 scales transposed, as the dense FP8 GEMM reads
//                                 them), b (G, N, K) e4m3, b_scale (G, ceil(N/128),
//                                 ceil(K/128)) f32, group_sizes (G,) i32 -> out (M, N) bf16
//                                 attrs block_m, block_n: i32
//
// Groups (common/grouped_problem.h): contiguous rows in group order, sizes past M cut at M,
// a negative size counts as 0. lhs/rhs/dy: both bf16 or both f16; outputs bf16, f16 or f32
// (FP8: bf16). Rows must span a multiple of 16 bytes (FP8: K % 16 == 0, N % 8 == 0); the
// Python layer pads. (block_m, block_n) names a compiled tile (kGroupedTilings; the sm90
// launch layer may take a subset per target and says so); anything else is an
// InvalidArgument error.
//
// Dispatch: buffers and attributes are validated once (common/grouped_validate.h), then the
// device's compute capability picks the kernels: 9.0 -> ffi/src/sm90/grouped_gemm_launch.h;
// 10.0 -> ffi/src/sm100/grouped_gemm_launch.h, kgrouped_gemm_launch.h and
// grouped_fp8_launch.h (where the build holds sm_100a code);
// any other -> kUnimplemented (the Python layer takes its reference path there). No product
// to run (G == 0, or an empty contraction) is a zero fill here.
//
// Graph-safe (kCmdBufferCompatible): group_sizes is read on the device only (no host
// synchronisation), tensor maps are built on the host per call, no allocation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/ffi_util.h"
#include "common/grouped_validate.h"
#include "sm90/grouped_gemm_launch.h"
#if JAX_SM100_HAS_SM100
#include "sm100/grouped_fp8_launch.h"
#include "sm100/grouped_gemm_launch.h"
#include "sm100/kgrouped_gemm_launch.h"
#endif
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::Fp8GroupedGemmProblem;
using jax_sm100::host::GroupedGemmProblem;
using jax_sm100::host::GroupedTiling;
using jax_sm100::host::KGroupedGemmProblem;

ffi::Error zero_fill(const std::string& name, void* p, size_t bytes, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(p, 0, bytes, stream);
  if (e != cudaSuccess) return ffi::Error::Internal(name + ": " + cudaGetErrorString(e));
  return ffi::Error::Success();
}

size_t out_bytes(const GroupedGemmProblem& p) {
  return size_t(p.m) * size_t(p.n) * jax_sm100::host::elem_bytes(p.out_type);
}
size_t out_bytes(const KGroupedGemmProblem& p) {
  return size_t(p.g) * size_t(p.k) * size_t(p.n) * jax_sm100::host::elem_bytes(p.out_type);
}
size_t out_bytes(const Fp8GroupedGemmProblem& p) { return size_t(p.m) * size_t(p.n) * 2; }

#if JAX_SM100_HAS_SM90
std::string sm90_launch(const GroupedGemmProblem& p, int num_sms, cudaStream_t stream) {
  return jax_sm100::host::sm90_grouped_gemm_launch(p, num_sms, stream);
}
std::string sm90_launch(const KGroupedGemmProblem& p, int num_sms, cudaStream_t stream) {
  return jax_sm100::host::sm90_kgrouped_gemm_launch(p, num_sms, stream);
}
std::string sm90_launch(const Fp8GroupedGemmProblem& p, int num_sms, cudaStream_t stream) {
  return jax_sm100::host::sm90_fp8_grouped_gemm_launch(p, num_sms, stream);
}

/// Why the sm90 kernels lack the problem's tile ("" when they have it): the bf16/fp16
/// kernels have kSm90GroupedTiles; the FP8 launch has every tile of kFp8GroupedTilings,
/// which validation enforced.
template <class Problem>
std::string sm90_tiling_error(const Problem& p) {
  return jax_sm100::host::check_sm90_grouped_tiling(p.tiling);
}
std::string sm90_tiling_error(const Fp8GroupedGemmProblem&) { return ""; }

/// The sm_90a path: the tile must be one the sm90 grouped kernels have; no product to run
/// is a zero fill, else the kernel.
template <class Problem>
ffi::Error run_sm90(const std::string& name, const Problem& p, const DeviceInfo& dev,
                    cudaStream_t stream) {
  const std::string bad = sm90_tiling_error(p);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (jax_sm100::host::grouped_all_zero(p)) return zero_fill(name, p.out, out_bytes(p), stream);
  const std::string err = sm90_launch(p, dev.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

#if JAX_SM100_HAS_SM100
/// The sm_100a path (compute capability 10.0) of the M-grouped target: the tile must be
/// one the sm100 grouped kernel has; no product to run is a zero fill, else the kernel.
ffi::Error run_sm100(const std::string& name, const GroupedGemmProblem& p, const DeviceInfo&,
                     cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_grouped_tiling(p.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (jax_sm100::host::grouped_all_zero(p)) return zero_fill(name, p.out, out_bytes(p), stream);
  const std::string err = jax_sm100::host::sm100_grouped_gemm_launch(p, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}

/// The sm_100a path of the FP8 M-grouped target: 128-row tiles only (the error names
/// them); no product to run is a zero fill, else the kernel.
ffi::Error run_sm100(const std::string& name, const Fp8GroupedGemmProblem& p, const DeviceInfo&,
                     cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_fp8_grouped_tiling(p.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (jax_sm100::host::grouped_all_zero(p)) return zero_fill(name, p.out, out_bytes(p), stream);
  const std::string err = jax_sm100::host::sm100_fp8_grouped_gemm_launch(p, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}

/// The sm_100a path of the K-grouped target: no rows is a zero fill, else the kernel.
ffi::Error run_sm100(const std::string& name, const KGroupedGemmProblem& p, const DeviceInfo&,
                     cudaStream_t stream) {
  const std::string bad = jax_sm100::host::check_sm100_kgrouped_tiling(p.tiling);
  if (!bad.empty()) return ffi::Error::InvalidArgument(name + ": " + bad);
  if (jax_sm100::host::grouped_all_zero(p)) return zero_fill(name, p.out, out_bytes(p), stream);
  const std::string err = jax_sm100::host::sm100_kgrouped_gemm_launch(p, stream);
  if (!err.empty()) return ffi::Error::Internal(name + ": " + err);
  return ffi::Error::Success();
}
#endif

/// Dispatch on the device's compute capability, shared by the three handlers (after
/// validation).
template <class Problem>
ffi::Error dispatch(const std::string& name, const Problem& p, cudaStream_t stream) {
  if (jax_sm100::host::grouped_empty(p)) return ffi::Error::Success();
  DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal(name + ": " + dev_err);
  switch (dev.arch()) {
#if JAX_SM100_HAS_SM90
    case 90: return run_sm90(name, p, dev, stream);
#endif
#if JAX_SM100_HAS_SM100
    case 100: return run_sm100(name, p, dev, stream);
#endif
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

ffi::Error grouped_gemm_impl(cudaStream_t stream, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs,
                             ffi::AnyBuffer group_sizes, ffi::Result<ffi::AnyBuffer> out,
                             bool trans_rhs, int32_t block_m, int32_t block_n) {
  const char* name = "jax_sm100_grouped_gemm";
  GroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_grouped_gemm(
      name, lhs, rhs, group_sizes, &(*out), trans_rhs, GroupedTiling{block_m, block_n}, &p);
  if (err.failure()) return err;
  return dispatch(name, p, stream);
}

ffi::Error kgrouped_gemm_impl(cudaStream_t stream, ffi::AnyBuffer lhs, ffi::AnyBuffer dy,
                              ffi::AnyBuffer group_sizes, ffi::Result<ffi::AnyBuffer> out,
                              int32_t block_m, int32_t block_n) {
  const char* name = "jax_sm100_kgrouped_gemm";
  KGroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_kgrouped_gemm(
      name, lhs, dy, group_sizes, &(*out), GroupedTiling{block_m, block_n}, &p);
  if (err.failure()) return err;
  return dispatch(name, p, stream);
}

ffi::Error fp8_grouped_gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                                 ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                                 ffi::AnyBuffer group_sizes,
                                 ffi::Result<ffi::Buffer<ffi::BF16>> out, int32_t block_m,
                                 int32_t block_n) {
  const char* name = "jax_sm100_fp8_grouped_gemm";
  Fp8GroupedGemmProblem p{};
  ffi::Error err = jax_sm100::host::validate_fp8_grouped_gemm(
      name, a, a_scale, b, b_scale, group_sizes, *out, GroupedTiling{block_m, block_n}, &p);
  if (err.failure()) return err;
  return dispatch(name, p, stream);
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GroupedGemm, grouped_gemm_impl,
                              bindings::grouped_gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100KGroupedGemm, kgrouped_gemm_impl,
                              bindings::kgrouped_gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GroupedGemm, fp8_grouped_gemm_impl,
                              bindings::fp8_grouped_gemm(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
