// XLA FFI handlers "jax_sm100_gemm" and "jax_sm100_gemm_residual" (sm_90a kernels).
//
//   jax_sm100_gemm:          (a, b)    -> d    attrs trans_a: bool, trans_b: bool
//   jax_sm100_gemm_residual: (a, b, c) -> d    attrs trans_a, trans_b, alpha: f32, beta: f32
//
//   a: (..., M, K), or (..., K, M) when trans_a;  b: (..., K, N), or (..., N, K) when trans_b;
//   d: (..., M, N) row-major; c: d's shape and dtype. Each operand's leading dims flatten
//   to one batch count that must be 1 (broadcast) or d's batch count.
//   a, b: both bf16 or both f16; d: bf16, f16 or f32. Every operand's last dimension
//   must span a multiple of 16 bytes (TMA row strides); the Python layer pads.
//
// Semantics: D = alpha * (A @ B) + beta * C with fp32 accumulation and fp32 epilogue
// math, rounded once to d's dtype. beta == 0: C is never read (a NaN in C does not
// reach D). K == 0: D = beta * C (or zeros).
//
// Graph safety (kCmdBufferCompatible): the execute path only encodes tensor maps on the
// host (passed as __grid_constant__ kernel parameters), reads cached device attributes
// and launches; no allocation, no host synchronisation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "targets.h"
#include "sm90/gemm_launch.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::host::GemmDtype;
using jax_sm100::host::GemmProblem;
using jax_sm100::host::Sm90TileConfig;

/// Per-device properties read once (multiprocessor count, compute capability).
struct DeviceInfo {
  int num_sms = 0;
  int cc_major = 0, cc_minor = 0;
};

std::string device_info(DeviceInfo* out) {
  static std::mutex mu;
  static std::unordered_map<int, DeviceInfo> cache;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return std::string("cudaGetDevice failed: ") + cudaGetErrorString(e);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it == cache.end()) {
    DeviceInfo info;
    if ((e = cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&info.cc_major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&info.cc_minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess)
      return std::string("cudaDeviceGetAttribute failed: ") + cudaGetErrorString(e);
    it = cache.emplace(dev, info).first;
  }
  *out = it->second;
  return "";
}

/// Tile config per (m, n, batch, #SMs), chosen once per shape (deterministic).
Sm90TileConfig cached_config(int64_t m, int64_t n, int64_t batch, int num_sms) {
  struct Key {
    int64_t m, n, batch;
    int sms;
    bool operator==(const Key& o) const {
      return m == o.m && n == o.n && batch == o.batch && sms == o.sms;
    }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      size_t h = std::hash<int64_t>()(k.m);
      h = h * 1000003u ^ std::hash<int64_t>()(k.n);
      h = h * 1000003u ^ std::hash<int64_t>()(k.batch);
      return h * 1000003u ^ std::hash<int>()(k.sms);
    }
  };
  static std::mutex mu;
  static std::unordered_map<Key, Sm90TileConfig, Hash> cache;
  const Key key{m, n, batch, num_sms};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Sm90TileConfig cfg = jax_sm100::host::choose_config(m, n, batch, num_sms);
  cache.emplace(key, cfg);
  return cfg;
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
std::string dispatch_out(const GemmProblem& pr, Sm90TileConfig cfg, int sms, cudaStream_t s) {
  switch (pr.out_type) {
    case GemmDtype::kBF16: return jax_sm100::host::sm90_gemm_launch<T, __nv_bfloat16>(pr, cfg, sms, s);
    case GemmDtype::kF16: return jax_sm100::host::sm90_gemm_launch<T, __half>(pr, cfg, sms, s);
    case GemmDtype::kF32: return jax_sm100::host::sm90_gemm_launch<T, float>(pr, cfg, sms, s);
  }
  return "unsupported output type";
}

/// Shared validation + launch of both handlers. `c` is null for the plain GEMM.
ffi::Error gemm_common(const char* name, cudaStream_t stream, const ffi::AnyBuffer& a,
                       const ffi::AnyBuffer& b, const ffi::AnyBuffer* c, ffi::AnyBuffer* d,
                       bool trans_a, bool trans_b, float alpha, float beta) {
  const std::string who = std::string(name) + ": ";
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
  if (pr.m == 0 || pr.n == 0 || pr.batch == 0) return ffi::Error::Success();
  if (pr.m > INT32_MAX || pr.n > INT32_MAX || pr.k > INT32_MAX || pr.batch > INT32_MAX)
    return ffi::Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");

  DeviceInfo info;
  std::string err = device_info(&info);
  if (!err.empty()) return ffi::Error::Internal(who + err);
  if (info.cc_major != 9 || info.cc_minor != 0)
    return ffi::Error(ffi::ErrorCode::kUnimplemented,
                      who + "the kernel needs an sm_90 GPU (H100/H200); this one is sm_" +
                          std::to_string(info.cc_major) + std::to_string(info.cc_minor));

  if (pr.k == 0) {  // nothing to contract: D = beta * C, or zeros
    const int64_t total = pr.batch * pr.m * pr.n;
    cudaError_t e;
    if (!use_c) {
      e = cudaMemsetAsync(pr.d, 0, total * out_bytes, stream);
    } else {
      const int blocks = (int)std::min<int64_t>((total + 255) / 256, (int64_t)info.num_sms * 8);
      switch (pr.out_type) {
        case GemmDtype::kBF16:
          scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(pr.c),
                                                     static_cast<__nv_bfloat16*>(pr.d), pr.m * pr.n,
                                                     total, pr.c_batched, beta);
          break;
        case GemmDtype::kF16:
          scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(pr.c),
                                                     static_cast<__half*>(pr.d), pr.m * pr.n, total,
                                                     pr.c_batched, beta);
          break;
        case GemmDtype::kF32:
          scale_c_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(pr.c),
                                                     static_cast<float*>(pr.d), pr.m * pr.n, total,
                                                     pr.c_batched, beta);
          break;
      }
      e = cudaGetLastError();
    }
    if (e != cudaSuccess) return ffi::Error::Internal(who + cudaGetErrorString(e));
    return ffi::Error::Success();
  }

  Sm90TileConfig cfg = cached_config(pr.m, pr.n, pr.batch, info.num_sms);
  // Tuning knob for benchmarks/tests only: JAX_SM100_SM90_CONFIG=0|1|2|3 forces a tile
  // config (see Sm90TileConfig); unset in normal use.
  if (const char* force = std::getenv("JAX_SM100_SM90_CONFIG")) {
    if (force[0] >= '0' && force[0] <= '3' && force[1] == 0)
      cfg = static_cast<Sm90TileConfig>(force[0] - '0');
  }
  pr.cluster = jax_sm100::host::choose_cluster(cfg, pr.m, pr.n, pr.batch, info.num_sms);
  // Tuning knob: JAX_SM100_SM90_CLUSTER=1 turns the 2-CTA clusters off (=2 forces them
  // where the config allows: 128-row tiles).
  if (const char* force = std::getenv("JAX_SM100_SM90_CLUSTER")) {
    if (force[0] == '1' && force[1] == 0) pr.cluster = 1;
    if (force[0] == '2' && force[1] == 0 &&
        (cfg == Sm90TileConfig::k128x256 || cfg == Sm90TileConfig::k128x128))
      pr.cluster = 2;
  }
  err = pr.in_type == GemmDtype::kBF16 ? dispatch_out<__nv_bfloat16>(pr, cfg, info.num_sms, stream)
                                       : dispatch_out<__half>(pr, cfg, info.num_sms, stream);
  if (!err.empty()) return ffi::Error::Internal(who + err);
  return ffi::Error::Success();
}

ffi::Error gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                     ffi::Result<ffi::AnyBuffer> d, bool trans_a, bool trans_b) {
  return gemm_common("jax_sm100_gemm", stream, a, b, nullptr, &(*d), trans_a, trans_b, 1.0f, 0.0f);
}

ffi::Error gemm_residual_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                              ffi::AnyBuffer c, ffi::Result<ffi::AnyBuffer> d, bool trans_a,
                              bool trans_b, float alpha, float beta) {
  return gemm_common("jax_sm100_gemm_residual", stream, a, b, &c, &(*d), trans_a, trans_b, alpha,
                     beta);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Gemm, gemm_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b"),
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
                                  .Attr<float>("beta"),
                              {xla::ffi::Traits::kCmdBufferCompatible});
