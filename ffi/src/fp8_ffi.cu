// XLA FFI handlers for the sm_90a blockwise-scaled FP8 GEMM:
//
//   "jax_sm100_fp8_gemm":          a (M, K) f8e4m3fn,
//                                  a_scale_t (ceil(K/128), round_up(M, 4)) f32: a's 1x128
//                                    scales TRANSPOSED (K-block major, rows 16-byte aligned;
//                                    pad entries ignored), so one TMA box brings a stage's
//                                    BLOCK_M scales in the stage's single transaction,
//                                  b (N, K) f8e4m3fn, b_scale (ceil(N/128), ceil(K/128)) f32
//                                  -> d (M, N) bf16
//   "jax_sm100_fp8_gemm_residual": the same + c (M, N) bf16, attribute beta (f32):
//                                  d = ... + beta * c  (beta == 0: c is not read)
// The op's documented a_scale layout (M, ceil(K/128)) has rows strided by ceil(K/128)
// floats, which no TMA box fits; the Python layer transposes it (or the quantizer writes
// the transposed layout directly). An earlier cp.async path for the documented layout was
// slower on every measured shape (H200, 2026-11-22) and is gone.
// Requirements (TMA: 16-byte aligned row strides): K % 16 == 0, N % 8 == 0; K <= 65536.
// Graph-safe (kCmdBufferCompatible): tensor maps are built on the host per call, no
// allocation, no synchronisation.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/device.h"
#include "targets.h"
#include "jax_sm100/kernels/sm90/fp8_gemm.cuh"
#include "common/tensor_map.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

namespace fp8 = jax_sm100::kernels::sm90_fp8;

/// 2D row-major tensor map: dims {inner, outer}, row pitch in bytes, box {box_inner,
/// box_outer}. Out-of-bounds reads fill zeros; out-of-bounds stores are dropped.
std::string encode_2d(CUtensorMap* map, const void* base, CUtensorMapDataType dtype,
                      uint64_t inner, uint64_t outer, uint64_t pitch_bytes, uint32_t box_inner,
                      uint32_t box_outer, CUtensorMapSwizzle swizzle) {
  auto encode = jax_sm100::host::tensor_map_encoder();
  if (encode == nullptr) return "the CUDA driver does not provide cuTensorMapEncodeTiled";
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {pitch_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUresult r = encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) +
           ") for a [" + std::to_string(outer) + ", " + std::to_string(inner) + "] tensor";
  return "";
}

using jax_sm100::host::sm_count;

/// Tile width override for tests (JAX_SM100_FP8_BLOCK_N = 64 | 128 | 192), else a
/// heuristic: 128, or 64 when 128-wide tiles would leave SMs idle (decode-like shapes).
int pick_block_n(int64_t m, int64_t n) {
  if (const char* env = std::getenv("JAX_SM100_FP8_BLOCK_N")) {
    const int v = std::atoi(env);
    if (v == 64 || v == 128 || v == 192) return v;
  }
  const int64_t tiles128 = ((m + 127) / 128) * ((n + 127) / 128);
  return tiles128 < sm_count() ? 64 : 128;
}

/// The cluster a launch runs with: 1 CTA, a pair along M (sharing B), a pair along N
/// (sharing A), or 2x2 (sharing both).
struct ClusterShape {
  int ctas;      // 1, 2 or 4
  bool along_n;  // a pair: along N (A multicast) instead of along M (B multicast)
};

/// CTAs per cluster (JAX_SM100_FP8_CLUSTER = 1 | 2 | 2n | 4 overrides; 2 = a pair along
/// M sharing B, 2n = a pair along N sharing A, 4 = 2x2, sharing both A and B). Default
/// for 128-row tiles: 2 (along M) when there are at least two M tiles: on an H200
/// (2026-11-22, commit e80ef63) cluster 2 with overlapped promotion was the fastest
/// measured variant on the large shapes (1173 vs 1096 TFLOP/s at 4096x7168x16384, 1140
/// vs 1005 at 8192^3; the ncu profile shows L2 as the busiest unit). Default for 256-row
/// tiles: 2n when there are at least two N tiles. Each CTA then loads half of the 256-row
/// A tile (32 KB of a 49 KB stage) and multicasts it to its peer, a third less L2->SM
/// traffic than 1 CTA, where a pair along M saves only half of B's 16 KB. Same-run A/B on
/// an H200 (2026-11-22, twelfth session): 2n +1.0-2.3% over 1 CTA on the five large
/// shapes; a pair along M had been within 1% of 1 CTA (eleventh session).
ClusterShape pick_cluster(int64_t m, int64_t n, int bm) {
  ClusterShape c{bm == 192 ? 1 : 2, bm == 256};
  if (const char* env = std::getenv("JAX_SM100_FP8_CLUSTER")) {
    const std::string e(env);
    if (e == "1" || e == "2" || e == "4") c = {std::atoi(env), false};
    if (e == "2n") c = {2, true};
  }
  // The tile height decides; the cluster follows what that tile is built with (an
  // override must not silently turn 192- or 256-row tiles into 128-row ones).
  if (bm == 192) return {1, false};              // three math WGs: 1 CTA only
  if (bm == 256 && c.ctas == 4) c = {2, false};  // 256-row tiles: 1 CTA or a pair
  if (bm != 256) c.along_n = false;              // pairs along N: built for 256-row tiles only
  if (c.ctas == 4 && n <= 128) c = {2, false};   // one N tile: nothing to share along N
  if (c.along_n ? n <= 128 : m <= bm) c = {1, false};  // nothing to share
  return c;
}

/// Predicted useful fraction of a persistent launch of bm x 128 tiles, one CTA per SM: the
/// last wave's filled share (tiles / (grid * waves)) times the rows of M over the rows
/// tiled. Same-machine timings of 192x128 against 256x128 tiles (H200, 2026-11-22,
/// docs/device_runs/2026-11-22_h200_4a1d308_m192_*) followed the ratio of this figure to
/// within 2% at four shapes: the two kernels run about equally fast per tile.
double tile_efficiency(int64_t m, int64_t n, int bm) {
  const int64_t m_tiles = (m + bm - 1) / bm;
  const int64_t tiles = m_tiles * ((n + 127) / 128);
  const int64_t grid = tiles < sm_count() ? tiles : sm_count();
  const int64_t waves = (tiles + grid - 1) / grid;
  return static_cast<double>(tiles) / static_cast<double>(grid * waves) *
         static_cast<double>(m) / static_cast<double>(m_tiles * bm);
}

/// Tile height (JAX_SM100_FP8_BLOCK_M = 128 | 192 | 256 overrides). 256 = two 128-row
/// waves per K block: each B tile feeds twice the MMA work; the price is no overlapped
/// promotion (its registers hold the second wave). 192 = three math WGs of 64 rows, one
/// wave: each WG's promotion hides behind two other WGs' wgmmas. Both run 128-wide tiles,
/// one CTA, no residual (those run 128). Default: when 256-row tiles still fill every SM
/// (and 128-wide tiles were picked), 256, or 192 where its tiling is predicted to waste
/// at least 2% less (tile_efficiency); else 128. On the H200s of 2026-11-22 (same-run
/// sweeps in docs/device_runs/) 256x128 beat the overlapped 128x128 by 1-5% at
/// 4096x7168x16384 on three machines; on the previous session's machine it was 2.5%
/// slower.
int pick_block_m(int64_t m, int64_t n, int bn) {
  if (m <= 128 || bn != 128) return 128;  // one 128-row wave holds all of M; 256 is 256x128 only
  if (const char* env = std::getenv("JAX_SM100_FP8_BLOCK_M")) {
    const int v = std::atoi(env);
    return v == 256 || v == 192 ? v : 128;
  }
  const int64_t tiles256 = ((m + 255) / 256) * ((n + 127) / 128);
  if (tiles256 < sm_count()) return 128;
  return tile_efficiency(m, n, 192) > 1.02 * tile_efficiency(m, n, 256) ? 192 : 256;
}

/// Overlapped promotion (second accumulator; JAX_SM100_FP8_OVERLAP = 0 | 1 overrides).
/// On by default for BLOCK_N <= 128 (192-wide tiles have no registers for it).
bool pick_overlap() {
  if (const char* env = std::getenv("JAX_SM100_FP8_OVERLAP")) return std::atoi(env) != 0;
  return true;
}

/// Tiles chained (JAX_SM100_FP8_CHAIN = 0 | 1 overrides; default 1): the next tile's
/// first K block (its first wave, in the one-accumulator forms) is issued before this
/// tile's epilogue, so the tensor cores work during it. Same-run A/B on H200s
/// (2026-11-22): overlapped 128x128 +0.7% at 4096x7168x16384 and 8192^3, +1.7% at
/// 4096^3 (8e0d21c); 256x128 +1.1% at 4096x7168x16384, +2.9% at 4096^3, +2.0% at
/// 4096x24576x1536, +2.7% at 4096x7168x2048, level at 8192^3 (bf71979).
bool pick_chain() {
  if (const char* env = std::getenv("JAX_SM100_FP8_CHAIN")) return std::atoi(env) != 0;
  return true;
}

/// M tiles per group of the persistent tile order (JAX_SM100_FP8_GROUP_M = 1..64
/// overrides; default 8, in cluster rows).
int pick_group_m() {
  if (const char* env = std::getenv("JAX_SM100_FP8_GROUP_M")) {
    const int v = std::atoi(env);
    if (v >= 1 && v <= 64) return v;
  }
  return 8;
}

/// Persistent grid (JAX_SM100_FP8_BALANCED_GRID = 0 | 1 overrides; default 0): with 1,
/// the fewest clusters that still run all cluster tiles in as many rounds as every
/// cluster that fits would (448 pair tiles: 64 pairs rather than 66, 7 rounds either
/// way), as DeepGEMM sizes its grid.
bool pick_balanced_grid() {
  if (const char* env = std::getenv("JAX_SM100_FP8_BALANCED_GRID")) return std::atoi(env) != 0;
  return false;
}

struct Operands {
  const void* a;
  const float* a_scale_t;  // (Kb, Mp)
  const void* b;
  const float* b_scale;
  const void* c;  // residual only
  void* d;
  int64_t m, n, k, mp;
  float beta;
};

template <int BLOCK_N, bool RESIDUAL, int CLUSTER, bool OVERLAP = false, int BLOCK_M = 128,
          bool PAIR_ALONG_N = false>
ffi::Error launch(cudaStream_t stream, const Operands& o) {
  using Cfg = fp8::Fp8GemmConfig<BLOCK_N, RESIDUAL, CLUSTER, OVERLAP, BLOCK_M, PAIR_ALONG_N>;
  auto kernel = fp8::sm90_fp8_gemm_kernel<Cfg>;
  const int num_kb = static_cast<int>((o.k + 127) / 128);
  const uint32_t smem = Cfg::smem_bytes(num_kb);
  static bool attr_set = false;  // once per instantiation (benign race: idempotent)
  if (!attr_set) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(fp8::kSmemLimit)) != cudaSuccess) {
      return ffi::Error::Internal(std::string("fp8_gemm: cudaFuncSetAttribute failed: ") +
                                  cudaGetErrorString(cudaGetLastError()));
    }
    attr_set = true;
  }

  CUtensorMap map_a, map_b, map_sfa, map_d, map_c;
  std::string err;
  // One M tile holding all of M, one CTA per cluster: A's box (and A-scales') stop at M
  // (8-row / 4-scale granules) rather than zero-filling the tile's rows past M, which
  // TMA does slowly (see the kernel's header). Otherwise the full tile.
  const bool short_a = Cfg::kCluster == 1 && o.m < Cfg::BLOCK_M;
  const uint32_t a_box_rows = short_a ? static_cast<uint32_t>((o.m + 7) / 8 * 8)
                                      : static_cast<uint32_t>(Cfg::BLOCK_M / Cfg::kClusterN);
  const uint32_t sfa_box = short_a ? static_cast<uint32_t>(o.mp) : static_cast<uint32_t>(Cfg::BLOCK_M);
  err = encode_2d(&map_a, o.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, o.k, o.m, o.k, Cfg::BLOCK_K,
                  a_box_rows, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_b, o.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, o.k, o.n, o.k, Cfg::BLOCK_K,
                    Cfg::BLOCK_N / Cfg::kClusterM, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_sfa, o.a_scale_t, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, o.mp, num_kb,
                    o.mp * 4, sfa_box, 1, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (err.empty())
    err = encode_2d(&map_d, o.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, o.n, o.m, o.n * 2,
                    Cfg::kEpiChunk, Cfg::WG_M, CU_TENSOR_MAP_SWIZZLE_128B);
  if (err.empty())
    err = encode_2d(&map_c, RESIDUAL ? o.c : o.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, o.n, o.m,
                    o.n * 2, Cfg::kEpiChunk, Cfg::WG_M, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) return ffi::Error::Internal("fp8_gemm: " + err);

  fp8::Fp8GemmParams p;
  p.m = static_cast<int>(o.m);
  p.n = static_cast<int>(o.n);
  p.k = static_cast<int>(o.k);
  p.num_kb = num_kb;
  p.num_nb = static_cast<int>((o.n + 127) / 128);
  p.num_m_tiles = static_cast<int>((o.m + Cfg::BLOCK_M - 1) / Cfg::BLOCK_M);
  p.num_n_tiles = static_cast<int>((o.n + Cfg::BLOCK_N - 1) / Cfg::BLOCK_N);
  p.b_scale = o.b_scale;
  p.beta = o.beta;
  p.chain_tiles = pick_chain() ? 1 : 0;
  // Every CTA's full barrier gets whole A and B tiles (multicast parts add up) and the
  // A-scale box: the payload's full stage unless A's boxes were cut short.
  static_assert(Cfg::BLOCK_M * Cfg::BLOCK_K + Cfg::BLOCK_N * Cfg::BLOCK_K +
                    Cfg::BLOCK_M * sizeof(float) == Cfg::Payload::bytes_per_stage,
                "stage transaction bytes out of step with the payload");
  p.stage_tx_bytes = (short_a ? a_box_rows : Cfg::BLOCK_M) * Cfg::BLOCK_K +
                     Cfg::BLOCK_N * Cfg::BLOCK_K + sfa_box * sizeof(float);
  p.group_m = pick_group_m();
  // The persistent tile order's geometry and divisors (GroupedTileOrder::tile).
  p.order_m = (p.num_m_tiles + Cfg::kClusterM - 1) / Cfg::kClusterM;
  p.order_n = (p.num_n_tiles + Cfg::kClusterN - 1) / Cfg::kClusterN;
  const int last_group_rows = p.order_m - (p.order_m - 1) / p.group_m * p.group_m;
  p.div_group = jax_sm100::kernels::FastDivisor::make(static_cast<uint32_t>(p.group_m * p.order_n));
  p.div_rows = jax_sm100::kernels::FastDivisor::make(static_cast<uint32_t>(p.group_m));
  p.div_last_rows = jax_sm100::kernels::FastDivisor::make(static_cast<uint32_t>(last_group_rows));
  // Persistent grid: one CTA per SM at most, in whole clusters, no more than the cluster
  // tiles. How many clusters fit at once comes from the occupancy API (cached).
  const int64_t cluster_tiles = int64_t(p.order_m) * p.order_n;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(Cfg::kThreads, 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  static int max_clusters = 0;  // per instantiation
  if (max_clusters == 0) {
    cfg.gridDim = dim3(static_cast<unsigned>(sm_count() / CLUSTER * CLUSTER), 1, 1);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = sm_count() / CLUSTER;
    }
    max_clusters = n;
  }
  int64_t clusters = cluster_tiles < max_clusters ? cluster_tiles : max_clusters;
  if (pick_balanced_grid()) {
    const int64_t rounds = (cluster_tiles + clusters - 1) / clusters;
    clusters = (cluster_tiles + rounds - 1) / rounds;
  }
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * CLUSTER), 1, 1);
  cudaError_t le = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, map_sfa, map_d, map_c, p);
  if (le != cudaSuccess) {
    cudaGetLastError();
    return ffi::Error::Internal(std::string("fp8_gemm: kernel launch failed: ") +
                                cudaGetErrorString(le));
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return ffi::Error::Internal(std::string("fp8_gemm: kernel launch failed: ") +
                                cudaGetErrorString(e));
  return ffi::Error::Success();
}

/// The kernel is sm_90a machine code only (wgmma, setmaxnreg): refuse other devices
/// with a sentence instead of trapping.
bool device_is_sm90() {
  static int ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return (major == 9 && minor == 0) ? 1 : 0;
  }();
  return ok != 0;
}

/// The instantiations one cluster size offers. 192-wide tiles have no registers for the
/// overlapped form's second accumulator, and no smem for the residual's C staging (128
/// then). The 2x2 cluster is instantiated at BLOCK_N 128 only, 256-row tiles at
/// 256x128 with 1 CTA or a pair along M, without residual (the pair along N is launched
/// by dispatch), and 192-row tiles (three math WGs) at 192x128 with 1 CTA, without
/// residual (pick_block_m).
template <bool RESIDUAL, int CLUSTER>
ffi::Error dispatch_cluster(cudaStream_t stream, const Operands& o, int bm, int bn, bool overlap) {
  if constexpr (!RESIDUAL && CLUSTER != 4) {
    if (bm == 256) return launch<128, false, CLUSTER, false, 256>(stream, o);
  }
  if constexpr (!RESIDUAL && CLUSTER == 1) {  // three math WGs, one CTA per cluster
    if (bm == 192) return launch<128, false, 1, false, 192>(stream, o);
  }
  (void)bm;
  if constexpr (CLUSTER == 4) {
    if (overlap) return launch<128, RESIDUAL, 4, true>(stream, o);
    return launch<128, RESIDUAL, 4>(stream, o);
  } else {
    if (bn == 192) {
      if constexpr (RESIDUAL) bn = 128;
      else return launch<192, RESIDUAL, CLUSTER>(stream, o);
    }
    if (overlap) {
      if (bn == 64) return launch<64, RESIDUAL, CLUSTER, true>(stream, o);
      return launch<128, RESIDUAL, CLUSTER, true>(stream, o);
    }
    if (bn == 64) return launch<64, RESIDUAL, CLUSTER>(stream, o);
    return launch<128, RESIDUAL, CLUSTER>(stream, o);
  }
}

template <bool RESIDUAL>
ffi::Error dispatch(cudaStream_t stream, const Operands& o) {
  if (!device_is_sm90())
    return ffi::Error::InvalidArgument(
        "fp8_gemm: the FP8 kernel runs on sm_90 (H100/H200) only; use the reference path");
  const int bn = pick_block_n(o.m, o.n);
  const int bm = RESIDUAL ? 128 : pick_block_m(o.m, o.n, bn);  // no C staging room at 256
  const bool overlap = pick_overlap();
  const ClusterShape cluster = pick_cluster(o.m, o.n, bm);
  if constexpr (!RESIDUAL) {
    if (cluster.along_n) return launch<128, false, 2, false, 256, true>(stream, o);  // bm == 256
  }
  switch (cluster.ctas) {
    case 4: return dispatch_cluster<RESIDUAL, 4>(stream, o, bm, bn, overlap);
    case 2: return dispatch_cluster<RESIDUAL, 2>(stream, o, bm, bn, overlap);
    default: return dispatch_cluster<RESIDUAL, 1>(stream, o, bm, bn, overlap);
  }
}

std::string dims_str(ffi::AnyBuffer::Dimensions d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

/// Shape/dtype validation shared by both targets; fills `o`.
ffi::Error validate(ffi::AnyBuffer a, ffi::AnyBuffer a_scale_t, ffi::AnyBuffer b,
                    ffi::AnyBuffer b_scale, ffi::AnyBuffer::Dimensions dd,
                    Operands& o) {
  if (a.element_type() != ffi::F8E4M3FN || b.element_type() != ffi::F8E4M3FN)
    return ffi::Error::InvalidArgument("fp8_gemm: a and b must be float8_e4m3fn");
  if (a_scale_t.element_type() != ffi::F32 || b_scale.element_type() != ffi::F32)
    return ffi::Error::InvalidArgument("fp8_gemm: a_scale and b_scale must be float32");
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() != 2 || bd.size() != 2 || ad[1] != bd[1])
    return ffi::Error::InvalidArgument("fp8_gemm: a must be (M, K) and b (N, K) with the same K; got a " +
                                       dims_str(ad) + ", b " + dims_str(bd));
  o.m = ad[0];
  o.k = ad[1];
  o.n = bd[0];
  o.mp = (o.m + 3) / 4 * 4;
  const int64_t kb = (o.k + 127) / 128, nb = (o.n + 127) / 128;
  auto sad = a_scale_t.dimensions(), sbd = b_scale.dimensions();
  if (sad.size() != 2 || sad[0] != kb || sad[1] != o.mp)
    return ffi::Error::InvalidArgument(
        "fp8_gemm: a_scale must be given transposed and padded, shape "
        "(ceil(K/128), round_up(M, 4)) = (" + std::to_string(kb) + ", " + std::to_string(o.mp) +
        "); got " + dims_str(sad));
  if (sbd.size() != 2 || sbd[0] != nb || sbd[1] != kb)
    return ffi::Error::InvalidArgument("fp8_gemm: b_scale must have shape (ceil(N/128), ceil(K/128)) = (" +
                                       std::to_string(nb) + ", " + std::to_string(kb) + "); got " +
                                       dims_str(sbd));
  if (dd.size() != 2 || dd[0] != o.m || dd[1] != o.n)
    return ffi::Error::InvalidArgument("fp8_gemm: d must have shape (M, N)");
  if (o.k % 16 != 0 || o.n % 8 != 0)
    return ffi::Error::InvalidArgument(
        "fp8_gemm: K must be a multiple of 16 and N a multiple of 8 (TMA row alignment); pad "
        "the operands (zeros in K change nothing)");
  if (kb > fp8::kMaxKBlocks)
    return ffi::Error::InvalidArgument("fp8_gemm: K must be <= 65536");
  if (o.m > INT32_MAX / 2 || o.n > INT32_MAX / 2)
    return ffi::Error::InvalidArgument("fp8_gemm: M and N must fit in int32");
  o.a = a.untyped_data();
  o.a_scale_t = static_cast<const float*>(a_scale_t.untyped_data());
  o.b = b.untyped_data();
  o.b_scale = static_cast<const float*>(b_scale.untyped_data());
  o.c = nullptr;
  o.beta = 0.0f;
  return ffi::Error::Success();
}

ffi::Error fp8_gemm_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                         ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                         ffi::Result<ffi::Buffer<ffi::BF16>> d) {
  Operands o;
  ffi::Error err = validate(a, a_scale, b, b_scale, d->dimensions(), o);
  if (err.failure()) return err;
  o.d = d->untyped_data();
  if (o.m == 0 || o.n == 0) return ffi::Error::Success();
  if (o.k == 0) {  // empty contraction: D = 0
    cudaError_t e = cudaMemsetAsync(o.d, 0, size_t(o.m) * o.n * 2, stream);
    return e == cudaSuccess ? ffi::Error::Success()
                            : ffi::Error::Internal(cudaGetErrorString(e));
  }
  return dispatch<false>(stream, o);
}

ffi::Error fp8_gemm_residual_impl(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer a_scale,
                                  ffi::AnyBuffer b, ffi::AnyBuffer b_scale,
                                  ffi::Buffer<ffi::BF16> c, float beta,
                                  ffi::Result<ffi::Buffer<ffi::BF16>> d) {
  Operands o;
  ffi::Error err = validate(a, a_scale, b, b_scale, d->dimensions(), o);
  if (err.failure()) return err;
  auto cd = c.dimensions();
  if (cd.size() != 2 || cd[0] != o.m || cd[1] != o.n)
    return ffi::Error::InvalidArgument("fp8_gemm_residual: c must have shape (M, N)");
  o.d = d->untyped_data();
  o.c = c.untyped_data();
  o.beta = beta;
  if (o.m == 0 || o.n == 0) return ffi::Error::Success();
  if (o.k == 0)
    return ffi::Error::InvalidArgument("fp8_gemm_residual: K must be positive");
  // beta == 0: C is not read at all (a NaN in C must not leak into D).
  if (beta == 0.0f) return dispatch<false>(stream, o);
  return dispatch<true>(stream, o);
}

}  // namespace

#define JAX_SM100_FP8_BINDING                           \
  ffi::Ffi::Bind()                                      \
      .Ctx<ffi::PlatformStream<cudaStream_t>>()         \
      .Arg<ffi::AnyBuffer>()                            \
      .Arg<ffi::AnyBuffer>()                            \
      .Arg<ffi::AnyBuffer>()                            \
      .Arg<ffi::AnyBuffer>()
#define JAX_SM100_FP8_RESIDUAL_BINDING                  \
  JAX_SM100_FP8_BINDING.Arg<ffi::Buffer<ffi::BF16>>().Attr<float>("beta")

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8Gemm, fp8_gemm_impl,
                              JAX_SM100_FP8_BINDING.Ret<ffi::Buffer<ffi::BF16>>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxSm100Fp8GemmResidual, fp8_gemm_residual_impl,
                              JAX_SM100_FP8_RESIDUAL_BINDING.Ret<ffi::Buffer<ffi::BF16>>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});
