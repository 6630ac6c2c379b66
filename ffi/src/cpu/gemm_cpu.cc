// CPU (XLA Host platform) handlers of "jax_sm100_gemm" and "jax_sm100_gemm_residual":
// the CUDA handlers' contract (ffi/src/gemm_ffi.cu: operands, attributes, validation and
// messages) computed by plain loops, so that the launch layer, its padding, batching and
// partitioning run end to end on a CPU (JAX_SM100_BACKEND=cpu_ffi). Correctness, not speed.
//
// Numerics (the kernels'): every product of two bf16/f16 values is exact in fp32 and is
// accumulated in fp32 in K order; D = fma(beta, C, alpha * acc) in fp32, rounded once
// (to nearest even) to d's dtype. beta == 0: C is never read. K == 0: D = beta * C, or
// zeros. The tile attributes are validated as on the GPU, then ignored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/ffi_checks.h"
#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::cpu::Elem;

bool to_elem(ffi::DataType t, Elem* out) {
  switch (t) {
    case ffi::BF16: *out = Elem::kBF16; return true;
    case ffi::F16: *out = Elem::kF16; return true;
    case ffi::F32: *out = Elem::kF32; return true;
    default: return false;
  }
}

int64_t elem_bytes(Elem t) { return t == Elem::kF32 ? 4 : 2; }

/// Product of all but the last two dimensions.
int64_t batch_of(ffi::Span<const int64_t> dims) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) b *= dims[i];
  return b;
}

struct Problem {
  Elem in, out;
  int64_t m, n, k, batch;
  bool a_batched, b_batched, c_batched, trans_a, trans_b;
  float alpha, beta;
  const void* a;
  const void* b;
  const void* c;  // null: no residual term (or beta == 0)
  void* d;
};

/// D of one batch entry: acc rows of fp32 over n (each element summed in K order).
void run_batch(const Problem& p, int64_t bi) {
  const int64_t m = p.m, n = p.n, k = p.k;
  const int64_t a_off = p.a_batched ? bi * m * k : 0;
  const int64_t b_off = p.b_batched ? bi * k * n : 0;
  const int64_t c_off = p.c_batched ? bi * m * n : 0;
  const int64_t d_off = bi * m * n;
  // B as fp32 (K, N), row-major, so that the inner loop runs over contiguous n.
  std::vector<float> bt(static_cast<size_t>(k * n));
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j)
      bt[kk * n + j] = jax_sm100::cpu::load(p.b, b_off + (p.trans_b ? j * k + kk : kk * n + j), p.in);
  std::vector<float> arow(static_cast<size_t>(k)), acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk)
      arow[kk] = jax_sm100::cpu::load(p.a, a_off + (p.trans_a ? kk * m + i : i * k + kk), p.in);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = arow[kk];
      const float* brow = &bt[kk * n];
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];  // exact product, fp32 sum
    }
    for (int64_t j = 0; j < n; ++j) {
      float v = p.alpha * acc[j];
      if (p.c != nullptr) v = std::fma(p.beta, jax_sm100::cpu::load(p.c, c_off + i * n + j, p.out), v);
      jax_sm100::cpu::store(p.d, d_off + i * n + j, p.out, v);
    }
  }
}

/// K == 0: nothing to contract, D = beta * C (residual term) or zeros.
void fill_without_product(const Problem& p) {
  const int64_t per = p.m * p.n, total = p.batch * per;
  if (p.c == nullptr) {
    std::memset(p.d, 0, size_t(total * elem_bytes(p.out)));
    return;
  }
  for (int64_t i = 0; i < total; ++i) {
    const int64_t ci = p.c_batched ? i : i % per;
    jax_sm100::cpu::store(p.d, i, p.out, p.beta * jax_sm100::cpu::load(p.c, ci, p.out));
  }
}

/// Validation (as in gemm_ffi.cu) and the computation, shared by both handlers. `c` is
/// null for the plain GEMM.
ffi::Error gemm_common(const char* name, const ffi::AnyBuffer& a, const ffi::AnyBuffer& b,
                       const ffi::AnyBuffer* c, ffi::AnyBuffer* d, bool trans_a, bool trans_b,
                       float alpha, float beta, int32_t block_m, int32_t block_n,
                       int32_t cluster_m, int32_t group_m) {
  const std::string who = std::string(name) + ": ";
  const std::string tiling_err =
      jax_sm100::host::check_gemm_tiling(block_m, block_n, cluster_m, group_m);
  if (!tiling_err.empty()) return ffi::Error::InvalidArgument(who + tiling_err);
  auto ad = a.dimensions();
  auto bd = b.dimensions();
  auto dd = d->dimensions();
  if (ad.size() < 2 || bd.size() < 2 || dd.size() < 2)
    return ffi::Error::InvalidArgument(who + "a, b and the output must have rank >= 2 (got " +
                                       std::to_string(ad.size()) + ", " + std::to_string(bd.size()) +
                                       ", " + std::to_string(dd.size()) + ")");
  Problem pr{};
  Elem ta, tb;
  if (!to_elem(a.element_type(), &ta) || !to_elem(b.element_type(), &tb) || ta == Elem::kF32 ||
      ta != tb)
    return ffi::Error::InvalidArgument(who + "a and b must both be bfloat16 or both float16");
  if (!to_elem(d->element_type(), &pr.out))
    return ffi::Error::InvalidArgument(who + "the output must be bfloat16, float16 or float32");
  pr.in = ta;

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

  const int64_t in_bytes = 2, out_bytes = elem_bytes(pr.out);
  if ((ad[ra - 1] * in_bytes) % 16 != 0 || (bd[rb - 1] * in_bytes) % 16 != 0 ||
      (pr.n * out_bytes) % 16 != 0)
    return ffi::Error::InvalidArgument(
        who + "every operand's last dimension must span a multiple of 16 bytes (8 elements of "
              "16-bit, 4 of float32); pad before calling (a: " + std::to_string(ad[ra - 1]) +
        ", b: " + std::to_string(bd[rb - 1]) + ", out: " + std::to_string(pr.n) + ")");

  const bool use_c = c != nullptr && beta != 0.0f;  // beta == 0: C is never read
  if (c != nullptr) {
    auto cd = c->dimensions();
    Elem tc;
    if (!to_elem(c->element_type(), &tc) || tc != pr.out)
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

  if (pr.k == 0) {
    fill_without_product(pr);
  } else {
    for (int64_t bi = 0; bi < pr.batch; ++bi) run_batch(pr, bi);
  }
  return ffi::Error::Success();
}

ffi::Error gemm_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> d,
                     bool trans_a, bool trans_b, int32_t block_m, int32_t block_n,
                     int32_t cluster_m, int32_t group_m) {
  return gemm_common("jax_sm100_gemm", a, b, nullptr, &(*d), trans_a, trans_b, 1.0f, 0.0f,
                     block_m, block_n, cluster_m, group_m);
}

ffi::Error gemm_residual_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::AnyBuffer c,
                              ffi::Result<ffi::AnyBuffer> d, bool trans_a, bool trans_b,
                              float alpha, float beta, int32_t block_m, int32_t block_n,
                              int32_t cluster_m, int32_t group_m) {
  return gemm_common("jax_sm100_gemm_residual", a, b, &c, &(*d), trans_a, trans_b, alpha, beta,
                     block_m, block_n, cluster_m, group_m);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmCpu, gemm_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b")
                                  .Attr<int32_t>("block_m")
                                  .Attr<int32_t>("block_n")
                                  .Attr<int32_t>("cluster_m")
                                  .Attr<int32_t>("group_m"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100GemmResidualCpu, gemm_residual_impl,
                              ffi::Ffi::Bind()
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
                                  .Attr<int32_t>("group_m"));
