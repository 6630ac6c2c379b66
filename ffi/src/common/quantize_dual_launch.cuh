// Launch helpers shared by the quantize handlers (ffi/src/quantize_ffi.cu,
// ffi/src/quantize_act_ffi.cu): the element-type dispatch and the dual kernel's launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/launch.h"
#include "common/quantize_problem.h"
#include "jax_sm100/kernels/common/quantize_fp8.cuh"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// Runs launch_for(T{}) with T the element type of x (bf16, f16 or f32) and turns the
/// result into the handler's error, naming `op`.
template <typename LaunchFor>
xla::ffi::Error launch_for_input_type(const char* op, xla::ffi::DataType type, LaunchFor launch_for) {
  ElemType t;
  xla::ffi::Error type_err = check_quantize_input(op, type, &t);
  if (type_err.failure()) return type_err;
  cudaError_t err;
  switch (t) {
    case ElemType::kBF16: err = launch_for(__nv_bfloat16{}); break;
    case ElemType::kF16: err = launch_for(__half{}); break;
    default: err = launch_for(float{}); break;
  }
  if (err != cudaSuccess)
    return xla::ffi::Error::Internal(std::string(op) + ": CUDA launch failed: " + cudaGetErrorString(err));
  return xla::ffi::Error::Success();
}

/// One quantize_dual_kernel launch over p's tiles (one CTA per 128x128 tile). z and
/// col_sums: the kDact prologue's second input and column sums (null otherwise); z must
/// share x's alignment for the vector path.
template <typename T, int kQRows, int kTRows,
          kernels::quant::Prologue P = kernels::quant::Prologue::kInput,
          kernels::Activation A = kernels::Activation::kNone>
cudaError_t launch_dual(cudaStream_t stream, const QuantizeProblem& p, const void* x, void* q,
                        float* scale, void* qt, float* scale_t, const void* z = nullptr,
                        float* col_sums = nullptr) {
  using namespace kernels::quant;
  constexpr auto kernel = quantize_dual_kernel<T, kQRows, kTRows, P, A>;
  constexpr int kSmem = DualSmem<T>::kBytes;
  // Above the 48 KB default: opt in once per instantiation and device.
  if (const cudaError_t e = set_smem_limit_once<kernel>(kSmem); e != cudaSuccess) return e;
  auto a16 = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) % 16) == 0; };
  const bool aligned_x = (p.cols % kChunk) == 0 && a16(x) && a16(q) && (z == nullptr || a16(z));
  const bool aligned_t = (p.rows % kChunk) == 0 && a16(qt);
  const int64_t tiles = ((p.rows + kBlock - 1) / kBlock) * ((p.cols + kBlock - 1) / kBlock);
  kernel<<<unsigned(tiles), 256, kSmem, stream>>>(
      static_cast<const T*>(x), static_cast<uint8_t*>(q), scale, static_cast<uint8_t*>(qt), scale_t,
      p.rows, p.cols, aligned_x, aligned_t, p.scale_ld, p.scale_t_ld, static_cast<const T*>(z),
      col_sums);
  return cudaGetLastError();
}

}  // namespace jax_sm100::host
