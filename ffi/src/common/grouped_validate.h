// The grouped GEMMs' one validation, shared by the CUDA handlers (ffi/src/grouped_ffi.cu)
// and the CPU ones (ffi/src/cpu/grouped_gemm_cpu.cc): FFI buffers and attributes in, a
// problem struct (common/grouped_problem.h, with the group bookkeeping rule) or the
// InvalidArgument error out.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_args.h"
#include "common/grouped_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

namespace grouped_detail {

inline std::string rows_aligned_error(const char* what, int64_t elems, uint32_t bytes) {
  if ((elems * int64_t(bytes)) % 16 == 0) return "";
  return std::string(what) + "'s last dimension (" + std::to_string(elems) +
         ") must span a multiple of 16 bytes (8 elements of 16-bit, 4 of float32); pad "
         "before calling";
}

/// group_sizes must be (g,) int32.
inline xla::ffi::Error check_group_sizes(const std::string& who,
                                         const xla::ffi::AnyBuffer& group_sizes, int64_t g) {
  if (group_sizes.element_type() != xla::ffi::S32)
    return xla::ffi::Error::InvalidArgument(who + "group_sizes must be int32");
  auto d = group_sizes.dimensions();
  if (d.size() != 1 || d[0] != g)
    return xla::ffi::Error::InvalidArgument(who + "group_sizes must have shape (G,) = (" +
                                            std::to_string(g) + ",) to match the groups of "
                                            "the weights; got " + dims_str(d));
  return xla::ffi::Error::Success();
}

/// The 16-bit input type shared by two operands.
inline xla::ffi::Error input_types(const std::string& who, const char* names,
                                   const xla::ffi::AnyBuffer& x, const xla::ffi::AnyBuffer& y,
                                   ElemType* out) {
  ElemType tx, ty;
  if (!to_elem_type(x.element_type(), &tx) || !to_elem_type(y.element_type(), &ty) ||
      tx == ElemType::kF32 || tx != ty)
    return xla::ffi::Error::InvalidArgument(who + names + " must both be bfloat16 or both "
                                                          "float16");
  *out = tx;
  return xla::ffi::Error::Success();
}

inline bool fits_int32(int64_t a, int64_t b, int64_t c, int64_t d) {
  return a <= INT32_MAX && b <= INT32_MAX && c <= INT32_MAX && d <= INT32_MAX;
}

}  // namespace grouped_detail

/// Checks one M-grouped call: lhs (m, k), rhs (g, k, n) or (g, n, k) when trans_rhs,
/// group_sizes (g,) int32, out (m, n); errors name `name`.
inline xla::ffi::Error validate_grouped_gemm(const char* name, const xla::ffi::AnyBuffer& lhs,
                                             const xla::ffi::AnyBuffer& rhs,
                                             const xla::ffi::AnyBuffer& group_sizes,
                                             xla::ffi::AnyBuffer* out, bool trans_rhs,
                                             const GroupedTiling& tiling,
                                             GroupedGemmProblem* prob) {
  using xla::ffi::Error;
  namespace gd = grouped_detail;
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err = check_grouped_tiling(tiling);
  if (!tiling_err.empty()) return Error::InvalidArgument(who + tiling_err);
  auto ld = lhs.dimensions(), rd = rhs.dimensions(), od = out->dimensions();
  if (ld.size() != 2 || rd.size() != 3 || od.size() != 2)
    return Error::InvalidArgument(who + "lhs must be (M, K), rhs (G, K, N) (or (G, N, K) with "
                                  "trans_rhs) and the output (M, N); got lhs " + dims_str(ld) +
                                  ", rhs " + dims_str(rd) + ", out " + dims_str(od));
  GroupedGemmProblem p{};
  p.m = ld[0];
  p.k = ld[1];
  p.g = rd[0];
  p.n = trans_rhs ? rd[1] : rd[2];
  const int64_t rk = trans_rhs ? rd[2] : rd[1];
  if (rk != p.k)
    return Error::InvalidArgument(who + "contraction sizes differ: lhs has K=" +
                                  std::to_string(p.k) + ", rhs has K=" + std::to_string(rk));
  if (od[0] != p.m || od[1] != p.n)
    return Error::InvalidArgument(who + "the output must have shape (M, N) = (" +
                                  std::to_string(p.m) + ", " + std::to_string(p.n) + "); got " +
                                  dims_str(od));
  Error e = gd::check_group_sizes(who, group_sizes, p.g);
  if (e.failure()) return e;
  e = gd::input_types(who, "lhs and rhs", lhs, rhs, &p.in_type);
  if (e.failure()) return e;
  if (!to_elem_type(out->element_type(), &p.out_type))
    return Error::InvalidArgument(who + "the output must be bfloat16, float16 or float32");
  for (const std::string& err :
       {gd::rows_aligned_error("lhs", p.k, 2), gd::rows_aligned_error("rhs", rd[2], 2),
        gd::rows_aligned_error("the output", p.n, elem_bytes(p.out_type))})
    if (!err.empty()) return Error::InvalidArgument(who + err);
  if (!gd::fits_int32(p.m, p.n, p.k, p.g))
    return Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");
  p.lhs = lhs.untyped_data();
  p.rhs = rhs.untyped_data();
  p.group_sizes = static_cast<const int32_t*>(group_sizes.untyped_data());
  p.out = out->untyped_data();
  p.trans_rhs = trans_rhs;
  p.tiling = tiling;
  *prob = p;
  return Error::Success();
}

/// Checks one K-grouped call: lhs (m, k), dy (m, n), group_sizes (g,) int32, out (g, k, n);
/// errors name `name`.
inline xla::ffi::Error validate_kgrouped_gemm(const char* name, const xla::ffi::AnyBuffer& lhs,
                                              const xla::ffi::AnyBuffer& dy,
                                              const xla::ffi::AnyBuffer& group_sizes,
                                              xla::ffi::AnyBuffer* out,
                                              const GroupedTiling& tiling,
                                              KGroupedGemmProblem* prob) {
  using xla::ffi::Error;
  namespace gd = grouped_detail;
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err = check_grouped_tiling(tiling);
  if (!tiling_err.empty()) return Error::InvalidArgument(who + tiling_err);
  auto ld = lhs.dimensions(), dd = dy.dimensions(), od = out->dimensions();
  if (ld.size() != 2 || dd.size() != 2 || od.size() != 3 || ld[0] != dd[0])
    return Error::InvalidArgument(who + "lhs must be (M, K), dy (M, N) with the same M and the "
                                  "output (G, K, N); got lhs " + dims_str(ld) + ", dy " +
                                  dims_str(dd) + ", out " + dims_str(od));
  KGroupedGemmProblem p{};
  p.m = ld[0];
  p.k = ld[1];
  p.n = dd[1];
  p.g = od[0];
  if (od[1] != p.k || od[2] != p.n)
    return Error::InvalidArgument(who + "the output must have shape (G, K, N) = (" +
                                  std::to_string(p.g) + ", " + std::to_string(p.k) + ", " +
                                  std::to_string(p.n) + "); got " + dims_str(od));
  Error e = gd::check_group_sizes(who, group_sizes, p.g);
  if (e.failure()) return e;
  e = gd::input_types(who, "lhs and dy", lhs, dy, &p.in_type);
  if (e.failure()) return e;
  if (!to_elem_type(out->element_type(), &p.out_type))
    return Error::InvalidArgument(who + "the output must be bfloat16, float16 or float32");
  for (const std::string& err :
       {gd::rows_aligned_error("lhs", p.k, 2), gd::rows_aligned_error("dy", p.n, 2),
        gd::rows_aligned_error("the output", p.n, elem_bytes(p.out_type))})
    if (!err.empty()) return Error::InvalidArgument(who + err);
  if (!gd::fits_int32(p.m, p.n, p.k, p.g))
    return Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");
  p.lhs = lhs.untyped_data();
  p.dy = dy.untyped_data();
  p.group_sizes = static_cast<const int32_t*>(group_sizes.untyped_data());
  p.out = out->untyped_data();
  p.tiling = tiling;
  *prob = p;
  return Error::Success();
}

/// Checks one FP8 M-grouped call: a (m, k) e4m3, a_scale_t (ceil(k/128), round_up(m, 4))
/// f32, b (g, n, k) e4m3, b_scale (g, ceil(n/128), ceil(k/128)) f32, group_sizes (g,)
/// int32, out (m, n) bf16; k % 16 == 0, n % 8 == 0, k <= kFp8MaxK. Errors name `name`.
inline xla::ffi::Error validate_fp8_grouped_gemm(
    const char* name, const xla::ffi::AnyBuffer& a, const xla::ffi::AnyBuffer& a_scale_t,
    const xla::ffi::AnyBuffer& b, const xla::ffi::AnyBuffer& b_scale,
    const xla::ffi::AnyBuffer& group_sizes, xla::ffi::Buffer<xla::ffi::BF16>& out,
    const GroupedTiling& tiling, Fp8GroupedGemmProblem* prob) {
  using xla::ffi::Error;
  namespace gd = grouped_detail;
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err = check_grouped_tiling(tiling, kFp8GroupedTilings);
  if (!tiling_err.empty()) return Error::InvalidArgument(who + tiling_err);
  if (a.element_type() != xla::ffi::F8E4M3FN || b.element_type() != xla::ffi::F8E4M3FN)
    return Error::InvalidArgument(who + "a and b must be float8_e4m3fn");
  if (a_scale_t.element_type() != xla::ffi::F32 || b_scale.element_type() != xla::ffi::F32)
    return Error::InvalidArgument(who + "a_scale and b_scale must be float32");
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 3 || ad[1] != bd[2])
    return Error::InvalidArgument(who + "a must be (M, K) and b (G, N, K) with the same K; got "
                                  "a " + dims_str(ad) + ", b " + dims_str(bd));
  Fp8GroupedGemmProblem p{};
  p.m = ad[0];
  p.k = ad[1];
  p.g = bd[0];
  p.n = bd[1];
  p.mp = (p.m + 3) / 4 * 4;
  const int64_t kb = (p.k + 127) / 128, nb = (p.n + 127) / 128;
  auto sad = a_scale_t.dimensions(), sbd = b_scale.dimensions();
  if (sad.size() != 2 || sad[0] != kb || sad[1] != p.mp)
    return Error::InvalidArgument(
        who + "a_scale must be given transposed and padded, shape (ceil(K/128), "
              "round_up(M, 4)) = (" + std::to_string(kb) + ", " + std::to_string(p.mp) +
        "); got " + dims_str(sad));
  if (sbd.size() != 3 || sbd[0] != p.g || sbd[1] != nb || sbd[2] != kb)
    return Error::InvalidArgument(who + "b_scale must have shape (G, ceil(N/128), ceil(K/128)) "
                                  "= (" + std::to_string(p.g) + ", " + std::to_string(nb) +
                                  ", " + std::to_string(kb) + "); got " + dims_str(sbd));
  auto od = out.dimensions();
  if (od.size() != 2 || od[0] != p.m || od[1] != p.n)
    return Error::InvalidArgument(who + "the output must have shape (M, N) = (" +
                                  std::to_string(p.m) + ", " + std::to_string(p.n) + "); got " +
                                  dims_str(od));
  Error e = gd::check_group_sizes(who, group_sizes, p.g);
  if (e.failure()) return e;
  if (p.k % 16 != 0 || p.n % 8 != 0)
    return Error::InvalidArgument(
        who + "K must be a multiple of 16 and N a multiple of 8 (TMA row alignment); pad "
              "the operands (zeros in K change nothing)");
  if (p.k > kFp8MaxK)
    return Error::InvalidArgument(who + "K must be <= " + std::to_string(kFp8MaxK));
  if (!gd::fits_int32(p.mp, p.n, p.k, p.g))
    return Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");
  p.a = a.untyped_data();
  p.a_scale_t = static_cast<const float*>(a_scale_t.untyped_data());
  p.b = b.untyped_data();
  p.b_scale = static_cast<const float*>(b_scale.untyped_data());
  p.group_sizes = static_cast<const int32_t*>(group_sizes.untyped_data());
  p.out = out.untyped_data();
  p.tiling = tiling;
  *prob = p;
  return Error::Success();
}

}  // namespace jax_sm100::host
