// sm90 launch unit of the FP8 M-grouped GEMM (kernels/sm90/grouped_fp8_gemm.cuh): tensor
// maps, the grouped order and the persistent launch. Three kernels, all 128 columns wide
// (an N tile must lie in one 128-column B-scale block, so block_n 256 runs the 128 x 128
// one): 128-row tiles on one CTA (overlapped promotion), and 256-row tiles (two 128-row
// waves per K block: each B tile feeds twice the MMAs, as the dense kernel's 256 x 128)
// on a pair of CTAs along N sharing A by multicast when N spans two tiles or more, else
// on one CTA.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/grouped_problem.h"
#include "common/launch.h"
#include "common/tensor_map.h"
#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/kernels/sm90/grouped_fp8_gemm.cuh"
#include "sm90/grouped_gemm_launch.h"

namespace jax_sm100::host {

namespace {

namespace fp8 = jax_sm100::kernels::sm90_fp8;

using GroupedFp8Cfg128 = fp8::Fp8GemmConfig<128, 128, false, 1>;
using GroupedFp8Cfg256 = fp8::Fp8GemmConfig<256, 128, false, 1>;
using GroupedFp8Cfg256Pair = fp8::Fp8GemmConfig<256, 128, false, 2, /*PAIR_ALONG_N=*/true>;

/// Tile rows per L2 band of the order (the dense default).
constexpr int kGroupM = 8;

/// A row-major tensor of rank 2 ([outer, inner]) or 3 ([batch, outer, inner]) read or
/// written in boxes of box_outer rows x box_inner elements.
std::string encode(CUtensorMap* map, const void* base, CUtensorMapDataType dtype, uint32_t elem_bytes,
                   uint32_t rank, int64_t inner, int64_t outer, int64_t batch, uint32_t box_inner,
                   uint32_t box_outer, CUtensorMapSwizzle swizzle) {
  const TensorMapSpec s{base, dtype, elem_bytes, rank, static_cast<uint64_t>(inner),
                        static_cast<uint64_t>(outer), static_cast<uint64_t>(batch),
                        /*row_pitch_bytes=*/0, box_inner, box_outer, swizzle};
  return encode_tensor_map(map, s);
}

/// One launch of the kernel of configuration Cfg.
template <class Cfg>
std::string launch_grouped_fp8(const Fp8GroupedGemmProblem& pr, int num_sms, cudaStream_t stream) {
  using Layout = fp8::GroupedFp8Layout<Cfg>;
  const int num_kb = static_cast<int>((pr.k + 127) / 128);
  if (num_kb > fp8::kMaxKBlocks) return "K must be <= " + std::to_string(fp8::kMaxKBlocks * 128);
  CUtensorMap map_a, map_b, map_sfa, map_d;
  // A: each CTA of a pair loads its half of the tile's rows (multicast to both).
  std::string err = encode(&map_a, pr.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, 2, pr.k, pr.m, 1,
                           Cfg::BLOCK_K, Cfg::BLOCK_M / Cfg::kClusterN, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) return "a: " + err;
  err = encode(&map_b, pr.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, 3, pr.k, pr.n, pr.g, Cfg::BLOCK_K,
               Cfg::BLOCK_N, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) return "b: " + err;
  // A's scales (ceil(K/128), mp) f32, one tile's BLOCK_M of them per box (by TMA for tiles
  // whose first row is a multiple of 4; see the kernel's header).
  err = encode(&map_sfa, pr.a_scale_t, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 2, pr.mp, num_kb, 1,
               Cfg::BLOCK_M, 1, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (!err.empty()) return "a_scale: " + err;
  err = encode(&map_d, pr.out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, 2, pr.n, pr.m, 1, Cfg::kEpiChunk,
               Cfg::WG_M, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) return "out: " + err;

  fp8::GroupedFp8Params p{};
  p.m = static_cast<int>(pr.m);
  p.n = static_cast<int>(pr.n);
  p.k = static_cast<int>(pr.k);
  p.num_kb = num_kb;
  p.num_nb = static_cast<int>((pr.n + 127) / 128);
  p.b_scale = pr.b_scale;
  p.beta = 0.0f;
  // Whole boxes every stage (TMA counts the zero fill past M, K and N): A and B. A's
  // scales add BLOCK_M * 4 bytes when they come by TMA (the producer adds them), else
  // arrive by cp.async, counted as arrivals, not bytes.
  static_assert(Cfg::BLOCK_M * Cfg::BLOCK_K + Cfg::BLOCK_N * Cfg::BLOCK_K ==
                    Cfg::Payload::a_bytes + Cfg::Payload::b_bytes,
                "stage transaction bytes out of step with the payload");
  p.stage_tx_bytes = Cfg::Payload::a_bytes + Cfg::Payload::b_bytes;
  p.group_sizes = pr.group_sizes;
  p.a_scale_t = pr.a_scale_t;
  p.mp = static_cast<int>(pr.mp);
  p.out = static_cast<__nv_bfloat16*>(pr.out);
  // The order's tile columns: N tiles, or pairs of them (kernel: GroupedFp8Walk).
  const int64_t n_tiles = (pr.n + Cfg::BLOCK_N * Cfg::kClusterN - 1) / (Cfg::BLOCK_N * Cfg::kClusterN);
  p.groups = kernels::GroupedOrder::make(p.m, static_cast<int>(pr.g), Cfg::BLOCK_M,
                                         static_cast<int>(n_tiles), kGroupM, Layout::kTableEntries);
  const int64_t units = p.groups.max_tile_rows() * n_tiles;
  if (units > INT32_MAX || int64_t(kGroupM) * n_tiles > INT32_MAX)
    return "too many output tiles (up to " + std::to_string(units) + ") for one launch";
  // The tile count is known on the device only: the grid is sized by its bound (every
  // CTA also writes its share of the rows in no group, whatever the grid).
  PersistentLaunch l;
  l.cluster = Cfg::kCluster;
  l.threads = Cfg::kThreads;
  l.smem_bytes = Layout::kSmemBytes;
  l.smem_limit = static_cast<int>(Layout::kSmemBytes);
  l.units = units;
  l.num_sms = num_sms;
  l.single_cta = SingleCtaLaunch::kPlain;
  return launch_persistent<fp8::sm90_grouped_fp8_gemm_kernel<Cfg>>(l, stream, map_a, map_b, map_sfa, map_d, p);
}

}  // namespace

std::string sm90_fp8_grouped_gemm_launch(const Fp8GroupedGemmProblem& pr, int num_sms,
                                         cudaStream_t stream) {
  // The handler has checked the tiling against kFp8GroupedTilings.
  if (pr.tiling.block_m == 256) {
    return pr.n > 128 ? launch_grouped_fp8<GroupedFp8Cfg256Pair>(pr, num_sms, stream)
                      : launch_grouped_fp8<GroupedFp8Cfg256>(pr, num_sms, stream);
  }
  return launch_grouped_fp8<GroupedFp8Cfg128>(pr, num_sms, stream);
}

}  // namespace jax_sm100::host
