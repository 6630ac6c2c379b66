// The FP8 quantizers' problem description and their one validation, shared by the CUDA
// handlers (ffi/src/quantize_ffi.cu) and the CPU ones (ffi/src/cpu/quantize_cpu.cc): FFI
// buffers and attributes in, a QuantizeProblem (x's shape, block shapes, scale layouts) or
// the InvalidArgument error out. No CUDA headers here.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_args.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// One quantize call as validated: x (rows, cols) in block_rows x 128 blocks (and, on the
/// dual target, x^T in t_block_rows x 128 blocks).
struct QuantizeProblem {
  int64_t rows, cols;
  int block_rows, t_block_rows;
  int64_t rows_pad;    ///< round_up(rows, 4): the transposed 1x128 scale's row length
  int64_t scale_ld;    ///< 0: x's scale in the documented layout, else transposed, rows of this
  int64_t scale_t_ld;  ///< the same for x^T's scale (dual target)

  /// No element to quantize (the handler returns at once).
  bool empty() const { return rows == 0 || cols == 0; }
};

namespace quantize_detail {
constexpr int64_t kBlock = 128;

inline bool has_shape(xla::ffi::Span<const int64_t> d, int64_t d0, int64_t d1) {
  return d.size() == 2 && d[0] == d0 && d[1] == d1;
}

inline std::string shape_str(int64_t d0, int64_t d1) {
  return "(" + std::to_string(d0) + ", " + std::to_string(d1) + ")";
}
}  // namespace quantize_detail

/// x's element type, checked after the shapes (and, on the GPU, after the device query);
/// `op` names the target in the error.
inline xla::ffi::Error check_quantize_input(const char* op, xla::ffi::DataType type,
                                            ElemType* out) {
  if (to_elem_type(type, out)) return xla::ffi::Error::Success();
  return xla::ffi::Error::InvalidArgument(std::string(op) +
                                          ": x must be bfloat16, float16 or float32");
}

/// "jax_sm100_quantize_fp8": checks the shapes and attributes and fills `out`.
inline xla::ffi::Error validate_quantize(const xla::ffi::AnyBuffer& x, int32_t block_rows,
                                         int32_t scale_transposed, const xla::ffi::AnyBuffer& q,
                                         const xla::ffi::Buffer<xla::ffi::F32>& scale,
                                         QuantizeProblem* out) {
  using xla::ffi::Error;
  using quantize_detail::kBlock;
  auto xd = x.dimensions();
  if (xd.size() != 2)
    return Error::InvalidArgument("quantize_fp8: x must be a matrix (rank 2), got rank " +
                                  std::to_string(xd.size()));
  const int64_t rows = xd[0], cols = xd[1];
  if (block_rows != 1 && block_rows != 128)
    return Error::InvalidArgument("quantize_fp8: block_rows must be 1 (1x128 blocks) or 128 "
                                  "(128x128 blocks), got " + std::to_string(block_rows));
  if (scale_transposed && block_rows != 1)
    return Error::InvalidArgument("quantize_fp8: scale_transposed needs 1x128 blocks");
  if (q.element_type() != xla::ffi::F8E4M3FN)
    return Error::InvalidArgument("quantize_fp8: q must be float8_e4m3fn");
  if (!quantize_detail::has_shape(q.dimensions(), rows, cols))
    return Error::InvalidArgument("quantize_fp8: q must have x's shape");
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
  if (!quantize_detail::has_shape(scale.dimensions(), want0, want1))
    return Error::InvalidArgument(
        "quantize_fp8: scale must have shape (" + std::to_string(want0) + ", " +
        std::to_string(want1) + ") for this x and block shape");
  *out = QuantizeProblem{rows, cols, block_rows, 0, rows_pad, scale_transposed ? rows_pad : 0, 0};
  return Error::Success();
}

/// "jax_sm100_quantize_fp8_dual": checks the shapes and attributes and fills `out`.
inline xla::ffi::Error validate_quantize_dual(
    const xla::ffi::AnyBuffer& x, int32_t block_rows, int32_t t_block_rows,
    int32_t scale_transposed, int32_t scale_t_transposed, const xla::ffi::AnyBuffer& q,
    const xla::ffi::Buffer<xla::ffi::F32>& scale, const xla::ffi::AnyBuffer& qt,
    const xla::ffi::Buffer<xla::ffi::F32>& scale_t, QuantizeProblem* out) {
  using xla::ffi::Error;
  using quantize_detail::has_shape;
  using quantize_detail::kBlock;
  using quantize_detail::shape_str;
  auto xd = x.dimensions();
  if (xd.size() != 2)
    return Error::InvalidArgument("quantize_fp8_dual: x must be a matrix (rank 2), got rank " +
                                  std::to_string(xd.size()));
  const int64_t rows = xd[0], cols = xd[1];
  if (block_rows != 1 && block_rows != 128)
    return Error::InvalidArgument("quantize_fp8_dual: block_rows must be 1 or 128, got " +
                                  std::to_string(block_rows));
  if (block_rows == 128 && (t_block_rows != 128 || scale_transposed))
    return Error::InvalidArgument(
        "quantize_fp8_dual: block_rows 128 needs t_block_rows 128 and scale_transposed 0");
  if (t_block_rows != 1 && t_block_rows != 128)
    return Error::InvalidArgument("quantize_fp8_dual: t_block_rows must be 1 or 128, got " +
                                  std::to_string(t_block_rows));
  if ((scale_transposed != 0 && scale_transposed != 1) ||
      (scale_t_transposed != 0 && scale_t_transposed != 1))
    return Error::InvalidArgument(
        "quantize_fp8_dual: scale_transposed and scale_t_transposed must be 0 or 1");
  if (scale_t_transposed && t_block_rows != 1)
    return Error::InvalidArgument("quantize_fp8_dual: scale_t_transposed needs t_block_rows 1");
  if (q.element_type() != xla::ffi::F8E4M3FN || qt.element_type() != xla::ffi::F8E4M3FN)
    return Error::InvalidArgument("quantize_fp8_dual: q and qt must be float8_e4m3fn");
  const int64_t cb = (cols + kBlock - 1) / kBlock;
  const int64_t rb = (rows + kBlock - 1) / kBlock;
  const int64_t scale_ld = scale_transposed ? (rows + 3) / 4 * 4 : 0;
  const int64_t scale_t_ld = scale_t_transposed ? (cols + 3) / 4 * 4 : 0;
  if (!has_shape(q.dimensions(), rows, cols))
    return Error::InvalidArgument("quantize_fp8_dual: q must have x's shape");
  const int64_t s0 = scale_transposed ? cb : (block_rows == 1 ? rows : rb);
  const int64_t s1 = scale_transposed ? scale_ld : cb;
  if (!has_shape(scale.dimensions(), s0, s1))
    return Error::InvalidArgument("quantize_fp8_dual: scale must have shape " + shape_str(s0, s1));
  if (!has_shape(qt.dimensions(), cols, rows))
    return Error::InvalidArgument("quantize_fp8_dual: qt must have x^T's shape " +
                                  shape_str(cols, rows));
  const int64_t st0 = scale_t_transposed ? rb : (t_block_rows == 1 ? cols : cb);
  const int64_t st1 = scale_t_transposed ? scale_t_ld : rb;
  if (!has_shape(scale_t.dimensions(), st0, st1))
    return Error::InvalidArgument("quantize_fp8_dual: scale_t must have shape " +
                                  shape_str(st0, st1));
  *out = QuantizeProblem{rows, cols, block_rows, t_block_rows, (rows + 3) / 4 * 4, scale_ld,
                         scale_t_ld};
  return Error::Success();
}

/// "jax_sm100_quantize_fp8_act_dual" (z == nullptr, col_sums == nullptr) and
/// "jax_sm100_quantize_fp8_dact_dual" (x = g, z the pre-activation, col_sums the partial
/// bias gradient): the dual target's checks at the block shapes each target has (act:
/// x and x^T in 1x128 blocks, the forward's next input; dact: 1x128 and 128x128, a
/// gradient's), plus the activation and the extra operands.
inline xla::ffi::Error validate_quantize_prologue(
    const char* op, const xla::ffi::AnyBuffer& x, const xla::ffi::AnyBuffer* z,
    int32_t activation, int32_t scale_transposed, int32_t scale_t_transposed,
    const xla::ffi::AnyBuffer& q, const xla::ffi::Buffer<xla::ffi::F32>& scale,
    const xla::ffi::AnyBuffer& qt, const xla::ffi::Buffer<xla::ffi::F32>& scale_t,
    const xla::ffi::Buffer<xla::ffi::F32>* col_sums, QuantizeProblem* out) {
  using xla::ffi::Error;
  using quantize_detail::has_shape;
  using quantize_detail::kBlock;
  using quantize_detail::shape_str;
  const bool dact = z != nullptr;
  // act: relu, gelu_tanh, gelu_erf, silu (none is the plain dual target); dact: also none
  // (dz = g, with its column sums).
  if (activation < (dact ? 0 : 1) || activation > 4)
    return Error::InvalidArgument(std::string(op) + ": activation must be " +
                                  (dact ? "0 (none), " : "") +
                                  "1 (relu), 2 (gelu_tanh), 3 (gelu_erf) or 4 (silu), got " +
                                  std::to_string(activation));
  Error err = validate_quantize_dual(x, 1, dact ? int32_t(kBlock) : 1, scale_transposed,
                                     scale_t_transposed, q, scale, qt, scale_t, out);
  if (err.failure()) return Error::InvalidArgument(std::string(op) + ", " + err.message());
  if (dact) {
    auto xd = x.dimensions(), zd = z->dimensions();
    if (z->element_type() != x.element_type() || !has_shape(zd, xd[0], xd[1]))
      return Error::InvalidArgument(std::string(op) + ": z must have g's shape and dtype");
    const int64_t rb = (xd[0] + kBlock - 1) / kBlock;
    if (!has_shape(col_sums->dimensions(), rb, xd[1]))
      return Error::InvalidArgument(std::string(op) + ": col_sums must have shape " +
                                    shape_str(rb, xd[1]));
  }
  return Error::Success();
}

}  // namespace jax_sm100::host
