// EmuMxOps: the CPU emulator's side of the MXFP8 kernel's three Ops members (the MX part
// of kernels/sm100/ops_concept.h), on top of EmuOps (emu_ops.h): a plain bulk copy
// global -> shared, tcgen05.cp.32x128b.warpx4 and the block-scaled UMMA
// tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X. Plus the exact decoders of the
// formats involved and of the kind::mxf8f6f4 instruction descriptor, written from the
// PTX ISA and the OCP MX v1.0 spec independently of the kernel's encoders.
//
// Modelled semantics (the strictest reading a correct kernel must survive, as emu_ops.h):
//  * cp.async.bulk global -> shared (mbarrier::complete_tx): both addresses 16-byte
//    aligned, size a nonzero multiple of 16, the destination inside the CTA's window;
//    copied at issue, then complete_tx(size) on the barrier.
//  * tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s_desc: decoded and checked at
//    issue (lane field 0, columns taddr..taddr+3 allocated, the descriptor's version
//    field), EXECUTED at the issuing thread's next tcgen05.commit, in issue order with
//    its UMMA (the ISA makes cp -> mma of one thread a pipelined pair; commit tracks
//    both): the latest moment the hardware may read shared memory. Source row i
//    (i < 32), byte j (j < 16) is the byte the matrix descriptor names for element
//    (row i, K j) of an 8-bit K-major operand (smem_desc_model.h); it lands in byte
//    j % 4 of TMEM cell (lane 32 w + i, column taddr + j / 4) for every lane partition
//    w = 0..3 (warpx4 multicast).
//  * tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X: the instruction
//    descriptor decoded field by field (reserved bits, sparsity, scale type UE8M0, M =
//    128, N a multiple of 16 up to 256, formats E4M3 / E5M2: other formats are not
//    modelled); executed at the next commit like umma_f16. Row m of D (TMEM lane m)
//    takes A's scale from byte a_sf_id of cell (lane m, column sfa + m / 32) and B's
//    scale of column n from byte b_sf_id of cell (lane 32 (m / 32) + n % 32, column
//    sfb + n / 32): each lane partition reads its own copy, so scales not duplicated
//    to all four partitions give wrong rows. Arithmetic: the 32 products of decoded
//    elements are summed in fp64 (exact), multiplied by 2^(sa-127) * 2^(sb-127) (NaN for
//    code 255), added to the fp32 accumulator (or 0) and rounded once to fp32. The
//    hardware's internal order and precision are not specified by the PTX ISA: tests
//    compare with a tolerance. NaN scales follow the OCP rule (the whole block is NaN):
//    how the tensor core treats UE8M0 0xFF is not stated in the PTX text this follows,
//    so the first-use self-test on the hardware includes a NaN-scale block.
//  * The emulator does not model an MMA running concurrently with a later tcgen05.cp of
//    the same thread (mma -> cp is not a pipelined pair): the kernel gives each input
//    stage its own TMEM scale columns, which are rewritten only after that stage's
//    commit has freed it (mx_gemm_roles.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "emu/emu_ops.h"
#include "emu/smem_desc_model.h"

namespace jax_sm100::emu {

namespace mx {

/// float8_e4m3fn bits -> value (exact): bias 7, no infinities, S.1111.111 is NaN.
inline double e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  double v = (e == 0xf && m == 7) ? NAN : e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}

/// float8_e5m2 bits -> value (exact): bias 15, IEEE infinities and NaNs.
inline double e5m2_value(uint8_t b) {
  const int e = (b >> 2) & 0x1f, m = b & 3;
  double v = e == 0x1f ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp(double(m), -16) : std::ldexp(double(4 + m), e - 17);
  return (b & 0x80) ? -v : v;
}

/// float8_e8m0fnu (UE8M0) code -> 2^(code - 127); code 255 is NaN.
inline double e8m0_value(uint8_t code) { return code == 0xff ? NAN : std::ldexp(1.0, int(code) - 127); }

/// tcgen05.mma kind::mxf8f6f4 instruction descriptor, field by field (PTX ISA table
/// "Instruction descriptor format for .kind::mxf8f6f4").
struct InstrDescMx {
  uint32_t b_sf_id;  ///< [4,6): byte of B's scale cells
  uint32_t a_fmt;    ///< [7,10): 0 E4M3, 1 E5M2 (3 E2M3, 4 E3M2, 5 E2M1: not modelled)
  uint32_t b_fmt;    ///< [10,13)
  bool negate_a;     ///< [13]
  bool negate_b;     ///< [14]
  Major a_major;     ///< [15]: 0 K-major
  Major b_major;     ///< [16]
  uint32_t n;        ///< [17,23) holds N >> 3
  uint32_t m;        ///< [27,29) holds M >> 7
  uint32_t a_sf_id;  ///< [29,31)
};

inline InstrDescMx decode_idesc_mx(uint32_t d) {
  if (d & 0x3u) throw std::runtime_error("mxf8f6f4 idesc: reserved bits [0,2) set");
  if (d & (1u << 2)) throw std::runtime_error("mxf8f6f4 idesc: sparsity set (not modelled)");
  if (d & ((1u << 3) | (1u << 6) | (7u << 24) | (1u << 31)))
    throw std::runtime_error("mxf8f6f4 idesc: reserved bit set");
  if (!(d & (1u << 23))) throw std::runtime_error("mxf8f6f4 idesc: scale type must be UE8M0 (bit 23 = 1)");
  InstrDescMx r;
  r.b_sf_id = (d >> 4) & 3;
  r.a_fmt = (d >> 7) & 7;
  r.b_fmt = (d >> 10) & 7;
  r.negate_a = (d >> 13) & 1;
  r.negate_b = (d >> 14) & 1;
  r.a_major = ((d >> 15) & 1) ? Major::kMN : Major::kK;
  r.b_major = ((d >> 16) & 1) ? Major::kMN : Major::kK;
  r.n = ((d >> 17) & 0x3f) << 3;
  r.m = ((d >> 27) & 3) << 7;
  r.a_sf_id = (d >> 29) & 3;
  if (r.a_fmt > 1 || r.b_fmt > 1)
    throw std::runtime_error("mxf8f6f4 idesc: element format other than E4M3 (0) / E5M2 (1) is not modelled");
  return r;
}

inline double element_value(uint8_t bits, uint32_t fmt) { return fmt == 0 ? e4m3_value(bits) : e5m2_value(bits); }

}  // namespace mx

namespace detail {

/// One tcgen05.cp.32x128b.warpx4, executed at the issuing thread's next commit.
struct TmemCopyJob {
  Cta* cta = nullptr;
  SmemLayout src;
  uint32_t col = 0;
  void operator()() const {
    check_tmem_cols(*cta, col, 4, "tcgen05.cp (destination)");
    for (uint32_t i = 0; i < 32; ++i) {
      uint8_t row[16];
      for (uint32_t j = 0; j < 16; ++j)
        row[j] = *smem_at(*cta, element_address(src, Major::kK, i, j, 1), 1, "tcgen05.cp source");
      for (uint32_t w = 0; w < 4; ++w) {
        for (uint32_t c = 0; c < 4; ++c) std::memcpy(&cta->tmem.cell(32 * w + i, col + c), row + 4 * c, 4);
      }
    }
  }
};

/// One decoded block-scaled UMMA (M = 128, K = 32), executed at the next commit.
struct MxMmaJob {
  Cta* cta = nullptr;
  uint32_t tmem_d = 0, sfa_col = 0, sfb_col = 0;
  SmemLayout la, lb;
  mx::InstrDescMx id{};
  bool accumulate = false;

  static uint8_t scale_byte(Cta& cta, uint32_t lane, uint32_t col, uint32_t byte) {
    uint32_t cell = cta.tmem.cell(lane, col);
    return static_cast<uint8_t>(cell >> (8 * byte));  // little-endian bytes of the 32-bit cell
  }

  void operator()() const {
    constexpr uint32_t K = 32;
    const uint32_t M = id.m, N = id.n, col0 = tmem_d & 0xffffu;
    check_tmem_cols(*cta, col0, N, "tcgen05.mma (D)");
    check_tmem_cols(*cta, sfa_col, M / 32, "tcgen05.mma (scale A)");
    check_tmem_cols(*cta, sfb_col, (N + 31) / 32, "tcgen05.mma (scale B)");
    std::vector<double> a(size_t(M) * K), b(size_t(N) * K);
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t k = 0; k < K; ++k) {
        const uint8_t bits = *smem_at(*cta, element_address(la, id.a_major, m, k, 1), 1, "tcgen05.mma A operand");
        a[m * K + k] = (id.negate_a ? -1.0 : 1.0) * mx::element_value(bits, id.a_fmt);
      }
    for (uint32_t n = 0; n < N; ++n)
      for (uint32_t k = 0; k < K; ++k) {
        const uint8_t bits = *smem_at(*cta, element_address(lb, id.b_major, n, k, 1), 1, "tcgen05.mma B operand");
        b[n * K + k] = (id.negate_b ? -1.0 : 1.0) * mx::element_value(bits, id.b_fmt);
      }
    for (uint32_t m = 0; m < M; ++m) {
      const double sa = mx::e8m0_value(scale_byte(*cta, m, sfa_col + m / 32, id.a_sf_id));
      const uint32_t part = 32 * (m / 32);  // the lane partition that computes row m
      for (uint32_t n = 0; n < N; ++n) {
        const double sb = mx::e8m0_value(scale_byte(*cta, part + n % 32, sfb_col + n / 32, id.b_sf_id));
        double s = 0.0;
        for (uint32_t k = 0; k < K; ++k) s += a[m * K + k] * b[n * K + k];
        uint32_t& cell = cta->tmem.cell(m, col0 + n);
        float prev = 0.0f;
        if (accumulate) std::memcpy(&prev, &cell, 4);
        const float out = static_cast<float>(double(prev) + s * sa * sb);
        std::memcpy(&cell, &out, 4);
      }
    }
  }
};

}  // namespace detail

/// EmuOps plus the MXFP8 kernel's members (see ops_concept.h, the MX part).
struct EmuMxOps : EmuOps {
  static void bulk_load(void* smem, const void* gmem, uint32_t bytes, Barrier* bar) {
    const uint32_t off = detail::smem_offset(smem, bytes, "cp.async.bulk (destination)");
    if ((kSmemBase + off) % 16 != 0 || reinterpret_cast<uintptr_t>(gmem) % 16 != 0)
      detail::violation("cp.async.bulk: shared and global addresses must be 16-byte aligned");
    if (bytes == 0 || bytes % 16 != 0) detail::violation("cp.async.bulk: size must be a nonzero multiple of 16");
    detail::check_barrier(bar, "cp.async.bulk");
    std::memcpy(smem, gmem, bytes);
    bar->complete_tx(bytes);
  }

  static void tmem_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(1);
    if ((taddr >> 16) != 0) detail::violation("tcgen05.cp.32x128b.warpx4: the address's lane field must be 0");
    detail::TmemCopyJob j;
    j.cta = c.cta;
    j.col = taddr & 0xffffu;
    try {
      j.src = decode_sm100(sdesc);
    } catch (const std::exception& e) {
      detail::violation(std::string("tcgen05.cp: ") + e.what());
    }
    detail::check_tmem_cols(*c.cta, j.col, 4, "tcgen05.cp (destination)");
    detail::smem_at(*c.cta, j.src.start, 16, "tcgen05.cp source start");
    c.mma_pending.push_back(j);
  }

  static void umma_mx(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t tmem_sfa,
                      uint32_t tmem_sfb, bool accumulate) {
    detail::ThreadCtx& c = detail::ctx();
    detail::use_cta_group(1);
    detail::MxMmaJob j;
    try {
      j.id = mx::decode_idesc_mx(idesc);
      j.la = decode_sm100(desc_a);
      j.lb = decode_sm100(desc_b);
    } catch (const std::exception& e) {
      detail::violation(std::string("tcgen05.mma.kind::mxf8f6f4: ") + e.what());
    }
    if (j.id.m != 128) detail::violation("cta_group::1 block-scaled tcgen05.mma: only M = 128 is modelled");
    if (j.id.n % 16 != 0 || j.id.n < 16 || j.id.n > 256)
      detail::violation("tcgen05.mma: N must be a multiple of 16 in [16, 256], idesc says " + std::to_string(j.id.n));
    if ((tmem_d >> 16) != 0) detail::violation("tcgen05.mma: D must start at TMEM lane 0 (M = 128)");
    if ((tmem_sfa >> 16) != 0 || (tmem_sfb >> 16) != 0)
      detail::violation("tcgen05.mma: the scale-factor addresses' lane fields must be 0 (128 rows, all partitions)");
    j.cta = c.cta;
    j.tmem_d = tmem_d;
    j.sfa_col = tmem_sfa & 0xffffu;
    j.sfb_col = tmem_sfb & 0xffffu;
    j.accumulate = accumulate;
    detail::smem_at(*c.cta, j.la.start, 1, "tcgen05.mma A descriptor start");
    detail::smem_at(*c.cta, j.lb.start, 1, "tcgen05.mma B descriptor start");
    detail::check_tmem_cols(*c.cta, tmem_d & 0xffffu, j.id.n, "tcgen05.mma (D)");
    detail::check_tmem_cols(*c.cta, j.sfa_col, 4, "tcgen05.mma (scale A)");
    detail::check_tmem_cols(*c.cta, j.sfb_col, (j.id.n + 31) / 32, "tcgen05.mma (scale B)");
    c.mma_pending.push_back(j);
  }
};

}  // namespace jax_sm100::emu
