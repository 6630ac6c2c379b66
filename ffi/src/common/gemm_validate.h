// The bf16/fp16 GEMM's one validation, shared by the CUDA handlers (ffi/src/gemm_ffi.cu)
// and the CPU ones (ffi/src/cpu/gemm_cpu.cc): FFI buffers and attributes in, a GemmProblem
// (common/gemm_problem.h) or the InvalidArgument error out.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_args.h"
#include "common/gemm_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// Checks the buffers and attributes of one GEMM call (`c` null for the plain GEMM) and
/// fills `pr`; errors name `name`. On success with pr.empty() there is nothing to compute
/// (the 32-bit size limit is then not checked).
inline xla::ffi::Error validate_gemm(const char* name, const xla::ffi::AnyBuffer& a,
                                     const xla::ffi::AnyBuffer& b, const xla::ffi::AnyBuffer* c,
                                     xla::ffi::AnyBuffer* d, bool trans_a, bool trans_b,
                                     float alpha, float beta, const GemmTiling& tiling,
                                     GemmProblem* out) {
  using xla::ffi::Error;
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err =
      check_gemm_tiling(tiling.block_m, tiling.block_n, tiling.cluster_m, tiling.group_m,
                        tiling.split_k);
  if (!tiling_err.empty()) return Error::InvalidArgument(who + tiling_err);
  auto ad = a.dimensions();
  auto bd = b.dimensions();
  auto dd = d->dimensions();
  if (ad.size() < 2 || bd.size() < 2 || dd.size() < 2)
    return Error::InvalidArgument(who + "a, b and the output must have rank >= 2 (got " +
                                  std::to_string(ad.size()) + ", " + std::to_string(bd.size()) +
                                  ", " + std::to_string(dd.size()) + ")");
  GemmProblem pr{};
  GemmDtype ta, tb;
  if (!to_elem_type(a.element_type(), &ta) || !to_elem_type(b.element_type(), &tb) ||
      ta == GemmDtype::kF32 || ta != tb)
    return Error::InvalidArgument(who + "a and b must both be bfloat16 or both float16");
  if (!to_elem_type(d->element_type(), &pr.out_type))
    return Error::InvalidArgument(who + "the output must be bfloat16, float16 or float32");
  pr.in_type = ta;

  const size_t ra = ad.size(), rb = bd.size(), rd = dd.size();
  pr.m = trans_a ? ad[ra - 1] : ad[ra - 2];
  pr.k = trans_a ? ad[ra - 2] : ad[ra - 1];
  const int64_t kb = trans_b ? bd[rb - 1] : bd[rb - 2];
  pr.n = trans_b ? bd[rb - 2] : bd[rb - 1];
  if (kb != pr.k)
    return Error::InvalidArgument(who + "contraction sizes differ: a has K=" +
                                  std::to_string(pr.k) + ", b has K=" + std::to_string(kb));
  if (dd[rd - 2] != pr.m || dd[rd - 1] != pr.n)
    return Error::InvalidArgument(who + "the output must end in (M, N) = (" +
                                  std::to_string(pr.m) + ", " + std::to_string(pr.n) + ")");
  pr.batch = batch_of(dd);
  const int64_t ba = batch_of(ad), bbat = batch_of(bd);
  if ((ba != 1 && ba != pr.batch) || (bbat != 1 && bbat != pr.batch))
    return Error::InvalidArgument(
        who + "a's and b's batch counts (" + std::to_string(ba) + ", " + std::to_string(bbat) +
        ") must each be 1 or the output's batch count " + std::to_string(pr.batch));
  pr.a_batched = ba != 1 || pr.batch == 1;
  pr.b_batched = bbat != 1 || pr.batch == 1;
  pr.trans_a = trans_a;
  pr.trans_b = trans_b;
  pr.alpha = alpha;
  pr.beta = beta;

  const int64_t in_bytes = 2, out_bytes = elem_bytes(pr.out_type);
  if ((ad[ra - 1] * in_bytes) % 16 != 0 || (bd[rb - 1] * in_bytes) % 16 != 0 ||
      (pr.n * out_bytes) % 16 != 0)
    return Error::InvalidArgument(
        who + "every operand's last dimension must span a multiple of 16 bytes (8 elements of "
              "16-bit, 4 of float32); pad before calling (a: " + std::to_string(ad[ra - 1]) +
        ", b: " + std::to_string(bd[rb - 1]) + ", out: " + std::to_string(pr.n) + ")");

  const bool use_c = c != nullptr && beta != 0.0f;  // beta == 0: C is never read
  if (c != nullptr) {
    auto cd = c->dimensions();
    GemmDtype tc;
    if (!to_elem_type(c->element_type(), &tc) || tc != pr.out_type)
      return Error::InvalidArgument(who + "c must have the output's dtype");
    if (cd.size() < 2 || cd[cd.size() - 2] != pr.m || cd[cd.size() - 1] != pr.n)
      return Error::InvalidArgument(who + "c must end in (M, N) = (" + std::to_string(pr.m) +
                                    ", " + std::to_string(pr.n) + ")");
    const int64_t bc = batch_of(cd);
    if (bc != 1 && bc != pr.batch)
      return Error::InvalidArgument(who + "c's batch count " + std::to_string(bc) +
                                    " must be 1 or the output's " + std::to_string(pr.batch));
    pr.c_batched = bc != 1 || pr.batch == 1;
    if (use_c) pr.c = c->untyped_data();
  }
  pr.a = a.untyped_data();
  pr.b = b.untyped_data();
  pr.d = d->untyped_data();
  pr.tiling = tiling;
  *out = pr;
  if (pr.empty()) return Error::Success();
  if (pr.m > INT32_MAX || pr.n > INT32_MAX || pr.k > INT32_MAX || pr.batch > INT32_MAX)
    return Error::InvalidArgument(who + "dimensions must fit in 32-bit integers");
  return Error::Success();
}

}  // namespace jax_sm100::host
