// Host side of the short-K GEMM (kernels/sm90/gemm_short_k.cuh): the tiling
// kShortKTiling of the bias/activation and dact targets, for K <= 64. One kernel per
// (16-bit type, activation, direction): 2 x (5 forward + 4 backward).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/launch.h"
#include "jax_sm100/kernels/sm90/gemm_short_k.cuh"
#include "sm90/gemm_launch.h"

namespace jax_sm100::host {

namespace {

using kernels::Activation;
namespace ksm90 = kernels::sm90;

template <class T, Activation A, bool kDact>
std::string launch_one(const ksm90::ShortKParams& p, cudaStream_t stream) {
  constexpr auto kernel = ksm90::gemm_short_k_kernel<T, A, kDact>;
  constexpr int smem = ksm90::short_k::kSmemBytes;
  if (set_smem_limit_once<kernel>(smem) != cudaSuccess)
    return "could not raise the short-K kernel's shared memory limit";
  const dim3 grid(static_cast<unsigned>((p.m + ksm90::kShortKBlockM - 1) / ksm90::kShortKBlockM),
                  static_cast<unsigned>((p.n + ksm90::kShortKBlockN - 1) / ksm90::kShortKBlockN),
                  static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
  kernel<<<grid, ksm90::kShortKThreads, smem, stream>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("short-K launch: ") + cudaGetErrorString(e);
}

}  // namespace

template <class T>
std::string sm90_gemm_short_k_launch(const GemmProblem& pr, cudaStream_t stream) {
  if (pr.k > ksm90::kShortKMaxK)
    return "the short-K kernel takes K <= " + std::to_string(ksm90::kShortKMaxK) +
           " (got " + std::to_string(pr.k) + ")";
  if (pr.out_type != pr.in_type) return "the short-K kernel writes its inputs' dtype";
  if ((pr.n + ksm90::kShortKBlockN - 1) / ksm90::kShortKBlockN > 65535)
    return "the short-K kernel's grid holds at most 65535 column tiles of 256";
  ksm90::ShortKParams p{};
  p.a = pr.a;
  p.b = pr.b;
  p.c = pr.c;
  p.d = pr.d;
  p.pre = pr.pre;
  p.bias = pr.bias;
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
  if (pr.dact) {
    if (pr.c == nullptr) return "the dact epilogue needs its C operand";
    switch (static_cast<A>(pr.activation)) {
      case A::kRelu: return launch_one<T, A::kRelu, true>(p, stream);
      case A::kGeluTanh: return launch_one<T, A::kGeluTanh, true>(p, stream);
      case A::kGeluErf: return launch_one<T, A::kGeluErf, true>(p, stream);
      case A::kSilu: return launch_one<T, A::kSilu, true>(p, stream);
      default: break;
    }
    return "no short-K dact kernel for activation " + std::to_string(pr.activation);
  }
  switch (static_cast<A>(pr.activation)) {
    case A::kNone: return launch_one<T, A::kNone, false>(p, stream);
    case A::kRelu: return launch_one<T, A::kRelu, false>(p, stream);
    case A::kGeluTanh: return launch_one<T, A::kGeluTanh, false>(p, stream);
    case A::kGeluErf: return launch_one<T, A::kGeluErf, false>(p, stream);
    case A::kSilu: return launch_one<T, A::kSilu, false>(p, stream);
  }
  return "no short-K kernel for activation " + std::to_string(pr.activation);
}

template std::string sm90_gemm_short_k_launch<__nv_bfloat16>(const GemmProblem&, cudaStream_t);
template std::string sm90_gemm_short_k_launch<__half>(const GemmProblem&, cudaStream_t);

}  // namespace jax_sm100::host
