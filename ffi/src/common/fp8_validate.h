// The blockwise-scaled FP8 GEMM's one validation, shared by the CUDA handlers
// (ffi/src/fp8_ffi.cu) and the CPU ones (ffi/src/cpu/fp8_gemm_cpu.cc): FFI buffers and
// attributes in, an Fp8GemmProblem (common/fp8_problem.h) or the InvalidArgument error out.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_args.h"
#include "common/fp8_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// Checks the buffers and attributes of one FP8 GEMM call (`c` null for the plain target)
/// and fills `out`; errors name `name`.
inline xla::ffi::Error validate_fp8_gemm(const char* name, const xla::ffi::AnyBuffer& a,
                                         const xla::ffi::AnyBuffer& a_scale_t,
                                         const xla::ffi::AnyBuffer& b,
                                         const xla::ffi::AnyBuffer& b_scale,
                                         const xla::ffi::Buffer<xla::ffi::BF16>* c, float beta,
                                         xla::ffi::Buffer<xla::ffi::BF16>& d,
                                         const Fp8Tiling& tiling, Fp8GemmProblem* out) {
  using xla::ffi::Error;
  const std::string who = std::string(name) + ": ";
  // beta == 0: C is not read at all (a NaN in C must not leak into D): the plain kernel.
  const bool residual = c != nullptr && beta != 0.0f;
  const std::string tiling_err = check_fp8_tiling(tiling.block_m, tiling.block_n, tiling.cluster,
                                                  tiling.pair_along_n, tiling.group_m, residual);
  if (!tiling_err.empty()) return Error::InvalidArgument(who + tiling_err);
  if (a.element_type() != xla::ffi::F8E4M3FN || b.element_type() != xla::ffi::F8E4M3FN)
    return Error::InvalidArgument(who + "a and b must be float8_e4m3fn");
  if (a_scale_t.element_type() != xla::ffi::F32 || b_scale.element_type() != xla::ffi::F32)
    return Error::InvalidArgument(who + "a_scale and b_scale must be float32");
  Fp8GemmProblem o{};
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 2 || ad[1] != bd[1])
    return Error::InvalidArgument(who + "a must be (M, K) and b (N, K) with the same K; got a " +
                                  dims_str(ad) + ", b " + dims_str(bd));
  o.m = ad[0];
  o.k = ad[1];
  o.n = bd[0];
  o.mp = (o.m + 3) / 4 * 4;
  const int64_t kb = (o.k + 127) / 128, nb = (o.n + 127) / 128;
  auto sad = a_scale_t.dimensions(), sbd = b_scale.dimensions();
  if (sad.size() != 2 || sad[0] != kb || sad[1] != o.mp)
    return Error::InvalidArgument(
        who + "a_scale must be given transposed and padded, shape "
              "(ceil(K/128), round_up(M, 4)) = (" + std::to_string(kb) + ", " +
        std::to_string(o.mp) + "); got " + dims_str(sad));
  if (sbd.size() != 2 || sbd[0] != nb || sbd[1] != kb)
    return Error::InvalidArgument(who + "b_scale must have shape (ceil(N/128), ceil(K/128)) = (" +
                                  std::to_string(nb) + ", " + std::to_string(kb) + "); got " +
                                  dims_str(sbd));
  auto dd = d.dimensions();
  if (dd.size() != 2 || dd[0] != o.m || dd[1] != o.n)
    return Error::InvalidArgument(who + "d must have shape (M, N)");
  if (o.k % 16 != 0 || o.n % 8 != 0)
    return Error::InvalidArgument(
        who + "K must be a multiple of 16 and N a multiple of 8 (TMA row alignment); pad "
              "the operands (zeros in K change nothing)");
  if (o.k > kFp8MaxK) return Error::InvalidArgument(who + "K must be <= " + std::to_string(kFp8MaxK));
  if (o.m > INT32_MAX / 2 || o.n > INT32_MAX / 2)
    return Error::InvalidArgument(who + "M and N must fit in int32");
  o.a = a.untyped_data();
  o.a_scale_t = static_cast<const float*>(a_scale_t.untyped_data());
  o.b = b.untyped_data();
  o.b_scale = static_cast<const float*>(b_scale.untyped_data());
  o.c = nullptr;
  o.beta = 0.0f;
  if (c != nullptr) {
    auto cd = c->dimensions();
    if (cd.size() != 2 || cd[0] != o.m || cd[1] != o.n)
      return Error::InvalidArgument(who + "c must have shape (M, N)");
    if (o.k == 0 && o.m != 0 && o.n != 0) return Error::InvalidArgument(who + "K must be positive");
    if (residual) o.c = c->untyped_data();
    o.beta = beta;
  }
  o.d = d.untyped_data();
  o.tiling = tiling;
  *out = o;
  return Error::Success();
}

}  // namespace jax_sm100::host
