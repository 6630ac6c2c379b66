// The host plan of one sm_100a FP8 bias/activation GEMM launch: the FP8 GEMM's plan
// (fp8_plan.h) with no residual operand, plus the bias pointer. CUDA-free and XLA-free,
// so the CUDA launcher (ffi/src/sm100/fp8_bias_launch.cu) and the CPU emulator's harness
// (tests/emu/sm100_fp8_bias_emu_test.cc) build the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/kernels/sm100/fp8_bias_roles.h"
#include "jax_sm100/kernels/sm100/fp8_plan.h"

namespace jax_sm100::kernels::sm100 {

/// Dynamic shared memory of the FP8 bias kernel: the FP8 GEMM's carve-up, the bias slice,
/// and 1024 bytes for aligning the carve-up.
template <class Cfg, class Ops>
constexpr uint32_t fp8_bias_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, Ops>)) + fp8_bias_slice_bytes<Cfg>() + 1024u;
}

/// Kernel parameters for `g` (c must be null) with `bias` ((g.n,) f32, or null), the
/// tensor maps made by `make_map` as for make_fp8_gemm_params. Returns "" or an error
/// sentence.
template <class Ops, class MakeMap>
std::string make_fp8_bias_params(const Fp8GemmShape& g, const float* bias, const Fp8GemmPlan& plan,
                                 MakeMap&& make_map, Fp8BiasParams<Ops>* out) {
  if (g.c != nullptr || plan.has_c) return "the FP8 bias/activation epilogue takes no residual operand";
  const std::string e = make_fp8_gemm_params<Ops>(g, plan, make_map, out);
  if (!e.empty()) return e;
  out->bias = bias;
  out->n = static_cast<int>(g.n);
  return "";
}

}  // namespace jax_sm100::kernels::sm100
