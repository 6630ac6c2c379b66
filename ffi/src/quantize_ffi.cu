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
// Semantics are documented in kernels/quantize_fp8.cuh. Graph-safe: no allocation, no
// host synchronisation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "handlers.h"
#include "jax_sm100/kernels/quantize_fp8.cuh"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using namespace jax_sm100::kernels::quant;

int sm_count() {
  static int n = [] {
    int dev = 0, v = 132;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
      return v;
    cudaGetLastError();
    return 132;
  }();
  return n;
}

template <typename T>
cudaError_t launch(cudaStream_t stream, const void* x, void* q, float* scale, int64_t rows,
                   int64_t cols, int block_rows, bool transposed, int64_t scale_ld) {
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
    const int64_t cap = int64_t(sm_count()) * 8;
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

  cudaError_t err;
  switch (x.element_type()) {
    case ffi::BF16:
      err = launch<__nv_bfloat16>(stream, x.untyped_data(), q->untyped_data(), scale->typed_data(),
                                  rows, cols, block_rows, scale_transposed != 0, rows_pad);
      break;
    case ffi::F16:
      err = launch<__half>(stream, x.untyped_data(), q->untyped_data(), scale->typed_data(), rows,
                           cols, block_rows, scale_transposed != 0, rows_pad);
      break;
    case ffi::F32:
      err = launch<float>(stream, x.untyped_data(), q->untyped_data(), scale->typed_data(), rows,
                          cols, block_rows, scale_transposed != 0, rows_pad);
      break;
    default:
      return ffi::Error::InvalidArgument("quantize_fp8: x must be bfloat16, float16 or float32");
  }
  if (err != cudaSuccess)
    return ffi::Error::Internal(std::string("quantize_fp8: CUDA launch failed: ") +
                                cudaGetErrorString(err));
  return ffi::Error::Success();
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
