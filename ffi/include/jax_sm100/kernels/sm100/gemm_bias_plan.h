// The host plan of one sm_100a bias/activation GEMM launch: the GEMM's plan (gemm_plan.h)
// with no residual operand, plus pre's tensor map (d's shape, type and box), the bias
// pointer and the has_pre flag. CUDA-free and XLA-free, so the CUDA launcher
// (ffi/src/sm100/gemm_bias_inst_impl.h) and the CPU emulator's harness (tests/emu) build
// the very same launch from it.
#pragma once

#include <cstdint>
#include <string>

#include "jax_sm100/kernels/sm100/gemm_bias_roles.h"
#include "jax_sm100/kernels/sm100/gemm_plan.h"

namespace jax_sm100::kernels::sm100 {

/// The bias/activation part of one launch (the GEMM's part is a GemmShape with c null).
struct GemmBiasShape {
  const float* bias = nullptr;  ///< (n,) f32, or null: no bias
  void* pre = nullptr;          ///< d's layout and type, or null: not written
};

/// Dynamic shared memory of the bias kernel: the GEMM's carve-up, the bias slice, and
/// 1024 bytes for aligning the carve-up.
template <class Cfg, class Ops>
constexpr uint32_t gemm_bias_smem_bytes() {
  return static_cast<uint32_t>(sizeof(GemmStorage<Cfg, Ops>)) + bias_slice_bytes<Cfg>() + 1024u;
}

/// Kernel parameters for `g` (c must be null: the epilogue stages pre in the C buffers)
/// and `bs`, the tensor maps made by `make_map(const MapSpec&, Operand, TensorMap*) ->
/// std::string` ("" on success; pre is made as an Operand::kD). Fills *plan; returns ""
/// or an error sentence.
template <class Cfg, class Ops, class MakeMap>
std::string make_gemm_bias_params(const GemmShape& g, const GemmBiasShape& bs, MakeMap&& make_map,
                                  GemmPlan* plan, GemmBiasParams<Ops>* out) {
  if (g.c != nullptr) return "the bias/activation epilogue takes no residual operand";
  std::string err;
  *plan = plan_gemm<Cfg>(g, &err);
  if (!err.empty()) return err;
  if (!(err = make_gemm_params<Ops>(g, *plan, make_map, &out->gemm)).empty()) return err;
  MapSpec pre = plan->d;
  if (bs.pre != nullptr) pre.base = bs.pre;  // else never stored: d's map, unused
  if (!(err = make_map(pre, Operand::kD, &out->tma_pre)).empty()) return err;
  out->bias = bs.bias;
  out->n = static_cast<int>(g.n);
  out->has_pre = bs.pre != nullptr;
  return "";
}

}  // namespace jax_sm100::kernels::sm100
