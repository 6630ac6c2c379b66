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

#include "common/device.h"
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

/// Runs launch_for(T{}) with T the element type of x (bf16, f16 or f32) and turns the
/// result into the handler's error, naming `op`.
template <typename LaunchFor>
ffi::Error launch_for_input_type(const char* op, ffi::DataType type, LaunchFor launch_for) {
  cudaError_t err;
  switch (type) {
    case ffi::BF16: err = launch_for(__nv_bfloat16{}); break;
    case ffi::F16: err = launch_for(__half{}); break;
    case ffi::F32: err = launch_for(float{}); break;
    default:
      return ffi::Error::InvalidArgument(std::string(op) + ": x must be bfloat16, float16 or float32");
  }
  if (err != cudaSuccess)
    return ffi::Error::Internal(std::string(op) + ": CUDA launch failed: " + cudaGetErrorString(err));
  return ffi::Error::Success();
}

template <typename T, int kQRows, int kTRows>
cudaError_t launch_dual(cudaStream_t stream, const void* x, void* q, float* scale, void* qt,
                        float* scale_t, int64_t rows, int64_t cols, int64_t scale_ld,
                        int64_t scale_t_ld) {
  auto kernel = quantize_dual_kernel<T, kQRows, kTRows>;
  constexpr int kSmem = DualSmem<T>::kBytes;
  // Above the 48 KB default: opt in once per instantiation (not a stream operation, so
  // also fine while XLA captures a command buffer).
  static const cudaError_t attr_err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr_err != cudaSuccess) return attr_err;
  const bool aligned_x = (cols % kChunk) == 0 && (reinterpret_cast<uintptr_t>(x) % 16) == 0 &&
                         (reinterpret_cast<uintptr_t>(q) % 16) == 0;
  const bool aligned_t = (rows % kChunk) == 0 && (reinterpret_cast<uintptr_t>(qt) % 16) == 0;
  const int64_t tiles = ((rows + kBlock - 1) / kBlock) * ((cols + kBlock - 1) / kBlock);
  kernel<<<unsigned(tiles), 256, kSmem, stream>>>(
      static_cast<const T*>(x), static_cast<uint8_t*>(q), scale, static_cast<uint8_t*>(qt),
      scale_t, rows, cols, aligned_x, aligned_t, scale_ld, scale_t_ld);
  return cudaGetLastError();
}

/// scale_ld / scale_t_ld: 0 = documented layout, else the transposed layout's row length.
template <typename T>
cudaError_t launch_dual(cudaStream_t stream, const void* x, void* q, float* scale, void* qt,
                        float* scale_t, int64_t rows, int64_t cols, int block_rows, int t_block_rows,
                        int64_t scale_ld, int64_t scale_t_ld) {
  if (block_rows == kBlock)
    return launch_dual<T, kBlock, kBlock>(stream, x, q, scale, qt, scale_t, rows, cols, 0, 0);
  return t_block_rows == 1
             ? launch_dual<T, 1, 1>(stream, x, q, scale, qt, scale_t, rows, cols, scale_ld, scale_t_ld)
             : launch_dual<T, 1, kBlock>(stream, x, q, scale, qt, scale_t, rows, cols, scale_ld, 0);
}

bool has_shape(ffi::AnyBuffer::Dimensions d, int64_t d0, int64_t d1) {
  return d.size() == 2 && d[0] == d0 && d[1] == d1;
}

std::string shape_str(int64_t d0, int64_t d1) {
  return "(" + std::to_string(d0) + ", " + std::to_string(d1) + ")";
}

ffi::Error quantize_dual_impl(cudaStream_t stream, ffi::AnyBuffer x, int32_t block_rows,
                              int32_t t_block_rows,
                              int32_t scale_transposed, int32_t scale_t_transposed,
                              ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale,
                              ffi::Result<ffi::AnyBuffer> qt,
                              ffi::Result<ffi::Buffer<ffi::F32>> scale_t) {
  auto xd = x.dimensions();
  if (xd.size() != 2)
    return ffi::Error::InvalidArgument("quantize_fp8_dual: x must be a matrix (rank 2), got rank " +
                                       std::to_string(xd.size()));
  const int64_t rows = xd[0], cols = xd[1];
  if (block_rows != 1 && block_rows != 128)
    return ffi::Error::InvalidArgument("quantize_fp8_dual: block_rows must be 1 or 128, got " +
                                       std::to_string(block_rows));
  if (block_rows == 128 && (t_block_rows != 128 || scale_transposed))
    return ffi::Error::InvalidArgument(
        "quantize_fp8_dual: block_rows 128 needs t_block_rows 128 and scale_transposed 0");
  if (t_block_rows != 1 && t_block_rows != 128)
    return ffi::Error::InvalidArgument("quantize_fp8_dual: t_block_rows must be 1 or 128, got " +
                                       std::to_string(t_block_rows));
  if ((scale_transposed != 0 && scale_transposed != 1) ||
      (scale_t_transposed != 0 && scale_t_transposed != 1))
    return ffi::Error::InvalidArgument(
        "quantize_fp8_dual: scale_transposed and scale_t_transposed must be 0 or 1");
  if (scale_t_transposed && t_block_rows != 1)
    return ffi::Error::InvalidArgument("quantize_fp8_dual: scale_t_transposed needs t_block_rows 1");
  if (q->element_type() != ffi::F8E4M3FN || qt->element_type() != ffi::F8E4M3FN)
    return ffi::Error::InvalidArgument("quantize_fp8_dual: q and qt must be float8_e4m3fn");
  const int64_t cb = (cols + kBlock - 1) / kBlock;
  const int64_t rb = (rows + kBlock - 1) / kBlock;
  const int64_t scale_ld = scale_transposed ? (rows + 3) / 4 * 4 : 0;
  const int64_t scale_t_ld = scale_t_transposed ? (cols + 3) / 4 * 4 : 0;
  if (!has_shape(q->dimensions(), rows, cols))
    return ffi::Error::InvalidArgument("quantize_fp8_dual: q must have x's shape");
  const int64_t s0 = scale_transposed ? cb : (block_rows == 1 ? rows : rb);
  const int64_t s1 = scale_transposed ? scale_ld : cb;
  if (!has_shape(scale->dimensions(), s0, s1))
    return ffi::Error::InvalidArgument("quantize_fp8_dual: scale must have shape " +
                                       shape_str(s0, s1));
  if (!has_shape(qt->dimensions(), cols, rows))
    return ffi::Error::InvalidArgument("quantize_fp8_dual: qt must have x^T's shape " +
                                       shape_str(cols, rows));
  const int64_t st0 = scale_t_transposed ? rb : (t_block_rows == 1 ? cols : cb);
  const int64_t st1 = scale_t_transposed ? scale_t_ld : rb;
  if (!has_shape(scale_t->dimensions(), st0, st1))
    return ffi::Error::InvalidArgument("quantize_fp8_dual: scale_t must have shape " +
                                       shape_str(st0, st1));
  if (rows == 0 || cols == 0) return ffi::Error::Success();

  void* qp = q->untyped_data();
  void* qtp = qt->untyped_data();
  float* sp = scale->typed_data();
  float* stp = scale_t->typed_data();
  return launch_for_input_type("quantize_fp8_dual", x.element_type(), [&](auto type) {
    return launch_dual<decltype(type)>(stream, x.untyped_data(), qp, sp, qtp, stp, rows, cols,
                                       block_rows, t_block_rows, scale_ld, scale_t_ld);
  });
}

ffi::Error quantize_impl(cudaStream_t stream, ffi::AnyBuffer x, int32_t block_rows,
                         int32_t scale_transposed, ffi::Result<ffi::AnyBuffer> q,
                         ffi::Result<ffi::Buffer<ffi::F32>> scale) {
  auto xd = x.dimensions();
  if (xd.size() != 2)
    return ffi::Error::InvalidArgument("quantize_fp8: x must be a matrix (rank 2), got rank " +
                                       std::to_string(xd.size()));
  const int64_t rows = xd[0], cols = xd[1];
  if (block_rows != 1 && block_rows != 128)
    return ffi::Error::InvalidArgument("quantize_fp8: block_rows must be 1 (1x128 blocks) or 128 "
                                       "(128x128 blocks), got " + std::to_string(block_rows));
  if (scale_transposed && block_rows != 1)
    return ffi::Error::InvalidArgument("quantize_fp8: scale_transposed needs 1x128 blocks");
  if (q->element_type() != ffi::F8E4M3FN)
    return ffi::Error::InvalidArgument("quantize_fp8: q must be float8_e4m3fn");
  auto qd = q->dimensions();
  if (qd.size() != 2 || qd[0] != rows || qd[1] != cols)
    return ffi::Error::InvalidArgument("quantize_fp8: q must have x's shape");
  const int64_t cb = (cols + kBlock - 1) / kBlock;
  const int64_t rb = (rows + kBlock - 1) / kBlock;
  const int64_t rows_pad = (rows + 3) / 4 * 4;
  int64_t want0, want1;
  if (block_rows == 1) {
    want0 = scale_transposed ? cb : rows;
    want1 = scale_transposed ? rows_pad : cb;
  } else {
    want0 = rb;
    want1 = cb;
  }
  auto sd = scale->dimensions();
  if (sd.size() != 2 || sd[0] != want0 || sd[1] != want1)
    return ffi::Error::InvalidArgument(
        "quantize_fp8: scale must have shape (" + std::to_string(want0) + ", " +
        std::to_string(want1) + ") for this x and block shape");
  if (rows == 0 || cols == 0) return ffi::Error::Success();

  jax_sm100::host::DeviceInfo dev;
  const std::string dev_err = jax_sm100::host::current_device(&dev);
  if (!dev_err.empty()) return ffi::Error::Internal("quantize_fp8: " + dev_err);
  return launch_for_input_type("quantize_fp8", x.element_type(), [&](auto type) {
    return launch<decltype(type)>(stream, dev.num_sms, x.untyped_data(), q->untyped_data(),
                                  scale->typed_data(), rows, cols, block_rows,
                                  scale_transposed != 0, rows_pad);
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8, quantize_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Attr<int32_t>("block_rows")
                                  .Attr<int32_t>("scale_transposed")
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8Dual, quantize_dual_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Attr<int32_t>("block_rows")
                                  .Attr<int32_t>("t_block_rows")
                                  .Attr<int32_t>("scale_transposed")
                                  .Attr<int32_t>("scale_t_transposed")
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});
