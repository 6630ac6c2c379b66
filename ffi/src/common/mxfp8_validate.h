// The MXFP8 block-scaled GEMM's one validation, shared by the CUDA handler
// (ffi/src/mxfp8_ffi.cu) and the CPU one (ffi/src/cpu/mxfp8_gemm_cpu.cc): FFI buffers and
// attributes in, an Mxfp8GemmProblem (common/mxfp8_problem.h) or the InvalidArgument
// error out.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_args.h"
#include "common/mxfp8_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

inline bool mxfp8_element(xla::ffi::DataType t, bool* e5m2) {
  if (t == xla::ffi::DataType::F8E4M3FN) *e5m2 = false;
  else if (t == xla::ffi::DataType::F8E5M2) *e5m2 = true;
  else return false;
  return true;
}

/// Checks the buffers and attributes of one MXFP8 GEMM call and fills `out`; errors name
/// `name`.
inline xla::ffi::Error validate_mxfp8_gemm(const char* name, const xla::ffi::AnyBuffer& a,
                                           const xla::ffi::AnyBuffer& a_scale,
                                           const xla::ffi::AnyBuffer& b,
                                           const xla::ffi::AnyBuffer& b_scale,
                                           const xla::ffi::AnyBuffer& d, int32_t block_n,
                                           int32_t group_m, Mxfp8GemmProblem* out) {
  using xla::ffi::Error;
  namespace ks = jax_sm100::kernels::sm100;
  const std::string who = std::string(name) + ": ";
  if (block_n != kMxfp8BlockNs[0] && block_n != kMxfp8BlockNs[1])
    return Error::InvalidArgument(who + "no kernel for block_n = " + std::to_string(block_n) +
                                  "; the valid values are 128, 256");
  const std::string gm = group_m_error(group_m);
  if (!gm.empty()) return Error::InvalidArgument(who + gm);
  Mxfp8GemmProblem o{};
  if (!mxfp8_element(a.element_type(), &o.a_e5m2) || !mxfp8_element(b.element_type(), &o.b_e5m2))
    return Error::InvalidArgument(who + "a and b must be float8_e4m3fn or float8_e5m2");
  if (a_scale.element_type() != xla::ffi::DataType::F8E8M0FNU ||
      b_scale.element_type() != xla::ffi::DataType::F8E8M0FNU)
    return Error::InvalidArgument(who + "a_scale and b_scale must be float8_e8m0fnu");
  if (!to_elem_type(d.element_type(), &o.out_type))
    return Error::InvalidArgument(who + "d must be bfloat16, float16 or float32");
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 2 || ad[1] != bd[1])
    return Error::InvalidArgument(who + "a must be (M, K) and b (N, K) with the same K; got a " +
                                  dims_str(ad) + ", b " + dims_str(bd));
  o.m = ad[0];
  o.k = ad[1];
  o.n = bd[0];
  auto check_scale = [&](const xla::ffi::AnyBuffer& s, const char* what, int64_t rows) -> std::string {
    const int64_t kt = ks::mx_scale_k_tiles(o.k), rt = ks::mx_scale_row_tiles(rows);
    auto sd = s.dimensions();
    if (sd.size() == 4 && sd[0] == kt && sd[1] == rt && sd[2] == 32 && sd[3] == 16) return "";
    return std::string(what) + " must be in the tiled layout (ceil(K/128), round_up(ceil(" +
           (what[0] == 'a' ? "M" : "N") + "/128), 2), 32, 16) = (" + std::to_string(kt) + ", " +
           std::to_string(rt) + ", 32, 16); got " + dims_str(sd);
  };
  std::string serr = check_scale(a_scale, "a_scale", o.m);
  if (serr.empty()) serr = check_scale(b_scale, "b_scale", o.n);
  if (!serr.empty()) return Error::InvalidArgument(who + serr);
  auto dd = d.dimensions();
  if (dd.size() != 2 || dd[0] != o.m || dd[1] != o.n)
    return Error::InvalidArgument(who + "d must have shape (M, N) = (" + std::to_string(o.m) + ", " +
                                  std::to_string(o.n) + "); got " + dims_str(dd));
  if (o.k % 16 != 0 || (o.n * elem_bytes(o.out_type)) % 16 != 0)
    return Error::InvalidArgument(
        who + "K must be a multiple of 16 and d's rows must span a multiple of 16 bytes (TMA "
              "row alignment); pad the operands (zeros in K change nothing)");
  if (o.m > INT32_MAX / 2 || o.n > INT32_MAX / 2 || o.k > INT32_MAX / 2)
    return Error::InvalidArgument(who + "M, N and K must fit in int32");
  o.a = a.untyped_data();
  o.a_scale = a_scale.untyped_data();
  o.b = b.untyped_data();
  o.b_scale = b_scale.untyped_data();
  o.d = d.untyped_data();
  o.block_n = block_n;
  o.group_m = group_m;
  *out = o;
  return Error::Success();
}

}  // namespace jax_sm100::host
