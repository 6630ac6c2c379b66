// EmuFp8Ops: the CPU emulator's side of the blockwise FP8 kernel's one Ops member
// (umma_f8f6f4, see kernels/sm100/ops_concept.h), on top of EmuOps (emu_ops.h), plus the
// exact decoders of the kind::f8f6f4 instruction descriptor and of the 8-bit formats,
// written from the PTX ISA independently of the kernel's encoders (ptx/sm100/umma_desc.h).
//
// Modelled semantics (the strictest reading a correct kernel must survive, as emu_ops.h):
//  * tcgen05.mma.cta_group::1.kind::f8f6f4: the instruction descriptor decoded field by
//    field (reserved bits, sparsity, saturate, max shift, D format F32, M = 128, N a
//    multiple of 16 up to 256; formats E4M3 / E5M2 only: the 6- and 4-bit formats sit in
//    shared memory in other layouts and are refused), the shared-memory descriptors by
//    smem_desc_model.h with one-byte elements; decoded at issue, EXECUTED at the issuing
//    thread's next tcgen05.commit like umma_f16 (the latest moment the hardware may read
//    shared memory). Arithmetic: the 32 products of one output element (exact) are summed
//    in fp64, added to the fp32 accumulator (or 0) and rounded once to fp32 (RNE); the
//    tensor core's internal order and precision are not specified by the PTX ISA, so
//    tests compare with a tolerance.
//  * E4M3 is float8_e4m3fn (bias 7, no infinities, S.1111.111 NaN), E5M2 the IEEE-like
//    format (bias 15); both decoded exactly (tests/emu/sm100_fp8_emu_test.cc checks every
//    code against the CUDA toolkit's cuda_fp8.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/emu_ops.h"

namespace jax_sm100::emu {

/// tcgen05.mma kind::f8f6f4 instruction descriptor, field by field (PTX ISA table
/// "Instruction descriptor format for .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8").
struct InstrDescF8f6f4 {
  uint32_t d_format;  ///< [4,6): 0 F16, 1 F32
  uint32_t a_format;  ///< [7,10): 0 E4M3, 1 E5M2, 3 E2M3, 4 E3M2, 5 E2M1
  uint32_t b_format;  ///< [10,13)
  bool negate_a;      ///< [13]
  bool negate_b;      ///< [14]
  Major a_major;      ///< [15]: 0 K-major, 1 MN-major
  Major b_major;      ///< [16]
  uint32_t n;         ///< [17,23) holds N >> 3
  uint32_t m;         ///< [24,29) holds M >> 4
};

inline InstrDescF8f6f4 decode_idesc_f8f6f4(uint32_t d) {
  if (d & 0x7u) throw std::runtime_error("idesc (f8f6f4): sparsity bits set");
  if (d & (1u << 3)) throw std::runtime_error("idesc (f8f6f4): saturate set (integer kinds only)");
  if (d & ((1u << 6) | (1u << 23) | (1u << 29))) throw std::runtime_error("idesc (f8f6f4): reserved bit set");
  if (d >> 30) throw std::runtime_error("idesc (f8f6f4): max shift set (weight-stationary only)");
  InstrDescF8f6f4 r;
  r.d_format = (d >> 4) & 3;
  r.a_format = (d >> 7) & 7;
  r.b_format = (d >> 10) & 7;
  r.negate_a = (d >> 13) & 1;
  r.negate_b = (d >> 14) & 1;
  r.a_major = ((d >> 15) & 1) ? Major::kMN : Major::kK;
  r.b_major = ((d >> 16) & 1) ? Major::kMN : Major::kK;
  r.n = ((d >> 17) & 0x3f) << 3;
  r.m = ((d >> 24) & 0x1f) << 4;
  if (r.d_format > 1) throw std::runtime_error("idesc (f8f6f4): D format other than F16/F32");
  // 6- and 4-bit operands sit in shared memory in other (padded) layouts: not modelled.
  if (r.a_format > 1 || r.b_format > 1)
    throw std::runtime_error("idesc (f8f6f4): only the 8-bit formats E4M3 (0) and E5M2 (1) are modelled");
  return r;
}

/// The exact value of an 8-bit float: fmt 0 = E4M3 (float8_e4m3fn: bias 7, no infinities,
/// S.1111.111 is NaN), fmt 1 = E5M2 (bias 15, IEEE infinities and NaNs).
inline float fp8_bits_to_float(uint8_t v, uint32_t fmt) {
  const bool neg = (v & 0x80u) != 0;
  float r;
  if (fmt == 0) {
    const uint32_t e = (v >> 3) & 0xfu, m = v & 0x7u;
    if (e == 15 && m == 7) return NAN;
    r = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), int(e) - 10);
  } else {
    const uint32_t e = (v >> 2) & 0x1fu, m = v & 0x3u;
    if (e == 31) return m ? NAN : (neg ? -INFINITY : INFINITY);
    r = e == 0 ? std::ldexp(float(m), -16) : std::ldexp(float(4 + m), int(e) - 17);
  }
  return neg ? -r : r;
}

namespace detail {

/// One decoded tcgen05.mma.cta_group::1.kind::f8f6f4 (M = 128, K = 32 one-byte elements),
/// executed at the issuing thread's next commit like MmaJob: the 32 products of each
/// output element (exact) are summed in fp64, added to the fp32 accumulator (or 0 when
/// !accumulate) and rounded once to fp32 (RNE).
struct MmaJobF8 {
  Cta* cta = nullptr;
  uint32_t tmem_d = 0;
  SmemLayout la, lb;
  InstrDescF8f6f4 id{};
  bool accumulate = false;

  static float load(Cta& cta, const SmemLayout& l, Major major, uint32_t row, uint32_t k, uint32_t fmt, bool neg) {
    const uint32_t addr = element_address(l, major, row, k, 1);
    const float v = fp8_bits_to_float(*smem_at(cta, addr, 1, "tcgen05.mma (f8f6f4) operand"), fmt);
    return neg ? -v : v;
  }

  void operator()() const {
    constexpr uint32_t K = 32;
    const uint32_t M = id.m, N = id.n, lane0 = tmem_d >> 16, col0 = tmem_d & 0xffffu;
    std::vector<float> a(size_t(M) * K), b(size_t(N) * K);
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t k = 0; k < K; ++k) a[m * K + k] = load(*cta, la, id.a_major, m, k, id.a_format, id.negate_a);
    for (uint32_t n = 0; n < N; ++n)
      for (uint32_t k = 0; k < K; ++k) b[n * K + k] = load(*cta, lb, id.b_major, n, k, id.b_format, id.negate_b);
    check_tmem_cols(*cta, col0, N, "tcgen05.mma (f8f6f4, D)");
    for (uint32_t m = 0; m < M; ++m) {
      for (uint32_t n = 0; n < N; ++n) {
        double s = 0.0;
        for (uint32_t k = 0; k < K; ++k) s += double(a[m * K + k]) * double(b[n * K + k]);
        uint32_t& cell = cta->tmem.cell(lane0 + m, col0 + n);
        float prev = 0.0f;
        if (accumulate) std::memcpy(&prev, &cell, 4);
        const float out = static_cast<float>(double(prev) + s);
        std::memcpy(&cell, &out, 4);
      }
    }
  }
};

}  // namespace detail

/// EmuOps plus the blockwise FP8 kernel's member (see ops_concept.h).
struct EmuFp8Ops : EmuOps {
  /// tcgen05.mma.cta_group::1.kind::f8f6f4: decoded and checked at issue, run at the
  /// issuing thread's next commit (detail::MmaJobF8), as EmuOps::umma_f16.
  static void umma_f8f6f4(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, bool accumulate) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(1);
    detail::MmaJobF8 j;
    j.id = decode_idesc_f8f6f4(idesc);
    j.la = decode_sm100(desc_a);
    j.lb = decode_sm100(desc_b);
    j.tmem_d = tmem_d;
    j.accumulate = accumulate;
    j.cta = c.cta;
    if (j.id.d_format != 1) detail::violation("tcgen05.mma (f8f6f4): D format must be F32");
    if (j.id.m != 128) {
      detail::violation("tcgen05.mma (f8f6f4): only M = 128 is modelled, idesc says " + std::to_string(j.id.m));
    }
    if (j.id.n % 16 != 0 || j.id.n < 16 || j.id.n > 256) {
      detail::violation("tcgen05.mma (f8f6f4): N must be a multiple of 16 in [16, 256], idesc says " +
                        std::to_string(j.id.n));
    }
    if ((tmem_d >> 16) != 0) detail::violation("tcgen05.mma (f8f6f4): D must start at TMEM lane 0");
    detail::smem_at(*c.cta, j.la.start, 1, "tcgen05.mma (f8f6f4) A descriptor start");
    detail::smem_at(*c.cta, j.lb.start, 1, "tcgen05.mma (f8f6f4) B descriptor start");
    detail::check_tmem_cols(*c.cta, tmem_d & 0xffffu, j.id.n, "tcgen05.mma (f8f6f4, D)");
    c.mma_pending.push_back(j);
  }
};

}  // namespace jax_sm100::emu
