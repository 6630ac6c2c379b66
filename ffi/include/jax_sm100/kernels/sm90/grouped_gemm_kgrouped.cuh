// The sm_90a K-grouped GEMM (the weight gradient of ragged_dot):
//
//   out[g] (K, N) = lhs[start_g:end_g, :]^T @ dy[start_g:end_g, :]   for g < G
//
// lhs (M, K) and dy (M, N) row-major; the contraction runs over the group's rows. In the
// dense kernel's terms (kernels/sm90/gemm.cuh) A = lhs^T is M-major (trans_a) and B = dy
// N-major, so the tiles load and multiply exactly as the dense kernel's (trans_a = 1,
// trans_b = 0) layout, with the K loop over rows [start_g, end_g) in 64-row blocks from
// start_g. Output tiles: the dense tile order (common/tile_scheduler.cuh) over
// (ceil(K / BLOCK_M), ceil(N / BLOCK_N)) tiles per group, the group as the batch
// coordinate; out is a (G, K, N) tensor map, so the TMA stores clip at K and N of each
// group's slice. Tile costs follow the group sizes; the round-robin walk spreads the
// tiles of a large group over all CTAs (a group's tiles are consecutive in the order).
//
// A group's last K block reaches past end_g into the next group's rows (or past M, which
// TMA fills with zeros): before its wgmmas the consumer warpgroups zero those rows of
// every A and B box in shared memory (both operands, so no Inf or NaN of the next group
// can leak through 0 * x), then fence the async proxy and meet at a named barrier. An
// empty group has no K blocks: its tiles store zeros.
//
// Roles, barriers, group table and epilogue as the M-grouped kernel (grouped_gemm.cuh);
// the group table gives each tile's rows (GroupedOrder::group_rows).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/gemm.cuh"
#include "jax_sm100/kernels/sm90/grouped_gemm.cuh"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::kernels::sm90 {

/// Everything the K-grouped kernel needs (a __grid_constant__ parameter).
struct KGroupedGemmParams {
  CUtensorMap tma_a;  ///< lhs (1, M, K) read as the M-major A: box {64 (K), 64 (rows)}
  CUtensorMap tma_b;  ///< dy (1, M, N), N-major B: box {64 (N), 64 (rows)}
  CUtensorMap tma_d;  ///< out (G, K, N): box {EPI_N, 64}
  const int32_t* group_sizes;  ///< (G,) device memory
  GroupedOrder groups;  ///< the group table's layout (rows only are used)
  TileOrder order;      ///< (ceil(K/BM), ceil(N/BN)) tiles per group, G groups
};

/// Named barrier of the 256 consumer threads (1 and 2 are the warpgroups' epilogues).
constexpr uint32_t kConsumersBarrier = 3;

/// The stage fixup of one tile's K loop over `rows` rows: in the K block that reaches past
/// the group's last row, zero the rows past it in every 64-row box of the A and B tiles
/// (whole 128-byte rows: the swizzle only permutes 16-byte pieces inside a row), shared by
/// the 256 consumer threads (`tid`), then fence and meet.
template <class Cfg, class T>
struct ZeroRowsPastGroup {
  int rows;  ///< the group's rows (> 0 when there is a K block at all)
  int tid;   ///< 0..255 among the consumer threads

  template <class Stage>
  __device__ __forceinline__ void operator()(const Stage& st, int kb) const {
    const int valid = rows - kb * Cfg::kBlockK;  // rows of this block inside the group
    if (valid >= Cfg::kBlockK) return;           // uniform over both warpgroups
    constexpr int kBoxes = (Cfg::kBlockM + Cfg::kBlockN) / 64;  // A's boxes, then B's
    const uint32_t bytes = static_cast<uint32_t>(Cfg::kBlockK - valid) * 128u;  // per box
    uint8_t* a = reinterpret_cast<uint8_t*>(st.a_tile());
    uint8_t* b = reinterpret_cast<uint8_t*>(st.b_tile());
    for (int box = 0; box < kBoxes; ++box) {
      uint8_t* dst = (box < Cfg::kBlockM / 64 ? a + box * 64 * 128 : b + (box - Cfg::kBlockM / 64) * 64 * 128) +
                     valid * 128;
      for (uint32_t off = static_cast<uint32_t>(tid) * 16u; off < bytes; off += 256u * 16u)
        *reinterpret_cast<uint4*>(dst + off) = make_uint4(0u, 0u, 0u, 0u);
    }
    ptx::fence_proxy_async_shared_cta();  // st.shared -> visible to the wgmma reads
    named_barrier_sync(kConsumersBarrier, 256);
  }
};

/// K-grouped producer (warp 0, one lane): per tile, the group's rows in 64-row K blocks:
/// A (BM/64 boxes of 64 K-columns x 64 rows) and B (BN/64 boxes of 64 N x 64 rows).
template <class Cfg, class T, class InputPipe>
__device__ __forceinline__ void k_grouped_producer(InputPipe& input, const KGroupedGemmParams& p,
                                                   const GroupTableEntry* table,
                                                   const TileScheduler& sched) {
  auto producer = input.producer();
  for (int t = sched.first; t < sched.count(); t += sched.stride) {
    int g, mt, nt;
    sched.tile(t, g, mt, nt);
    int lo, hi;
    p.groups.group_rows(table, p.group_sizes, g, lo, hi);
    const int k_blocks = (hi - lo + Cfg::kBlockK - 1) / Cfg::kBlockK;
    for (int kb = 0; kb < k_blocks; ++kb) {
      auto st = producer.acquire_stage();  // waits on empty[stage]
      st.expect_bytes();  // whole boxes: TMA counts the zero fill past M, K and N too
      uint64_t* bar = st.mbar()->ptr();
      const int k0 = lo + kb * Cfg::kBlockK;
      T* a = st.a_tile();
      T* bt = st.b_tile();
#pragma unroll
      for (int i = 0; i < Cfg::kBlockM / 64; ++i)  // (BM/64, 64 rows, 64 K-columns)
        ptx::tma_load_3d(a + i * 64 * 64, &p.tma_a, bar, mt * Cfg::kBlockM + 64 * i, k0, 0);
#pragma unroll
      for (int j = 0; j < Cfg::kBlockN / 64; ++j)  // (BN/64, 64 rows, 64 N)
        ptx::tma_load_3d(bt + j * 64 * 64, &p.tma_b, bar, nt * Cfg::kBlockN + 64 * j, k0, 0);
      std::move(st).release();
    }
  }
}

/// K-grouped consumer warpgroup w (0 or 1): output rows w*64.. of every tile.
template <class Cfg, class T, class Out, class InputPipe>
__device__ __forceinline__ void k_grouped_consumer(InputPipe& input, uint8_t* smem_d,
                                                   const KGroupedGemmParams& p,
                                                   const GroupTableEntry* table,
                                                   const TileScheduler& sched, int w) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  // This WG's 64 output rows = one 64-wide block of the M-major A tile (8 KB).
  const uint32_t a_off = w * 64 * 128;
  uint8_t* my_d = smem_d + w * Cfg::kDBufs * Cfg::kEpiTileBytes;
  float acc[Cfg::kWgTileN / 2];
  for (int t = sched.first; t < sched.count(); t += sched.stride) {
    int g, mt, nt;
    sched.tile(t, g, mt, nt);
    int lo, hi;
    p.groups.group_rows(table, p.group_sizes, g, lo, hi);
    const int k_blocks = (hi - lo + Cfg::kBlockK - 1) / Cfg::kBlockK;
#pragma unroll
    for (int i = 0; i < Cfg::kWgTileN / 2; ++i) acc[i] = 0.f;
    const ZeroRowsPastGroup<Cfg, T> fixup{hi - lo, static_cast<int>(threadIdx.x) - 128};
    // wgmma imm-trans: A M-major, B N-major.
    consumer_mainloop<Cfg, T, 1, 1>(input, acc, k_blocks, a_off, 0, lane, fixup);
    store_part<Cfg, Out>(acc, my_d, &p.tma_d, nullptr, 0, mt * Cfg::kBlockM + w * 64,
                         nt * Cfg::kBlockN, g, 64, w);
  }
  if (threadIdx.x % 128 == 0) ptx::tma_store_wait_group_read<0>();
}

/// The K-grouped kernel. T: bf16 or fp16 inputs; Out: bf16, fp16 or f32.
template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_kgrouped_gemm_kernel(const __grid_constant__ KGroupedGemmParams p) {
#if JAX_SM100_SM90A_DEVICE
  using namespace jax_sm100::pipeline;
  using Payload = StandardTilePayload<T, T, Cfg::kBlockM * Cfg::kBlockK, Cfg::kBlockN * Cfg::kBlockK,
                                      Cfg::kStages>;
  static_assert(sizeof(Payload) == Cfg::kPayloadBytes, "payload layout");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<DeviceBarrier*>(smem + Cfg::kBarOffset);
  GroupTableEntry* table = group_table<Cfg>(smem);
  InputTilePipeline<Payload, Cfg::kStages> input(bars, reinterpret_cast<Payload*>(smem),
                                                 "sm90_kgrouped_gemm.input");

  const int warp = static_cast<int>(ptx::warp_idx_sync());
  if (threadIdx.x == 0) {
    input.init_barriers(1, Cfg::kNumConsumerWarps);
    ptx::tma_prefetch_descriptor(&p.tma_a);
    ptx::tma_prefetch_descriptor(&p.tma_b);
    ptx::tma_prefetch_descriptor(&p.tma_d);
  }
  if (warp == 3) build_group_table_warp(p.groups, p.group_sizes, table);
  __syncthreads();
  const TileScheduler sched = TileScheduler::make(p.order, 1, 1, 0, static_cast<int>(blockIdx.x),
                                                  static_cast<int>(gridDim.x));

  if (warp < 4) {
    ptx::setmaxnreg_dec<40>();
    if (warp == 0 && threadIdx.x % 32 == 0) k_grouped_producer<Cfg, T>(input, p, table, sched);
  } else {
    ptx::setmaxnreg_inc<232>();
    k_grouped_consumer<Cfg, T, Out>(input, smem + Cfg::kDOffset, p, table, sched, warp / 4 - 1);
  }
#endif  // JAX_SM100_SM90A_DEVICE
}

}  // namespace jax_sm100::kernels::sm90
