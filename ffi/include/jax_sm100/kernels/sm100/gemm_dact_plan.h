// The host plan of one sm_100a activation-backward GEMM launch: the GEMM's plan
// (gemm_plan.h) with the pre-activation c as its residual operand, plus the dbias pointer.
// CUDA-free and XLA-free, so the CUDA launcher (ffi/src/sm100/gemm_dact_inst_impl.h) and
// the CPU emulator's harness (tests/emu) build the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/kernels/sm100/gemm_dact_roles.h"
#include "jax_sm100/kernels/sm100/gemm_plan.h"

namespace jax_sm100::kernels::sm100 {

/// Dynamic shared memory of the dact kernel: the GEMM's carve-up and 1024 bytes for
/// aligning it.
template <class Cfg, class Ops>
constexpr uint32_t gemm_dact_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, Ops>)) + 1024u;
}

/// Kernel parameters for `g` (g.c: the pre-activation, d's shape and type, required; beta
/// is set to 1 so that the plan loads it) and `dbias` ((n,) f32, zeroed by the caller, or
/// null), the tensor maps made by `make_map(const MapSpec&, Operand, TensorMap*) ->
/// std::string` ("" on success). Fills *plan; returns "" or an error sentence.
template <class Cfg, class Ops, class MakeMap>
std::string make_gemm_dact_params(GemmShape g, float* dbias, MakeMap&& make_map, GemmPlan* plan,
                                  GemmDactParams<Ops>* out) {
  if (g.c == nullptr) return "the activation-backward epilogue needs the pre-activation c";
  if (g.out_bytes != g.in_bytes) return "the activation-backward epilogue writes the inputs' type";
  g.beta = 1.f;  // the plan loads c only with beta != 0; the epilogue never reads beta
  std::string err;
  *plan = plan_gemm<Cfg>(g, &err);
  if (!err.empty()) return err;
  if (!(err = make_gemm_params<Ops>(g, *plan, make_map, &out->gemm)).empty()) return err;
  out->dbias = dbias;
  out->n = static_cast<int>(g.n);
  return "";
}

}  // namespace jax_sm100::kernels::sm100
