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
// capability picks the kernels: 9.0 -> ffi/src/sm90/; any other -> kUnimplemented (the
// Python layer takes its reference path there).
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

#include "common/device.h"
#include "common/ffi_util.h"
#include "sm90/gemm_launch.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::DeviceInfo;
using jax_sm100::host::GemmDtype;
using jax_sm100::host::GemmProblem;
using jax_sm100::host::GemmTiling;

/// "" when `t` is a valid kernel choice, else the sentence saying why not.
std::string check_tiling(const GemmTiling& t) {
  return jax_sm100::host::check_gemm_tiling(t.block_m, t.block_n, t.cluster_m, t.group_m);
}

bool to_gemm_dtype(ffi::DataType t, GemmDtype* out) {
  switch (t) {
    case ffi::BF16: *out = GemmDtype::kBF16; return true;
    case ffi::F16: *out = GemmDtype::kF16; return true;
    case ffi::F32: *out = GemmDtype::kF32; return true;
    default: return false;
  }
}

/// Product of all but the last two dimensions.
int64_t batch_of(ffi::Span<const int64_t> dims) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) b *= dims[i];
  return b;
}

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

/// Shared validation + dispatch of both handlers. `c` is null for the plain GEMM.
ffi::Error gemm_common(const char* name, cudaStream_t stream, const ffi::AnyBuffer& a,
                       const ffi::AnyBuffer& b, const ffi::AnyBuffer* c, ffi::AnyBuffer* d,
                       bool trans_a, bool trans_b, float alpha, float beta,
                       const GemmTiling& tiling) {
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err = check_tiling(tiling);
  if (!tiling_err.empty()) return ffi::Error::InvalidArgument(who + tiling_err);
  auto ad = a.dimensions();
  auto bd = b.dimensions();
  auto dd = d->dimensions();
  if (ad.size() < 2 || bd.size() < 2 || dd.size() < 2)
    return ffi::Error::InvalidArgument(who + "a, b and the output must have rank >= 2 (got " +
                                       std::to_string(ad.size()) + ", " + std::to_string(bd.size()) +
                                       ", " + std::to_string(dd.size()) + ")");
  GemmProblem pr{};
  GemmDtype ta, tb;
  if (!to_gemm_dtype(a.element_type(), &ta) || !to_gemm_dtype(b.element_type(), &tb) ||
      ta == GemmDtype::kF32 || ta != tb)
    return ffi::Error::InvalidArgument(who + "a and b must both be bfloat16 or both float16");
  if (!to_gemm_dtype(d->element_type(), &pr.out_type))
    return ffi::Error::InvalidArgument(who + "the output must be bfloat16, float16 or float32");
  pr.in_type = ta;

  const size_t ra = ad.size(), rb = bd.size(), rd = dd.size();
  pr.m = trans_a ? ad[ra - 1] : ad[ra - 2];
  pr.k = trans_a ? ad[ra - 2] : ad[ra - 1];
  const int64_t kb = trans_b ? bd[rb - 1] : bd[rb - 2];
  pr.n = trans_b ? bd[rb - 2] : bd[rb - 1];
  if (kb != pr.k)
    return ffi::Error::InvalidArgument(who + "contraction sizes differ: a has K=" +
                                       std::to_string(pr.k) + ", b has K=" + std::to_string(kb));
  if (dd[rd - 2] != pr.m || dd[rd - 1] != pr.n)
    return ffi::Error::InvalidArgument(who + "the output must end in (M, N) = (" +
                                       std::to_string(pr.m) + ", " + std::to_string(pr.n) + ")");
  pr.batch = batch_of(dd);
  const int64_t ba = batch_of(ad), bbat = batch_of(bd);
  if ((ba != 1 && ba != pr.batch) || (bbat != 1 && bbat != pr.batch))
    return ffi::Error::InvalidArgument(
        who + "a's and b's batch counts (" + std::to_string(ba) + ", " + std::to_string(bbat) +
        ") must each be 1 or the output's batch count " + std::to_string(pr.batch));
  pr.a_batched = ba != 1 || pr.batch == 1;
  pr.b_batched = bbat != 1 || pr.batch == 1;
  pr.trans_a = trans_a;
  pr.trans_b = trans_b;
  pr.alpha = alpha;
  pr.beta = beta;

  const uint32_t in_bytes = 2, out_bytes = jax_sm100::host::dtype_bytes(pr.out_type);
  if ((ad[ra - 1] * in_bytes) % 16 != 0 || (bd[rb - 1] * in_bytes) % 16 != 0 ||
      (pr.n * out_bytes) % 16 != 0)
    return ffi::Error::InvalidArgument(
        who + "every operand's last dimension must span a multiple of 16 bytes (8 elements of "
              "16-bit, 4 of float32); pad before calling (a: " + std::to_string(ad[ra - 1]) +
        ", b: " + std::to_string(bd[rb - 1]) + ", out: " + std::to_string(pr.n) + ")");

  const bool use_c = c != nullptr && beta != 0.0f;  // beta == 0: C is never read
  if (c != nullptr) {
    auto cd = c->dimensions();
    GemmDtype tc;
    if (!to_gemm_dtype(c->element_type(), &tc) || tc != pr.out_type)
      return ffi::Error::InvalidArgument(who + "c must have the output's dtype");
    if (cd.size() < 2 || cd[cd.size() - 2] != pr.m || cd[cd.size() - 1] != pr.n)
      return ffi::Error::InvalidArgument(who + "c must end in (M, N) = (" + std::to_string(pr.m) +
                                         ", " + std::to_string(pr.n) + ")");
    const int64_t bc = batch_of(cd);
    if (bc != 1 && bc != pr.batch)
      return ffi::Error::InvalidArgument(who + "c's batch count " + std::to_string(bc) +
                                         " must be 1 or the output's " + std::to_string(pr.batch));
    pr.c_batched = bc != 1 || pr.batch == 1;
    if (use_c) pr.c = c->untyped_data();
  }
  pr.a = a.untyped_data();
  pr.b = b.untyped_data();
  pr.d = d->untyped_data();
  pr.tiling = tiling;
  if (pr.m == 0 || pr.n == 0 || pr.batch == 0) return ffi::Error::Success();
  if (pr.m > INT32_MAX || pr.n > INT32_MAX || pr.k > INT32_MAX || pr.batch > INT32_MAX)
    return ffi::Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");

  DeviceInfo dev;
  const std::string err = jax_sm100::host::current_device(&dev);
  if (!err.empty()) return ffi::Error::Internal(who + err);
  switch (dev.arch()) {
    case 90: return run_sm90(name, pr, dev, stream);
    // 10.x: the sm_100a kernels (ffi/src/sm100/) plug in here.
    default: return jax_sm100::host::no_kernel_for_arch(name, dev.cc_major, dev.cc_minor);
  }
}

ffi::Error gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                     ffi::Result<ffi::AnyBuffer> d, bool trans_a, bool trans_b, int32_t block_m,
                     int32_t block_n, int32_t cluster_m, int32_t group_m) {
  return gemm_common("jax_sm100_gemm", stream, a, b, nullptr, &(*d), trans_a, trans_b, 1.0f, 0.0f,
                     GemmTiling{block_m, block_n, cluster_m, group_m});
}

ffi::Error gemm_residual_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                              ffi::AnyBuffer c, ffi::Result<ffi::AnyBuffer> d, bool trans_a,
                              bool trans_b, float alpha, float beta, int32_t block_m,
                              int32_t block_n, int32_t cluster_m, int32_t group_m) {
  return gemm_common("jax_sm100_gemm_residual", stream, a, b, &c, &(*d), trans_a, trans_b, alpha,
                     beta, GemmTiling{block_m, block_n, cluster_m, group_m});
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Gemm, gemm_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b")
                                  .Attr<int32_t>("block_m")
                                  .Attr<int32_t>("block_n")
                                  .Attr<int32_t>("cluster_m")
                                  .Attr<int32_t>("group_m"),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmResidual, gemm_residual_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b")
                                  .Attr<float>("alpha")
                                  .Attr<float>("beta")
                                  .Attr<int32_t>("block_m")
                                  .Attr<int32_t>("block_n")
                                  .Attr<int32_t>("cluster_m")
                                  .Attr<int32_t>("group_m"),
                              {xla::ffi::Traits::kCmdBufferCompatible});
