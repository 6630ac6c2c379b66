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
// x (block_rows x 128) and x^T (t_block_rows x 128) from the same input. Validation:
// common/quantize_problem.h, as on the GPU.
//
// And "jax_sm100_quantize_fp8_act_dual" / "jax_sm100_quantize_fp8_dact_dual"
// (ffi/src/quantize_act_ffi.cu): the prologue's values (act(z), or g * act'(z), in fp32
// by kernels/common/activation.h's host forms, rounded to the input's dtype) written to
// a host buffer, then quantized as above; the column sums per 128-row block in the
// kernel's order (rows 0-63 and 64-127 each in order, then added).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/bindings.h"
#include "common/quantize_problem.h"
#include "cpu/numerics.h"
#include "jax_sm100/kernels/common/activation.h"
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

ffi::Error quantize_dual_impl(ffi::AnyBuffer x, int32_t block_rows, int32_t t_block_rows,
                              int32_t scale_transposed, int32_t scale_t_transposed,
                              ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale,
                              ffi::Result<ffi::AnyBuffer> qt,
                              ffi::Result<ffi::Buffer<ffi::F32>> scale_t) {
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error err = jax_sm100::host::validate_quantize_dual(
      x, block_rows, t_block_rows, scale_transposed, scale_t_transposed, *q, *scale, *qt,
      *scale_t, &p);
  if (err.failure() || p.empty()) return err;
  Elem t;
  err = jax_sm100::host::check_quantize_input("quantize_fp8_dual", x.element_type(), &t);
  if (err.failure()) return err;
  quantize(x.untyped_data(), t, p.rows, p.cols, false, p.block_rows,
           static_cast<uint8_t*>(q->untyped_data()), scale->typed_data(), p.scale_ld);
  quantize(x.untyped_data(), t, p.rows, p.cols, true, p.t_block_rows,
           static_cast<uint8_t*>(qt->untyped_data()), scale_t->typed_data(), p.scale_t_ld);
  return ffi::Error::Success();
}

ffi::Error quantize_impl(ffi::AnyBuffer x, int32_t block_rows, int32_t scale_transposed,
                         ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::F32>> scale) {
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error err =
      jax_sm100::host::validate_quantize(x, block_rows, scale_transposed, *q, *scale, &p);
  if (err.failure() || p.empty()) return err;
  Elem t;
  err = jax_sm100::host::check_quantize_input("quantize_fp8", x.element_type(), &t);
  if (err.failure()) return err;
  quantize(x.untyped_data(), t, p.rows, p.cols, false, p.block_rows,
           static_cast<uint8_t*>(q->untyped_data()), scale->typed_data(), p.scale_ld);
  return ffi::Error::Success();
}

/// The prologue's values, rounded to t, as a host buffer of t's bytes: act(x) (z null),
/// or x * act'(z).
std::vector<uint8_t> prologue(const void* x, const void* z, Elem t, int64_t n, int32_t activation) {
  using jax_sm100::kernels::Activation;
  const Activation act = static_cast<Activation>(activation);
  std::vector<uint8_t> out(n * (t == Elem::kF32 ? 4 : 2));
  for (int64_t i = 0; i < n; ++i) {
    const float v = jax_sm100::cpu::load(x, i, t);
    const float y = z == nullptr
                        ? jax_sm100::kernels::apply_activation(act, v)
                        : v * jax_sm100::kernels::activation_grad(act, jax_sm100::cpu::load(z, i, t));
    jax_sm100::cpu::store(out.data(), i, t, y);
  }
  return out;
}

ffi::Error act_dual_impl(ffi::AnyBuffer z, int32_t activation, int32_t scale_transposed,
                         int32_t scale_t_transposed, ffi::Result<ffi::AnyBuffer> q,
                         ffi::Result<ffi::Buffer<ffi::F32>> scale, ffi::Result<ffi::AnyBuffer> qt,
                         ffi::Result<ffi::Buffer<ffi::F32>> scale_t) {
  const char* op = "jax_sm100_quantize_fp8_act_dual";
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error err = jax_sm100::host::validate_quantize_prologue(
      op, z, nullptr, activation, scale_transposed, scale_t_transposed, *q, *scale, *qt, *scale_t,
      nullptr, &p);
  if (err.failure() || p.empty()) return err;
  Elem t;
  err = jax_sm100::host::check_quantize_input(op, z.element_type(), &t);
  if (err.failure()) return err;
  const std::vector<uint8_t> d = prologue(z.untyped_data(), nullptr, t, p.rows * p.cols, activation);
  quantize(d.data(), t, p.rows, p.cols, false, 1, static_cast<uint8_t*>(q->untyped_data()),
           scale->typed_data(), p.scale_ld);
  quantize(d.data(), t, p.rows, p.cols, true, 1, static_cast<uint8_t*>(qt->untyped_data()),
           scale_t->typed_data(), p.scale_t_ld);
  return ffi::Error::Success();
}

ffi::Error dact_dual_impl(ffi::AnyBuffer g, ffi::AnyBuffer z, int32_t activation,
                          int32_t scale_transposed, ffi::Result<ffi::AnyBuffer> q,
                          ffi::Result<ffi::Buffer<ffi::F32>> scale, ffi::Result<ffi::AnyBuffer> qt,
                          ffi::Result<ffi::Buffer<ffi::F32>> scale_t,
                          ffi::Result<ffi::Buffer<ffi::F32>> col_sums) {
  const char* op = "jax_sm100_quantize_fp8_dact_dual";
  jax_sm100::host::QuantizeProblem p{};
  ffi::Error err = jax_sm100::host::validate_quantize_prologue(
      op, g, &z, activation, scale_transposed, 0, *q, *scale, *qt, *scale_t, &(*col_sums), &p);
  if (err.failure() || p.empty()) return err;
  Elem t;
  err = jax_sm100::host::check_quantize_input(op, g.element_type(), &t);
  if (err.failure()) return err;
  const std::vector<uint8_t> dz =
      prologue(g.untyped_data(), z.untyped_data(), t, p.rows * p.cols, activation);
  quantize(dz.data(), t, p.rows, p.cols, false, 1, static_cast<uint8_t*>(q->untyped_data()),
           scale->typed_data(), p.scale_ld);
  quantize(dz.data(), t, p.rows, p.cols, true, kBlock, static_cast<uint8_t*>(qt->untyped_data()),
           scale_t->typed_data(), 0);
  float* sums = col_sums->typed_data();
  for (int64_t b = 0; b * kBlock < p.rows; ++b)
    for (int64_t j = 0; j < p.cols; ++j) {
      float half[2] = {0.0f, 0.0f};
      for (int64_t i = b * kBlock; i < std::min(p.rows, (b + 1) * kBlock); ++i)
        half[(i - b * kBlock) / 64] += jax_sm100::cpu::load(dz.data(), i * p.cols + j, t);
      sums[b * p.cols + j] = half[0] + half[1];
    }
  return ffi::Error::Success();
}

}  // namespace

namespace bindings = jax_sm100::host::bindings;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8Cpu, quantize_impl,
                              bindings::quantize(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8DualCpu, quantize_dual_impl,
                              bindings::quantize_dual(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8ActDualCpu, act_dual_impl,
                              bindings::quantize_act_dual(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100QuantizeFp8DactDualCpu, dact_dual_impl,
                              bindings::quantize_dact_dual(ffi::Ffi::Bind()));
