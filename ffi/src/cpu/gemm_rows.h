// The CPU handlers' one GEMM loop (jax_sm100_gemm[_residual], _gemm_bias, _gemm_dact):
// each output row's fp32 accumulators, handed to the handler's epilogue. Numerics: the
// products of bf16/f16 values are exact in fp32, summed in K order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/gemm_problem.h"
#include "cpu/numerics.h"

namespace jax_sm100::cpu {

/// For batch entry bi: epilogue(i, acc) for each row i of op(A) @ op(B), acc the row's n
/// fp32 accumulators (K == 0: zeros).
template <class Epilogue>
void for_each_row(const host::GemmProblem& p, int64_t bi, Epilogue&& epilogue) {
  const int64_t m = p.m, n = p.n, k = p.k;
  const int64_t a_off = p.a_batched ? bi * m * k : 0;
  const int64_t b_off = p.b_batched ? bi * k * n : 0;
  // B as fp32 (K, N), row-major, so that the inner loop runs over contiguous n.
  std::vector<float> bt(static_cast<size_t>(k * n));
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j)
      bt[kk * n + j] = load(p.b, b_off + (p.trans_b ? j * k + kk : kk * n + j), p.in_type);
  std::vector<float> arow(static_cast<size_t>(k)), acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk)
      arow[kk] = load(p.a, a_off + (p.trans_a ? kk * m + i : i * k + kk), p.in_type);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = arow[kk];
      const float* brow = &bt[kk * n];
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];  // exact product, fp32 sum
    }
    epilogue(i, static_cast<const float*>(acc.data()));
  }
}

}  // namespace jax_sm100::cpu
