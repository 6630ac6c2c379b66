// XLA's FFI types read into ours, for the handlers' validation (common/*_validate.h):
// element types and shapes in messages.
#pragma once

#include <cstdint>
#include <string>

#include "common/ffi_checks.h"
#include "xla/ffi/api/ffi.h"

namespace jax_sm100::host {

/// `t` as an ElemType; false when it is none of bf16, f16, f32.
inline bool to_elem_type(xla::ffi::DataType t, ElemType* out) {
  switch (t) {
    case xla::ffi::DataType::BF16: *out = ElemType::kBF16; return true;
    case xla::ffi::DataType::F16: *out = ElemType::kF16; return true;
    case xla::ffi::DataType::F32: *out = ElemType::kF32; return true;
    default: return false;
  }
}

inline std::string dims_str(xla::ffi::Span<const int64_t> d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

/// Product of all but the last two dimensions.
inline int64_t batch_of(xla::ffi::Span<const int64_t> dims) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) b *= dims[i];
  return b;
}

}  // namespace jax_sm100::host
