// Host side of the short-K dact kernel (kernels/sm90/gemm_dact_short_k.cuh): the tiling
// (64, 256, 1) of target jax_sm100_gemm_dact, for K <= 64. One kernel per (16-bit type,
// activation): 2 x 4. A persistent grid: as many CTAs as fit on the SMs at the launch's
// shared memory (which grows with K), at most one per tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/launch.h"
#include "jax_sm100/kernels/sm90/gemm_dact_short_k.cuh"
#include "sm90/gemm_launch.h"

namespace jax_sm100::host {

namespace {

using kernels::Activation;
namespace ksm90 = kernels::sm90;

template <class T, Activation A>
std::string launch_one(const ksm90::ShortKDactParams& p, int64_t tiles, int num_sms,
                       cudaStream_t stream) {
  constexpr auto kernel = ksm90::gemm_dact_short_k_kernel<T, A>;
  constexpr int kK = ksm90::kShortKMaxK;  // the largest launch: K = 64, any layout
  constexpr int kMaxSmem = std::max({ksm90::short_k::smem_bytes(kK, false, false),
                                     ksm90::short_k::smem_bytes(kK, false, true),
                                     ksm90::short_k::smem_bytes(kK, true, false),
                                     ksm90::short_k::smem_bytes(kK, true, true)});
  if (set_smem_limit_once<kernel>(kMaxSmem) != cudaSuccess)
    return "could not raise the short-K dact kernel's shared memory limit";
  const int kp = (p.k + 15) / 16 * 16;
  const int smem = ksm90::short_k::smem_bytes(kp, p.trans_a, p.trans_b);
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, ksm90::kShortKThreads,
                                                    smem) != cudaSuccess ||
      per_sm <= 0) {
    cudaGetLastError();
    per_sm = 1;
  }
  const int64_t grid = std::min<int64_t>(tiles, static_cast<int64_t>(per_sm) * num_sms);
  kernel<<<static_cast<unsigned>(grid), ksm90::kShortKThreads, smem, stream>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("short-K dact launch: ") + cudaGetErrorString(e);
}

}  // namespace

template <class T>
std::string sm90_gemm_dact_short_k_launch(const GemmProblem& pr, int num_sms, cudaStream_t stream) {
  if (!pr.dact || pr.c == nullptr) return "the dact epilogue needs its C operand";
  if (pr.k > ksm90::kShortKMaxK)
    return "the short-K dact kernel takes K <= " + std::to_string(ksm90::kShortKMaxK) +
           " (got " + std::to_string(pr.k) + ")";
  const int64_t tiles = ((pr.m + ksm90::kShortKBlockM - 1) / ksm90::kShortKBlockM) *
                        ((pr.n + ksm90::kShortKBlockN - 1) / ksm90::kShortKBlockN) * pr.batch;
  if (tiles > INT_MAX - 4 * static_cast<int64_t>(num_sms))
    return "the short-K dact kernel counts its 64x256 tiles in 32 bits (got " +
           std::to_string(tiles) + " tiles)";
  ksm90::ShortKDactParams p{};
  p.a = pr.a;
  p.b = pr.b;
  p.c = pr.c;
  p.d = pr.d;
  p.dbias = pr.dbias;
  p.m = static_cast<int>(pr.m);  // each < 2^31: validate_gemm
  p.n = static_cast<int>(pr.n);
  p.k = static_cast<int>(pr.k);
  p.batch = static_cast<int>(pr.batch);
  p.a_batch_stride = pr.a_batched ? pr.m * pr.k : 0;
  p.b_batch_stride = pr.b_batched ? pr.k * pr.n : 0;
  p.c_batch_stride = pr.c_batched ? pr.m * pr.n : 0;
  p.trans_a = pr.trans_a;
  p.trans_b = pr.trans_b;
  using A = Activation;
  switch (static_cast<A>(pr.activation)) {
    case A::kRelu: return launch_one<T, A::kRelu>(p, tiles, num_sms, stream);
    case A::kGeluTanh: return launch_one<T, A::kGeluTanh>(p, tiles, num_sms, stream);
    case A::kGeluErf: return launch_one<T, A::kGeluErf>(p, tiles, num_sms, stream);
    case A::kSilu: return launch_one<T, A::kSilu>(p, tiles, num_sms, stream);
    default: break;
  }
  return "no short-K dact kernel for activation " + std::to_string(pr.activation) +
         " (relu 1, gelu_tanh 2, gelu_erf 3, silu 4)";
}

template std::string sm90_gemm_dact_short_k_launch<__nv_bfloat16>(const GemmProblem&, int, cudaStream_t);
template std::string sm90_gemm_dact_short_k_launch<__half>(const GemmProblem&, int, cudaStream_t);

}  // namespace jax_sm100::host
