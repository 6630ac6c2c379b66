// The bf16/fp16 GEMM's problem description and its one validation, shared by the CUDA
// handlers (ffi/src/gemm_ffi.cu) and the CPU ones (ffi/src/cpu/gemm_cpu.cc): FFI buffers
// and attributes in, a GemmProblem (shapes, dtypes, batch counts, data pointers, the
// kernel choice) or the InvalidArgument error out. No CUDA headers here; the sm90 launch
// layer (sm90/gemm_launch.h) takes the same struct.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_checks.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// Element types the GEMM handles (a and b share one input type).
using GemmDtype = ElemType;

/// Bytes per element.
inline uint32_t dtype_bytes(GemmDtype t) { return elem_bytes(t); }

/// The kernel choice of one call (FFI attributes block_m, block_n, cluster_m, group_m,
/// split_k), made in Python. The handler checks it against the compiled set before any launch.
struct GemmTiling {
  int block_m = 128, block_n = 256;
  int cluster_m = 1;  ///< CTAs per cluster along M (2: pairs of M tiles share a multicast B tile)
  int group_m = 8;    ///< cluster rows per L2 group of the persistent tile order, in [1, 64]
  int split_k = 1;    ///< > 1: the split-K kernel, a cluster of split_k CTAs per tile (sm90)
};

/// One (batched) GEMM call as validated by the handler.
struct GemmProblem {
  const void* a;
  const void* b;
  const void* c;  ///< nullptr when the residual term is off (beta == 0 or plain GEMM)
  void* d;
  GemmDtype in_type;   ///< bf16 or f16
  GemmDtype out_type;  ///< bf16, f16 or f32 (c has the same type)
  int64_t m, n, k;
  int64_t batch;  ///< D's batch count (>= 1)
  bool a_batched, b_batched, c_batched;
  bool trans_a, trans_b;
  float alpha, beta;
  GemmTiling tiling;
  // The fused bias/activation epilogue (target jax_sm100_gemm_bias; the plain and residual
  // targets leave these at their defaults): z = alpha * acc + bias[col] in fp32,
  // d = act(z), and z itself into `pre` when it is not null (the backward pass's input).
  const float* bias = nullptr;  ///< (n,) f32, the same for every row and batch; null: none
  void* pre = nullptr;          ///< z in out_type, d's layout; null: not written
  int32_t activation = 0;       ///< kernels::Activation (kernels/common/activation.h)

  /// No output element to write (the handler returns at once).
  bool empty() const { return m == 0 || n == 0 || batch == 0; }
};

/// Product of all but the last two dimensions.
inline int64_t batch_of(xla::ffi::Span<const int64_t> dims) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) b *= dims[i];
  return b;
}

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
