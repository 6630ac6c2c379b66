// The registration table: the one list of the extension's XLA FFI targets. c_api.cc
// hands it to Python (target_names(), registrations(), cpu_registrations(),
// sm100_targets()); Python keeps no copy of it.
//
// Each target has two handlers with one contract (operands, attributes, validation):
//   * the CUDA handler, defined (XLA_FFI_DEFINE_HANDLER_SYMBOL) in one *_ffi.cu file
//     under ffi/src/: validates its buffers, then dispatches on the device's compute
//     capability. Compiled only in a CUDA build.
//   * the CPU handler, in ffi/src/cpu/: the same contract and numerics computed by plain
//     C++ loops on the host buffers (for JAX_SM100_BACKEND=cpu_ffi). Compiled in every
//     build.
//
//   X(target name, CUDA handler symbol, CPU handler symbol, has an sm_100a kernel)
#pragma once

#include "xla/ffi/api/c_api.h"

#define JAX_SM100_FFI_TARGETS(X)                                                           \
  X("jax_sm100_gemm", JaxSm100Gemm, JaxSm100GemmCpu, true)                                 \
  X("jax_sm100_gemm_residual", JaxSm100GemmResidual, JaxSm100GemmResidualCpu, true)        \
  X("jax_sm100_gemm_bias", JaxSm100GemmBias, JaxSm100GemmBiasCpu, true)                    \
  X("jax_sm100_gemm_dact", JaxSm100GemmDact, JaxSm100GemmDactCpu, true)                    \
  X("jax_sm100_fp8_gemm", JaxSm100Fp8Gemm, JaxSm100Fp8GemmCpu, true)                       \
  X("jax_sm100_fp8_gemm_residual", JaxSm100Fp8GemmResidual, JaxSm100Fp8GemmResidualCpu,    \
    true)                                                                                  \
  X("jax_sm100_fp8_gemm_bias", JaxSm100Fp8GemmBias, JaxSm100Fp8GemmBiasCpu, true)          \
  X("jax_sm100_quantize_fp8", JaxSm100QuantizeFp8, JaxSm100QuantizeFp8Cpu, true)           \
  X("jax_sm100_mxfp8_gemm", JaxSm100Mxfp8Gemm, JaxSm100Mxfp8GemmCpu, true)                 \
  X("jax_sm100_grouped_gemm", JaxSm100GroupedGemm, JaxSm100GroupedGemmCpu, true)           \
  X("jax_sm100_kgrouped_gemm", JaxSm100KGroupedGemm, JaxSm100KGroupedGemmCpu, true)        \
  X("jax_sm100_fp8_grouped_gemm", JaxSm100Fp8GroupedGemm, JaxSm100Fp8GroupedGemmCpu, true) \
  X("jax_sm100_quantize_fp8_dual", JaxSm100QuantizeFp8Dual, JaxSm100QuantizeFp8DualCpu, true) \
  X("jax_sm100_quantize_fp8_act_dual", JaxSm100QuantizeFp8ActDual,                         \
    JaxSm100QuantizeFp8ActDualCpu, true)                                                  \
  X("jax_sm100_quantize_fp8_dact_dual", JaxSm100QuantizeFp8DactDual,                       \
    JaxSm100QuantizeFp8DactDualCpu, true)

extern "C" {
#define JAX_SM100_DECLARE_CPU_HANDLER(name, symbol, cpu_symbol, sm100) \
  XLA_FFI_Error* cpu_symbol(XLA_FFI_CallFrame* call_frame);
JAX_SM100_FFI_TARGETS(JAX_SM100_DECLARE_CPU_HANDLER)
#undef JAX_SM100_DECLARE_CPU_HANDLER

#if JAX_SM100_WITH_CUDA
#define JAX_SM100_DECLARE_HANDLER(name, symbol, cpu_symbol, sm100) \
  XLA_FFI_Error* symbol(XLA_FFI_CallFrame* call_frame);
JAX_SM100_FFI_TARGETS(JAX_SM100_DECLARE_HANDLER)
#undef JAX_SM100_DECLARE_HANDLER
#endif
}
