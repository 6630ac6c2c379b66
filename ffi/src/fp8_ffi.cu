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
// capability picks the kernels: 9.0 -> ffi/src/sm90/fp8_gemm_launch.cu; any other ->
// kUnimplemented (the Python layer takes its reference path there).
//
// Graph-safe (kCmdBufferCompatible): tensor maps are built on the host per call, no
// allocation, no synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/device.h"
#include "common/ffi_util.h"
#include "sm90/fp8_gemm_launch.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::dims_str;
using jax_sm100::host::Fp8GemmProblem;
using jax_sm100::host::Fp8Tiling;

/// "" when `t` names a compiled kernel (of the residual ones when `residual`), else the
/// sentence saying why not, naming the valid set.
std::string check_tiling(const Fp8Tiling& t, bool residual) {
  return jax_sm100::host::check_fp8_tiling(t.block_m, t.block_n, t.cluster, t.pair_along_n,
                                           t.group_m, residual);
}

/// Shape/dtype validation shared by both targets; fills `o` (all but c, beta, tiling).
ffi::Error validate(const std::string& who, ffi::AnyBuffer a, ffi::AnyBuffer a_scale_t,
                    ffi::AnyBuffer b, ffi::AnyBuffer b_scale, ffi::Span<const int64_t> dd,
                    Fp8GemmProblem& o) {
  if (a.element_type() != ffi::F8E4M3FN || b.element_type() != ffi::F8E4M3FN)
    return ffi::Error::InvalidArgument(who + "a and b must be float8_e4m3fn");
  if (a_scale_t.element_type() != ffi::F32 || b_scale.element_type() != ffi::F32)
    return ffi::Error::InvalidArgument(who + "a_scale and b_scale must be float32");
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 2 || ad[1] != bd[1])
    return ffi::Error::InvalidArgument(who + "a must be (M, K) and b (N, K) with the same K; got a " +
                                       dims_str(ad) + ", b " + dims_str(bd));
  o.m = ad[0];
  o.k = ad[1];
  o.n = bd[0];
  o.mp = (o.m + 3) / 4 * 4;
  const int64_t kb = (o.k + 127) / 128, nb = (o.n + 127) / 128;
  auto sad = a_scale_t.dimensions(), sbd = b_scale.dimensions();
  if (sad.size() != 2 || sad[0] != kb || sad[1] != o.mp)
    return ffi::Error::InvalidArgument(
        who + "a_scale must be given transposed and padded, shape "
              "(ceil(K/128), round_up(M, 4)) = (" + std::to_string(kb) + ", " +
        std::to_string(o.mp) + "); got " + dims_str(sad));
  if (sbd.size() != 2 || sbd[0] != nb || sbd[1] != kb)
    return ffi::Error::InvalidArgument(who + "b_scale must have shape (ceil(N/128), ceil(K/128)) = (" +
                                       std::to_string(nb) + ", " + std::to_string(kb) + "); got " +
                                       dims_str(sbd));
  if (dd.size() != 2 || dd[0] != o.m || dd[1] != o.n)
    return ffi::Error::InvalidArgument(who + "d must have shape (M, N)");
  if (o.k % 16 != 0 || o.n % 8 != 0)
    return ffi::Error::InvalidArgument(
        who + "K must be a multiple of 16 and N a multiple of 8 (TMA row alignment); pad "
              "the operands (zeros in K change nothing)");
  if (o.k > jax_sm100::host::kSm90Fp8MaxK)
    return ffi::Error::InvalidArgument(who + "K must be <= " +
                                       std::to_string(jax_sm100::host::kSm90Fp8MaxK));
  if (o.m > INT32_MAX / 2 || o.n > INT32_MAX / 2)
    return ffi::Error::InvalidArgument(who + "M and N must fit in int32");
  o.a = a.untyped_data();
  o.a_scale_t = static_cast<const float*>(a_scale_t.untyped_data());
  o.b = b.untyped_data();
  o.b_scale = static_cast<const float*>(b_scale.untyped_data());
  o.c = nullptr;
  o.beta = 0.0f;
  return ffi::Error::Success();
}

/// The sm_90a path: K == 0 gives D = 0, else the kernel o.tiling names.
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

/// Validation and dispatch shared by both handlers; c is null for the plain target.
ffi::Error fp8_gemm_common(const char* name, cudaStream_t stream, ffi::AnyBuffer a,
                           ffi::AnyBuffer a_scale, ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                           const ffi::Buffer<ffi::BF16>* c, float beta,
                           ffi::Result<ffi::Buffer<ffi::BF16>>& d, const Fp8Tiling& tiling) {
  const std::string who = std::string(name) + ": ";
  // beta == 0: C is not read at all (a NaN in C must not leak into D): the plain kernel.
  const bool residual = c != nullptr && beta != 0.0f;
  const std::string tiling_err = check_tiling(tiling, residual);
  if (!tiling_err.empty()) return ffi::Error::InvalidArgument(who + tiling_err);
  Fp8GemmProblem o{};
  ffi::Error err = validate(who, a, a_scale, b, b_scale, d->dimensions(), o);
  if (err.failure()) return err;
  if (c != nullptr) {
    auto cd = c->dimensions();
    if (cd.size() != 2 || cd[0] != o.m || cd[1] != o.n)
      return ffi::Error::InvalidArgument(who + "c must have shape (M, N)");
    if (o.k == 0 && o.m != 0 && o.n != 0)
      return ffi::Error::InvalidArgument(who + "K must be positive");
    if (residual) o.c = c->untyped_data();
    o.beta = beta;
  }
  o.d = d->untyped_data();
  o.tiling = tiling;
  if (o.m == 0 || o.n == 0) return ffi::Error::Success();

  DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal(who + dev_err);
  switch (dev.arch()) {
    case 90: return run_sm90(name, o, dev, stream);
    // 10.x: the sm_100a kernels (ffi/src/sm100/) plug in here.
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

#define JAX_SM100_FP8_OPERANDS                  \
  ffi::Ffi::Bind()                              \
      .Ctx<ffi::PlatformStream<cudaStream_t>>() \
      .Arg<ffi::AnyBuffer>()                    \
      .Arg<ffi::AnyBuffer>()                    \
      .Arg<ffi::AnyBuffer>()                    \
      .Arg<ffi::AnyBuffer>()
#define JAX_SM100_FP8_TILING_ATTRS   \
  .Attr<int32_t>("block_m")          \
      .Attr<int32_t>("block_n")      \
      .Attr<int32_t>("cluster")      \
      .Attr<bool>("pair_along_n")    \
      .Attr<int32_t>("group_m")

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8Gemm, fp8_gemm_impl,
                              JAX_SM100_FP8_OPERANDS.Ret<ffi::Buffer<ffi::BF16>>()
                                  JAX_SM100_FP8_TILING_ATTRS,
                              {xla::ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmResidual, fp8_gemm_residual_impl,
                              JAX_SM100_FP8_OPERANDS.Arg<ffi::Buffer<ffi::BF16>>()
                                  .Ret<ffi::Buffer<ffi::BF16>>()
                                  .Attr<float>("beta") JAX_SM100_FP8_TILING_ATTRS,
                              {xla::ffi::Traits::kCmdBufferCompatible});
