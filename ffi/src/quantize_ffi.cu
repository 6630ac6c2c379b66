// XLA FFI handler "jax_sm100_quantize_fp8": blockwise e4m3 quantization.
//
//   x (R, C) bf16 | f16 | f32  ->  q (R, C) f8e4m3fn, scale f32
//   attribute block_rows (int32): 1   -> 1x128 blocks, scale (R, ceil(C/128)), or with
//                                        scale_transposed=1: (ceil(C/128), round_up(R, 4))
//                                        (the layout the sm90 FP8 GEMM TMA-loads A's
//                                        scales from; pad entries are 1)
//                                 128 -> 128x128 blocks, scale (ceil(R/128), ceil(C/128))
//   attribute scale_transposed (int32): 0 or 1 (1 only with block_rows == 1)
//
// XLA FFI handler "jax_sm100_quantize_fp8_dual": x and its transpose in one pass.
//
//   x (R, C) bf16 | f16 | f32  ->  q (R, C) f8e4m3fn, scale f32     (blocks of x)
//                                  qt (C, R) f8e4m3fn, scale_t f32  (blocks of x^T)
//   attribute block_rows (int32):   1   -> scale (R, ceil(C/128))            = quantize(x, 1x128)
//                                   128 -> scale (ceil(R/128), ceil(C/128))  = quantize(x, 128x128)
//                                          (needs t_block_rows 128: then qt = q^T, scale_t = scale^T)
//   attribute t_block_rows (int32): 1   -> scale_t (C, ceil(R/128))          = quantize(x^T, 1x128)
//                                   128 -> scale_t (ceil(C/128), ceil(R/128)) = quantize(x^T, 128x128)
//   attribute scale_transposed (int32): 1 -> scale (ceil(C/128), round_up(R, 4)), the GEMM's
//                                        A-scale layout (pad entries 1), as above
//   attribute scale_t_transposed (int32): 1 (only with t_block_rows == 1) -> scale_t
//                                        (ceil(R/128), round_up(C, 4)), likewise
//
// Semantics are documented in kernels/common/quantize_fp8.cuh. The kernels are plain CUDA
// (no architecture-specific instructions): they run on every architecture the extension
// is built for. Graph-safe: no allocation, no host synchronisation (the device's SM
// count, which sizes the 1x128 grid, is read once and cached).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/bindings.h"
#include "common/device.h"
#include "common/quantize_dual_launch.cuh"
#include "common/quantize_problem.h"
#include "targets.h"
#include "jax_sm100/kernels/common/quantize_fp8.cuh"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using namespace jax_sm100::kernels::quant;

template <typename T>
cudaError_t launch(cudaStream_t stream, int num_sms, const void* x, void* q, float* scale,
                   int64_t rows, int64_t cols, int block_rows, bool transposed, int64_t scale_ld) {
  const bool aligned = (cols % kChunk) == 0 &&
                       (reinterpret_cast<uintptr_t>(x) % 16) == 0 &&
                       (reinterpret_cast<uintptr_t>(q) % 16) == 0;
  const T* xt = static_cast<const T*>(x);
  uint8_t* qb = static_cast<uint8_t*>(q);
  const int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  if (block_rows == 1) {
    const int64_t groups = rows * col_blocks;
    // 8 groups per warp step, 8 warps per CTA; cap at 8 CTAs per SM (full occupancy) and let
    // the kernel's grid-stride loop cover the rest.
    int64_t ctas = (groups + 63) / 64;  // 8 warps x 8 groups per step
    const int64_t cap = int64_t(num_sms) * 8;
    if (ctas > cap) ctas = cap;
    if (ctas < 1) ctas = 1;
    if (transposed)
      quantize_1x128_kernel<T, true><<<unsigned(ctas), 256, 0, stream>>>(xt, qb, scale, rows, cols,
                                                                          scale_ld, aligned);
    else
      quantize_1x128_kernel<T, false><<<unsigned(ctas), 256, 0, stream>>>(xt, qb, scale, rows, cols,
                                                                           scale_ld, aligned);
  } else {
    const int64_t blocks = ((rows + kBlock - 1) / kBlock) * col_blocks;
    if (blocks > 0)
      quantize_128x128_kernel<T><<<unsigned(blocks), 256, 0, stream>>>(xt, qb, scale, rows, cols,
                                                                        aligned);
  }
  return cudaGetLastError();
}

using jax_sm100::host::launch_dual;
using jax_sm100::host::launch_for_input_type;

ffi::Error quantize_dual_impl(cudaStream_t stream, ffi::AnyBuffer x, int32_t block_rows,
                              int32_t t_block_rows,
                              int32_t scale_transposed, int32_t scale_t_transposed,
                              ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale,
                              ffi::Result<ffi::AnyBuffer> qt,
                              ffi::Result<ffi::Buffer<ffi::F32>> scale_t) {
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error verr = jax_sm100::host::validate_quantize_dual(
      x, block_rows, t_block_rows, scale_transposed, scale_t_transposed, *q, *scale, *qt,
      *scale_t, &p);
  if (verr.failure() || p.empty()) return verr;

  void* qp = q->untyped_data();
  void* qtp = qt->untyped_data();
  float* sp = scale->typed_data();
  float* stp = scale_t->typed_data();
  return launch_for_input_type("quantize_fp8_dual", x.element_type(), [&](auto type) {
    using T = decltype(type);
    const void* xp = x.untyped_data();
    if (p.block_rows == kBlock) return launch_dual<T, kBlock, kBlock>(stream, p, xp, qp, sp, qtp, stp);
    return p.t_block_rows == 1 ? launch_dual<T, 1, 1>(stream, p, xp, qp, sp, qtp, stp)
                               : launch_dual<T, 1, kBlock>(stream, p, xp, qp, sp, qtp, stp);
  });
}

ffi::Error quantize_impl(cudaStream_t stream, ffi::AnyBuffer x, int32_t block_rows,
                         int32_t scale_transposed, ffi::Result<ffi::AnyBuffer> q,
                         ffi::Result<ffi::Buffer<ffi::F32>> scale) {
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error verr =
      jax_sm100::host::validate_quantize(x, block_rows, scale_transposed, *q, *scale, &p);
  if (verr.failure() || p.empty()) return verr;

  jax_sm100::host::DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal("quantize_fp8: " + dev_err);
  return launch_for_input_type("quantize_fp8", x.element_type(), [&](auto type) {
    return launch<decltype(type)>(stream, dev.num_sms, x.untyped_data(), q->untyped_data(),
                                  scale->typed_data(), p.rows, p.cols, p.block_rows,
                                  p.scale_ld != 0, p.rows_pad);
  });
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8, quantize_impl,
                              bindings::quantize(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8Dual, quantize_dual_impl,
                              bindings::quantize_dual(bindings::on_stream<cudaStream_t>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
