// Validation of the activation-backward GEMM (target jax_sm100_gemm_dact), shared by its
// CUDA handler (ffi/src/gemm_dact_ffi.cu) and its CPU handler (ffi/src/cpu/gemm_dact_cpu.cc).
// No CUDA headers here.
//
//   (a, b, c) -> (d, dbias)   attrs trans_a, trans_b, block_m, block_n, cluster_m, group_m,
//                                   split_k, activation: i32
//
// a, b, the tiling attributes: jax_sm100_gemm's (validate_gemm), the tiling restricted to
// the compiled dact kernels' (block 128x256 with cluster_m 1 or 2, split_k 1; 128x128
// measured slower on every shape of benchmarks/bench_dact.py and is not compiled). c and d: a's dtype
// (bfloat16 or float16), d's shape (M, N) with its batch dims; c broadcasts like the
// residual's C (batch count 1 or d's). dbias: float32 (N,), or (0,) when not wanted.
// activation: relu 1, gelu_tanh 2, gelu_erf 3, silu 4 (none has no derivative to fuse).
// Numerics: d = round(acc * act'(c)) with acc the fp32 accumulation of op(a) @ op(b) and
// act' in fp32 on c; dbias[j] = the fp32 sum over every row and batch entry of the
// unrounded acc * act'(c) of column j.
#pragma once

#include <cstdint>
#include <string>

#include "common/gemm_bias_validate.h"
#include "common/gemm_validate.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// validate_gemm with c read (beta 1) plus the dtype, dbias and activation checks; fills
/// pr.dact, pr.dbias (null for a (0,) dbias) and pr.activation. Errors name `name`.
inline xla::ffi::Error validate_gemm_dact(const char* name, const xla::ffi::AnyBuffer& a,
                                          const xla::ffi::AnyBuffer& b,
                                          const xla::ffi::AnyBuffer& c, xla::ffi::AnyBuffer* d,
                                          xla::ffi::AnyBuffer* dbias, bool trans_a, bool trans_b,
                                          const GemmTiling& tiling, int32_t activation,
                                          GemmProblem* out) {
  using xla::ffi::Error;
  const std::string who = std::string(name) + ": ";
  if (activation < 1 || activation >= kernels::kNumActivations) {
    std::string valid;
    for (int32_t i = 1; i < kernels::kNumActivations; ++i)
      valid += (i > 1 ? ", " : "") + std::to_string(i) + " " + activation_name(i);
    return Error::InvalidArgument(who + "activation must be one of " + valid + " (got " +
                                  std::to_string(activation) + ")");
  }
  const bool compiled = tiling.block_m == 128 && tiling.block_n == 256 && tiling.split_k == 1 &&
                        (tiling.cluster_m == 1 || tiling.cluster_m == 2);
  if (!compiled)
    return Error::InvalidArgument(
        who + "the dact kernels are compiled for block_m=128, block_n=256, cluster_m 1 or 2, "
              "split_k=1 (got block_m=" +
        std::to_string(tiling.block_m) + ", block_n=" + std::to_string(tiling.block_n) +
        ", cluster_m=" + std::to_string(tiling.cluster_m) + ", split_k=" +
        std::to_string(tiling.split_k) + ")");
  GemmProblem pr{};
  Error err = validate_gemm(name, a, b, &c, d, trans_a, trans_b, 1.0f, 1.0f, tiling, &pr);
  if (err.failure()) return err;
  if (pr.out_type != pr.in_type)
    return Error::InvalidArgument(who + "c and the output must have the inputs' dtype");
  auto bd = dbias->dimensions();
  if (dbias->element_type() != xla::ffi::DataType::F32 || bd.size() != 1 ||
      (bd[0] != pr.n && bd[0] != 0))
    return Error::InvalidArgument(who + "dbias must be float32 of shape (N,) = (" +
                                  std::to_string(pr.n) + ",), or (0,) for not wanted (got " +
                                  dims_str(bd) + ")");
  pr.dact = true;
  pr.dbias = bd[0] != 0 ? static_cast<float*>(dbias->untyped_data()) : nullptr;
  pr.activation = activation;
  *out = pr;
  return Error::Success();
}

}  // namespace jax_sm100::host
