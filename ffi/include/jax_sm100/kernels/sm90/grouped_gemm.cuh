// Persistent, warp-specialized sm_90a grouped (mixture-of-experts) GEMMs, bf16/fp16 in,
// bf16/fp16/f32 out, built on the dense kernel's pieces (kernels/sm90/gemm.cuh: config,
// consumer_mainloop, fragment packing) and the grouped tile order
// (common/grouped_scheduler.cuh):
//
//   M-grouped (this file):  out[r, :] = lhs[r, :] @ rhs[g(r)]  for the rows r of group g;
//                           rows in no group are written as zeros.
//   K-grouped (grouped_gemm_kgrouped.cuh): out[g] = lhs[rows of g]^T @ dy[rows of g].
//
// Roles (384 threads, one CTA per SM, as the dense kernel):
//   warpgroup 0 (setmaxnreg.dec 40): warp 0 lane 0 = TMA producer; before the role split
//     warp 3 builds the CTA's group table in shared memory from group_sizes (device
//     memory: no host synchronisation) while thread 0 initialises the barriers.
//   warpgroups 1, 2 (setmaxnreg.inc 232): wgmma consumers, each 64 rows of the 128-row
//     tile (consumer_mainloop), then the epilogue of their rows (store_part).
// Every role walks the same tiles (first = blockIdx.x, stride = gridDim.x) and decodes
// each through GroupedOrder::tile with its own cached lookup.
//
// M-grouped tiles: a tile starts at its group's first row plus a multiple of BLOCK_M, so
// it never straddles two experts; A is read from that row (rows past the group's end
// feed only output rows that are not stored), B of group g through a 3D tensor map with
// the group as the outer coordinate. The tiles of "group G" (rows in no group) issue no
// loads and no MMAs and store zeros. Stores: a warpgroup whose 64 rows all lie in the
// group stores them by TMA (the box is clipped at N only); a partial one (the group's
// last tile) writes its valid rows from the same staged shared-memory chunks with 16-byte
// stores, since a TMA box would overwrite the next group's rows.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "jax_sm100/common/grouped_scheduler.cuh"
#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/kernels/sm90/gemm.cuh"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::kernels::sm90 {

/// The grouped kernels' configuration: the dense plain GEMM's (two consumer warpgroups
/// along M, one CTA per cluster) plus the group table after the barriers, as large as the
/// remaining shared memory allows (at most 4096 entries).
template <int BM, int BN, int Stages, int DBufs = 0>
struct GroupedGemmConfig : GemmConfig<BM, BN, Stages, 0, 2, 1, DBufs> {
  using Base = GemmConfig<BM, BN, Stages, 0, 2, 1, DBufs>;
  static_assert(BM == 128, "two consumer warpgroups of 64 rows");
  static constexpr uint32_t kTableOffset = Base::kBarOffset + Base::kBarBytes;
  static constexpr uint32_t kSmemLimit = 232448;  // 227 KB per block
  static constexpr int kTableEntries =
      (kSmemLimit - 1024 - kTableOffset) / 8 > 4096 ? 4096 : (kSmemLimit - 1024 - kTableOffset) / 8;
  static_assert(kTableEntries >= 128, "room for a group table of at least 127 groups");
  static constexpr uint32_t smem_bytes() { return kTableOffset + kTableEntries * 8 + 1024; }
  static_assert(smem_bytes() <= kSmemLimit, "exceeds the 227 KB of shared memory per block");
};

/// Everything the M-grouped kernel needs (a __grid_constant__ parameter).
struct GroupedGemmParams {
  CUtensorMap tma_a;  ///< lhs (1, M, K): box {64, BLOCK_M}
  CUtensorMap tma_b;  ///< rhs (G, K, N): box {64, 64}; trans_b: (G, N, K), box {64, BLOCK_N}
  CUtensorMap tma_d;  ///< out (1, M, N): box {EPI_N, 64}
  const int32_t* group_sizes;  ///< (G,) device memory
  void* out;                   ///< out (M, N), for the masked stores
  int m, n, k;
  int trans_b;
  GroupedOrder order;  ///< the tile order (made on the host)
};

/// The shared-memory group table of a grouped kernel.
template <class Cfg>
__device__ __forceinline__ GroupTableEntry* group_table(uint8_t* smem) {
  return reinterpret_cast<GroupTableEntry*>(smem + Cfg::kTableOffset);
}

/// Epilogue of one consumer warpgroup's 64 x kWgTileN part of a tile (rows row0.., columns
/// col0.., outer TMA coordinate z): fp32 accumulators -> Out -> 128B-swizzled chunks of
/// 64 rows x 128 bytes (as the dense epilogue) -> global. rows_valid (0..64) of the rows
/// may be written: 64 -> TMA store (clipped at the tensor's edges); 1..63 -> each thread
/// copies 16-byte pieces of the valid rows and columns < n from the staged chunks; 0 ->
/// nothing (the whole warpgroup skips). out_rows: the output (row-major, n columns) for
/// the copies. The caller waits for the last TMA store's smem reads before the CTA exits.
template <class Cfg, class Out>
__device__ __forceinline__ void store_part(const float (&acc)[Cfg::kWgTileN / 2], uint8_t* my_d,
                                           const CUtensorMap* map_d, uint8_t* out_rows, int n,
                                           int row0, int col0, int z, int rows_valid, int w) {
  constexpr int kEpiN = 128 / static_cast<int>(sizeof(Out));  // output columns per chunk
  constexpr int kChunks = Cfg::kWgTileN / kEpiN;
  constexpr int kVec = 16 / static_cast<int>(sizeof(Out));    // elements per 16-byte piece
  if (rows_valid <= 0) return;  // warpgroup-uniform
  const int tid_wg = static_cast<int>(threadIdx.x % 128);
  const int lane = tid_wg % 32;
  const uint32_t r_lo = (tid_wg / 32) * 16 + lane / 4;  // fragment rows r_lo, r_lo + 8
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    uint8_t* buf = my_d + (c % Cfg::kDBufs) * Cfg::kEpiTileBytes;
    if (c % Cfg::kDBufs == 0) {
      // A new group of chunks reuses every buffer: the previous TMA stores must have read
      // them, and every thread must be done copying out of them.
      if (tid_wg == 0) ptx::tma_store_wait_group_read<0>();
      named_barrier_sync(1 + w, 128);
    }
#pragma unroll
    for (int j = 0; j < kEpiN / 8; ++j) {
      const int f = c * (kEpiN / 8) + j;  // 8-column fragment index in the WG tile
      const uint32_t byte = (j * 8 + 2 * (lane % 4)) * sizeof(Out);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        *reinterpret_cast<typename detail::Pack2<Out>::Storage*>(buf + detail::swizzle128(r_lo + 8 * h, byte)) =
            detail::Pack2<Out>::pack(acc[4 * f + 2 * h], acc[4 * f + 2 * h + 1]);
      }
    }
    if (c % Cfg::kDBufs == Cfg::kDBufs - 1 || c == kChunks - 1) {
      const int c_first = c - c % Cfg::kDBufs;
      if (rows_valid == 64) {
        ptx::fence_proxy_async_shared_cta();  // st.shared -> visible to the TMA store
        named_barrier_sync(1 + w, 128);
        if (tid_wg == 0) {
          for (int cc = c_first; cc <= c; ++cc)
            ptx::tma_store_3d(map_d, my_d + (cc % Cfg::kDBufs) * Cfg::kEpiTileBytes,
                              col0 + cc * kEpiN, row0, z);
          ptx::tma_store_commit_group();
        }
      } else {
        named_barrier_sync(1 + w, 128);  // the chunks are complete
        for (int cc = c_first; cc <= c; ++cc) {
          const uint8_t* src = my_d + (cc % Cfg::kDBufs) * Cfg::kEpiTileBytes;
#pragma unroll
          for (int i = 0; i < 64 * 8 / 128; ++i) {  // 64 rows x 8 pieces, 128 threads
            const int v = tid_wg + 128 * i;
            const int row = v / 8, piece = v % 8;
            const int col = col0 + cc * kEpiN + piece * kVec;
            // n * sizeof(Out) is a multiple of 16: a piece is wholly inside or past N.
            if (row < rows_valid && col < n) {
              const uint4 val = *reinterpret_cast<const uint4*>(src + detail::swizzle128(row, piece * 16));
              *reinterpret_cast<uint4*>(out_rows + (static_cast<size_t>(row0 + row) * n + col) * sizeof(Out)) = val;
            }
          }
        }
      }
    }
  }
}

/// M-grouped producer (warp 0, one lane): per tile of a group, per K block, A rows from
/// the tile's first row and B of the tile's group, in one stage transaction. Tiles of the
/// rows in no group load nothing.
template <class Cfg, class T, class InputPipe>
__device__ __forceinline__ void m_grouped_producer(InputPipe& input, const GroupedGemmParams& p,
                                                   const GroupTableEntry* table, int count) {
  auto producer = input.producer();
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  GroupSpan cache;
  for (int t = static_cast<int>(blockIdx.x); t < count; t += static_cast<int>(gridDim.x)) {
    const GroupedTile tile = p.order.tile(table, p.group_sizes, t, cache);
    if (tile.group >= p.order.groups) continue;  // rows in no group: zeros, nothing to load
    const int n0 = tile.n_tile * Cfg::kBlockN;
    for (int kb = 0; kb < k_blocks; ++kb) {
      auto st = producer.acquire_stage();  // waits on empty[stage]
      st.expect_bytes();  // whole boxes: TMA counts the zero fill past M, K and N too
      uint64_t* bar = st.mbar()->ptr();
      const int k0 = kb * Cfg::kBlockK;
      ptx::tma_load_3d(st.a_tile(), &p.tma_a, bar, k0, tile.row0, 0);  // (BM, 64) K-major
      T* bt = st.b_tile();
      if (p.trans_b) {
        ptx::tma_load_3d(bt, &p.tma_b, bar, k0, n0, tile.group);  // (BN, 64) K-major
      } else {
#pragma unroll
        for (int j = 0; j < Cfg::kBlockN / 64; ++j)  // (BN/64, 64 K, 64 N) N-major
          ptx::tma_load_3d(bt + j * 64 * 64, &p.tma_b, bar, n0 + 64 * j, k0, tile.group);
      }
      std::move(st).release();
    }
  }
}

/// M-grouped consumer warpgroup w (0 or 1): rows w*64.. of every tile.
template <class Cfg, class T, class Out, class InputPipe>
__device__ __forceinline__ void m_grouped_consumer(InputPipe& input, uint8_t* smem_d,
                                                   const GroupedGemmParams& p,
                                                   const GroupTableEntry* table, int count, int w) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t a_off = w * 64 * 128;  // this WG's 64 rows of the K-major A tile
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  uint8_t* my_d = smem_d + w * Cfg::kDBufs * Cfg::kEpiTileBytes;
  float acc[Cfg::kWgTileN / 2];
  GroupSpan cache;
  for (int t = static_cast<int>(blockIdx.x); t < count; t += static_cast<int>(gridDim.x)) {
    const GroupedTile tile = p.order.tile(table, p.group_sizes, t, cache);
#pragma unroll
    for (int i = 0; i < Cfg::kWgTileN / 2; ++i) acc[i] = 0.f;
    // Rows in no group: no K blocks (the producer loaded none), the zeros are stored.
    const int kb = tile.group < p.order.groups ? k_blocks : 0;
    // lhs is K-major (trans_a = false); rhs as trans_b says.
    consumer_mainloop_for_layout<Cfg, T>(false, p.trans_b, input, acc, kb, a_off, 0, lane);
    const int row0 = tile.row0 + w * 64;
    const int valid = tile.row_end - row0;
    store_part<Cfg, Out>(acc, my_d, &p.tma_d, static_cast<uint8_t*>(p.out), p.n, row0,
                         tile.n_tile * Cfg::kBlockN, 0, valid < 64 ? valid : 64, w);
  }
  // The last stores must have read shared memory before the CTA exits.
  if (threadIdx.x % 128 == 0) ptx::tma_store_wait_group_read<0>();
}

/// The M-grouped kernel. T: bf16 or fp16 inputs; Out: bf16, fp16 or f32.
template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_grouped_gemm_kernel(const __grid_constant__ GroupedGemmParams p) {
#if JAX_SM100_SM90A_DEVICE
  using namespace jax_sm100::pipeline;
  using Payload = StandardTilePayload<T, T, Cfg::kBlockM * Cfg::kBlockK, Cfg::kBlockN * Cfg::kBlockK,
                                      Cfg::kStages>;
  static_assert(sizeof(Payload) == Cfg::kPayloadBytes, "payload layout");
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned (128B swizzle) by pointer arithmetic: accesses stay LDS/STS.
  uint8_t* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  auto* bars = reinterpret_cast<DeviceBarrier*>(smem + Cfg::kBarOffset);
  GroupTableEntry* table = group_table<Cfg>(smem);
  InputTilePipeline<Payload, Cfg::kStages> input(bars, reinterpret_cast<Payload*>(smem),
                                                 "sm90_grouped_gemm.input");

  const int warp = static_cast<int>(ptx::warp_idx_sync());
  if (threadIdx.x == 0) {
    // Producer: one arrive_expect_tx per stage; consumers: one lane per consumer warp.
    input.init_barriers(1, Cfg::kNumConsumerWarps);
    ptx::tma_prefetch_descriptor(&p.tma_a);
    ptx::tma_prefetch_descriptor(&p.tma_b);
    ptx::tma_prefetch_descriptor(&p.tma_d);
  }
  if (warp == 3) build_group_table_warp(p.order, p.group_sizes, table);
  __syncthreads();
  const int count = p.order.count(table);

  if (warp < 4) {
    ptx::setmaxnreg_dec<40>();
    if (warp == 0 && threadIdx.x % 32 == 0) m_grouped_producer<Cfg, T>(input, p, table, count);
  } else {
    ptx::setmaxnreg_inc<232>();
    m_grouped_consumer<Cfg, T, Out>(input, smem + Cfg::kDOffset, p, table, count, warp / 4 - 1);
  }
#endif  // JAX_SM100_SM90A_DEVICE
}

}  // namespace jax_sm100::kernels::sm90
