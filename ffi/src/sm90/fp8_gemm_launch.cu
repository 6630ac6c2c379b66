// sm90 launch unit of the blockwise-scaled FP8 GEMM, plain and residual kernels: the
// forms and their launch are in fp8_gemm_forms.h.
#include <cuda_runtime.h>

#include <string>

#include "sm90/fp8_gemm_forms.h"
#include "sm90/fp8_gemm_launch.h"

namespace jax_sm100::host {

static_assert(kSm90Fp8MaxK == int64_t(kernels::sm90_fp8::kMaxKBlocks) * 128,
              "K limit out of step with the kernel");

std::string sm90_fp8_gemm_launch(const Fp8GemmProblem& pr, int num_sms, cudaStream_t stream) {
  namespace forms = sm90_fp8_forms;
  constexpr int kPlain = kernels::sm90_fp8::kPlainEpilogue;
  return pr.c != nullptr ? forms::launch_form<true, kPlain>(pr, nullptr, num_sms, stream)
                         : forms::launch_form<false, kPlain>(pr, nullptr, num_sms, stream);
}

}  // namespace jax_sm100::host
