// CPU (XLA Host platform) handlers of "jax_sm100_quantize_fp8" and
// "jax_sm100_quantize_fp8_dual": the CUDA handlers' contract (ffi/src/quantize_ffi.cu:
// operands, attributes, layouts, validation and messages) computed by plain loops.
//
// Bit-identical with jax_sm100._reference.quantize_blockwise (and the CUDA kernels,
// kernels/common/quantize_fp8.cuh), every step one fp32 operation rounded once:
//   amax     = max |x| over the block's existing elements (NaN anywhere -> NaN)
//   scale    = amax * f32(1/448), or 1 where that is 0
//   q        = e4m3_rn(clip(x * f32(1 / scale), -448, 448))  (NaN -> NaN)
// Layouts: 1x128 scale (R, ceil(C/128)), or transposed (ceil(C/128), round_up(R, 4)) with
// the pad entries 1; 128x128 scale (ceil(R/128), ceil(C/128)). The dual target quantizes
// x (block_rows x 128) and x^T (t_block_rows x 128) from the same input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cpu/numerics.h"
#include "targets.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jax_sm100::cpu::Elem;
constexpr int64_t kBlock = 128;
constexpr float kInvE4M3Max = 1.0f / 448.0f;  // == np.float32(1.0 / 448.0)

/// Quantizes X' = x (rows x cols) or, when `transpose`, x^T (cols x rows) of the
/// row-major x, in block_rows x 128 blocks of X'. scale_ld: 0 -> the documented scale
/// layout; else (1x128 only) the transposed one with rows of scale_ld floats.
void quantize(const void* x, Elem t, int64_t rows, int64_t cols, bool transpose, int block_rows,
              uint8_t* q, float* scale, int64_t scale_ld) {
  const int64_t r = transpose ? cols : rows, c = transpose ? rows : cols;  // X' is (r, c)
  const int64_t cb = (c + kBlock - 1) / kBlock, rb = (r + block_rows - 1) / block_rows;
  auto at = [&](int64_t i, int64_t j) {
    return jax_sm100::cpu::load(x, transpose ? j * cols + i : i * cols + j, t);
  };
  for (int64_t bi = 0; bi < rb; ++bi) {
    const int64_t i0 = bi * block_rows, i1 = std::min(r, i0 + block_rows);
    for (int64_t bj = 0; bj < cb; ++bj) {
      const int64_t j0 = bj * kBlock, j1 = std::min(c, j0 + kBlock);
      float amax = 0.0f;
      bool nan = false;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const float v = std::fabs(at(i, j));
          nan = nan || std::isnan(v);
          amax = v > amax ? v : amax;
        }
      if (nan) amax = std::numeric_limits<float>::quiet_NaN();
      float s = amax * kInvE4M3Max;
      if (s == 0.0f) s = 1.0f;
      const float inv = 1.0f / s;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          q[i * c + j] = jax_sm100::cpu::f32_to_e4m3fn_satfinite(at(i, j) * inv);
      if (scale_ld != 0) {
        scale[bj * scale_ld + bi] = s;  // 1x128: bi is the row
      } else {
        scale[bi * cb + bj] = s;
      }
    }
  }
  if (scale_ld != 0)  // the GEMM's pad columns [r, scale_ld) of each transposed row: 1
    for (int64_t bj = 0; bj < cb; ++bj)
      for (int64_t i = r; i < scale_ld; ++i) scale[bj * scale_ld + i] = 1.0f;
}

bool to_elem(ffi::DataType type, Elem* out) {
  switch (type) {
    case ffi::BF16: *out = Elem::kBF16; return true;
    case ffi::F16: *out = Elem::kF16; return true;
    case ffi::F32: *out = Elem::kF32; return true;
    default: return false;
  }
}

bool has_shape(ffi::AnyBuffer::Dimensions d, int64_t d0, int64_t d1) {
  return d.size() == 2 && d[0] == d0 && d[1] == d1;
}

std::string shape_str(int64_t d0, int64_t d1) {
  return "(" + std::to_string(d0) + ", " + std::to_string(d1) + ")";
}

ffi::Error quantize_dual_impl(ffi::AnyBuffer x, int32_t block_rows, int32_t t_block_rows,
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
  Elem t;
  if (!to_elem(x.element_type(), &t))
    return ffi::Error::InvalidArgument("quantize_fp8_dual: x must be bfloat16, float16 or float32");
  quantize(x.untyped_data(), t, rows, cols, false, block_rows,
           static_cast<uint8_t*>(q->untyped_data()), scale->typed_data(), scale_ld);
  quantize(x.untyped_data(), t, rows, cols, true, t_block_rows,
           static_cast<uint8_t*>(qt->untyped_data()), scale_t->typed_data(), scale_t_ld);
  return ffi::Error::Success();
}

ffi::Error quantize_impl(ffi::AnyBuffer x, int32_t block_rows, int32_t scale_transposed,
                         ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale) {
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
  Elem t;
  if (!to_elem(x.element_type(), &t))
    return ffi::Error::InvalidArgument("quantize_fp8: x must be bfloat16, float16 or float32");
  quantize(x.untyped_data(), t, rows, cols, false, block_rows,
           static_cast<uint8_t*>(q->untyped_data()), scale->typed_data(),
           scale_transposed ? rows_pad : 0);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8Cpu, quantize_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Attr<int32_t>("block_rows")
                                  .Attr<int32_t>("scale_transposed")
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8DualCpu, quantize_dual_impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Attr<int32_t>("block_rows")
                                  .Attr<int32_t>("t_block_rows")
                                  .Attr<int32_t>("scale_transposed")
                                  .Attr<int32_t>("scale_t_transposed")
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
