// Persistent, warp-specialized sm_90a GEMM with an optional fused residual epilogue:
//   D[b] = alpha * (A[b] @ B[b]) + beta * C[b]      (fp32 math, bf16/fp16 inputs)
// or, for a GemmBiasConfig, the fused bias/activation epilogue (gemm_bias_epilogue.cuh):
//   Z = alpha * (A[b] @ B[b]) + bias (per column),  D[b] = act(Z)  [, PRE[b] = Z]
// or, for a GemmDactConfig (a residual config), the activation's backward:
//   D[b] = alpha * (A[b] @ B[b]) * act'(C[b])  [, dbias += column sums of D]
//
// Roles (128 * (1 + NumWG) threads, one CTA per SM, __launch_bounds__(threads, 1)):
//   warpgroup 0 (setmaxnreg.dec 40):
//     warp 0  TMA producer: A/B tiles -> InputTilePipeline<StandardTilePayload> ring
//     warp 1  epilogue-load warp (residual kernels): C chunks -> EpiLoadPipeline
//     warps 2-3 idle (they exit at once)
//   warpgroups 1..NumWG (setmaxnreg.inc 232): WGMMA consumers, each owns a 64 x kWgTileN
//     part of the BLOCK_M x BLOCK_N tile ("cooperative"), then its own epilogue:
//     fp32 accum -> alpha, beta*C (C from smem) -> Out -> swizzled smem -> TMA store.
//     NumWG = 2 normally; 1 for the small 64x64 decode tile (more CTAs for small M).
//
// Epilogue staging: plain kernels stage D through kDBufs 64 x 128 B buffers per
// warpgroup (4 for 256-wide warpgroup tiles: one barrier pair per bf16 tile). Residual
// kernels stage D IN PLACE in the C chunk the epilogue-load warp brought in (each
// thread overwrites exactly the C elements it read), so C needs no extra buffer; a C
// stage is handed back to the load warp once the TMA store that reads it has finished
// reading shared memory (cp.async.bulk.wait_group.read). Bias kernels stage through
// the plain kernel's buffers (and a small bias slice per warpgroup): see
// gemm_bias_epilogue.cuh. Parameters and configs: gemm_config.cuh.
//
// Operand layouts (the backward pass needs all four; no transposes are materialized):
//   A: (M, K) row-major = K-major (trans_a = 0) or (K, M) = M-major (trans_a = 1);
//   B: (K, N) row-major = N-major (trans_b = 0) or (N, K) = K-major (trans_b = 1).
// Every smem tile is 128B-swizzled. K-major tiles are [rows][64 K] (one TMA box);
// MN-major tiles are [rows/64][64 K][64 MN] (one TMA box per 64 rows). wgmma reads
// either through its descriptor (LBO/SBO below) plus the imm-trans bit.
//
// Clusters (Cluster = 2): the two CTAs of a cluster take M tiles 2i and 2i+1 of one
// N tile; each loads half of the B tile and multicasts it to both, halving B's L2->SM
// traffic. A stage may then be refilled only when the consumers of BOTH CTAs are done
// with it, so every consumer warp arrives on the empty barrier of each CTA (remote
// arrive through the pipeline library's DeviceBarrier::arrive_cluster).
//
// Tile order: the persistent walk of common/tile_scheduler.cuh over cluster tiles, with
// group_m cluster rows per L2 group; the host makes the TileOrder (group_m is a launch
// argument, not a compile-time choice) and passes it in GemmParams.
//
// Partial tiles: TMA loads zero-fill outside the tensor, TMA stores clip, so any
// M, N, K >= 0 works (K == 0 gives D = beta*C, or zeros). When one M tile holds all of
// M and A is K-major (decode shapes), A's box stops at M (rounded up to 8 rows) instead:
// TMA's zero fill of the rows past M costs load time in proportion to their number. The
// tile's rows past the box keep stale shared memory; they feed only output rows >= M,
// which are never stored. GemmParams::stage_tx_bytes is the stage's transaction size.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "jax_sm100/common/named_barrier.cuh"
#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/gemm_bias_epilogue.cuh"
#include "jax_sm100/kernels/sm90/gemm_config.cuh"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::kernels::sm90 {

/// Work on a landed stage before its wgmmas: none in the dense kernels. (The K-grouped
/// kernel zeroes the rows of a group's last K block that belong to the next group.)
struct NoStageFixup {
  template <class Stage>
  __device__ __forceinline__ void operator()(const Stage&, int /*kb*/) const {}
};

/// One consumer warpgroup's main loop over K for one tile: waits for each stage, issues
/// 4 x wgmma k16, and releases a stage only once the wgmma reading it has retired
/// (wait_group 1 after the next stage's batch is committed). `fixup(stage, kb)` runs
/// after K block kb's stage landed, before the wgmmas read it.
template <class Cfg, class T, int kTransA, int kTransB, class InputPipe,
          class StageFixup = NoStageFixup>
__device__ __forceinline__ void consumer_mainloop(InputPipe& input, float (&acc)[Cfg::kWgTileN / 2],
                                                  int k_blocks, uint32_t a_off, uint32_t b_off,
                                                  int lane, const StageFixup& fixup = StageFixup{}) {
  using Mma = ptx::Wgmma<Cfg::kWgTileN, T, kTransA, kTransB>;
  // "Stage free": one arrival per consumer warp on the empty barrier of every CTA of the
  // cluster (lane l signals CTA l; the peers multicast into this stage too).
  auto release = [&](uint32_t stage) {
    if constexpr (Cfg::kCluster == 1) {
      if (lane == 0) input.pipeline.consumer_mbar(stage)->arrive();
    } else {
      // Lane-guarded explicit arrive, one per cluster CTA (CTA-scope release: see
      // ptx::mbarrier_arrive_cluster for why not .release.cluster).
      if (lane < Cfg::kCluster) input.pipeline.consumer_mbar(stage)->arrive_cluster(lane);
    }
  };
  auto consumer = input.consumer();
  uint32_t prev_stage = 0;
  for (int kb = 0; kb < k_blocks; ++kb) {
    auto st = consumer.acquire_stage();  // waits on full[stage]
    fixup(st, kb);
    const uint32_t a_base = ptx::smem_addr(st.a_tile()) + a_off;
    const uint32_t b_base = ptx::smem_addr(st.b_tile()) + b_off;
#pragma unroll
    for (int i = 0; i < Cfg::kWgTileN / 2; ++i) ptx::fence_operand(acc[i]);
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < Cfg::kBlockK / 16; ++s) {
      // K-major: the k16 slice is 32 B further along the 128 B row; SBO = 8 rows.
      // MN-major: the k16 slice is 16 K rows of 128 B further; LBO = next 64-wide MN block.
      const uint64_t da = kTransA ? ptx::make_smem_desc(a_base + s * 2048, 8192, 1024, ptx::WgmmaSwizzle::k128B)
                                  : ptx::make_smem_desc(a_base + s * 32, 16, 1024, ptx::WgmmaSwizzle::k128B);
      const uint64_t db = kTransB ? ptx::make_smem_desc(b_base + s * 2048, 8192, 1024, ptx::WgmmaSwizzle::k128B)
                                  : ptx::make_smem_desc(b_base + s * 32, 16, 1024, ptx::WgmmaSwizzle::k128B);
      Mma::mma(acc, da, db, 1);
    }
    ptx::wgmma_commit();
#pragma unroll
    for (int i = 0; i < Cfg::kWgTileN / 2; ++i) ptx::fence_operand(acc[i]);
    ptx::wgmma_wait<1>();  // the previous stage's wgmma batch has retired
    if (kb > 0) release(prev_stage);
    prev_stage = st.index();
    std::move(st).release_without_signal();  // signalled (deferred) above / below
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < Cfg::kWgTileN / 2; ++i) ptx::fence_operand(acc[i]);
  if (k_blocks > 0) release(prev_stage);
}

/// consumer_mainloop for the operands' runtime layout: wgmma's transpose flags are
/// immediates, so one instantiation per layout. wgmma imm-trans: A M-major = trans_a;
/// B N-major = !trans_b. A constant trans_a / trans_b folds to one instantiation.
template <class Cfg, class T, class InputPipe>
__device__ __forceinline__ void consumer_mainloop_for_layout(bool trans_a, bool trans_b,
                                                             InputPipe& input,
                                                             float (&acc)[Cfg::kWgTileN / 2],
                                                             int k_blocks, uint32_t a_off,
                                                             uint32_t b_off, int lane) {
  if (trans_a) {
    if (trans_b) consumer_mainloop<Cfg, T, 1, 0>(input, acc, k_blocks, a_off, b_off, lane);
    else         consumer_mainloop<Cfg, T, 1, 1>(input, acc, k_blocks, a_off, b_off, lane);
  } else {
    if (trans_b) consumer_mainloop<Cfg, T, 0, 0>(input, acc, k_blocks, a_off, b_off, lane);
    else         consumer_mainloop<Cfg, T, 0, 1>(input, acc, k_blocks, a_off, b_off, lane);
  }
}

/// Issues the TMA loads of one K block (k0) of the (m0, n0) tile into a stage: A whole;
/// of B this CTA's 1/kCluster share, multicast to the cluster when kCluster > 1.
template <class Cfg, class T>
__device__ __forceinline__ void load_ab_block(const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                              uint64_t* bar, T* a, T* bt, int k0, int m0, int n0,
                                              int za, int zb, int trans_a, int trans_b, int rank) {
  if (!trans_a) {
    ptx::tma_load_3d(a, tma_a, bar, k0, m0, za);  // (BM, 64) K-major
  } else {
#pragma unroll
    for (int i = 0; i < Cfg::kBlockM / 64; ++i)  // (BM/64, 64 K, 64 M)
      ptx::tma_load_3d(a + i * 64 * 64, tma_a, bar, m0 + 64 * i, k0, za);
  }
  constexpr int kRows = Cfg::kBlockN / Cfg::kCluster;  // B rows (N) per CTA
  const uint16_t mask = static_cast<uint16_t>((1u << Cfg::kCluster) - 1);
  if (trans_b) {  // (BN, 64) K-major: boxes of kRows rows
    T* dst = bt + rank * kRows * 64;
    if constexpr (Cfg::kCluster == 1) ptx::tma_load_3d(dst, tma_b, bar, k0, n0, zb);
    else ptx::tma_load_3d_multicast(dst, tma_b, bar, mask, k0, n0 + rank * kRows, zb);
  } else {  // (BN/64, 64 K, 64 N) N-major: boxes of 64 columns
#pragma unroll
    for (int j = rank * (kRows / 64); j < (rank + 1) * (kRows / 64); ++j) {
      if constexpr (Cfg::kCluster == 1)
        ptx::tma_load_3d(bt + j * 64 * 64, tma_b, bar, n0 + 64 * j, k0, zb);
      else
        ptx::tma_load_3d_multicast(bt + j * 64 * 64, tma_b, bar, mask, n0 + 64 * j, k0, zb);
    }
  }
}

/// The kernel. T: bf16 or fp16 inputs; Out: bf16, fp16 or f32 output (C has Out's type).
template <class Cfg, class T, class Out>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_gemm_kernel(const __grid_constant__ GemmParams p) {
#if JAX_SM100_SM90A_DEVICE
  using namespace jax_sm100::pipeline;
  using Payload = StandardTilePayload<T, T, Cfg::kBlockM * Cfg::kBlockK, Cfg::kBlockN * Cfg::kBlockK,
                                      Cfg::kStages>;
  static_assert(sizeof(Payload) == Cfg::kPayloadBytes, "payload layout");
  constexpr int kCStagesOr1 = Cfg::kCStages > 0 ? Cfg::kCStages : 1;
  constexpr int kEpiN = 128 / static_cast<int>(sizeof(Out));  // output columns per chunk
  constexpr int kChunks = Cfg::kWgTileN / kEpiN;

  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned (128B swizzle) by pointer arithmetic on smem_raw, not through an
  // integer: that keeps later accesses shared-space ones (LDS/STS, not generic LD/ST).
  uint8_t* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  auto* payload = reinterpret_cast<Payload*>(smem);
  uint8_t* smem_d = smem + Cfg::kDOffset;  // plain: (NumWG, kDBufs, 64 rows, 128 B)
  uint8_t* smem_c = smem + Cfg::kCOffset;  // residual: (CStages, NumWG, 64 rows, 128 B)
  auto* bars = reinterpret_cast<DeviceBarrier*>(smem + Cfg::kBarOffset);

  InputTilePipeline<Payload, Cfg::kStages> input(bars, payload, "sm90_gemm.input");
  EpiLoadPipeline<kCStagesOr1> epi(bars + 2 * Cfg::kStages, "sm90_gemm.epi_load");

  const int warp = static_cast<int>(ptx::warp_idx_sync());
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (threadIdx.x == 0) {
    // Producer: one arrive_expect_tx per stage. Consumers: one lane of each consumer warp
    // of every CTA in the cluster.
    input.init_barriers(1, Cfg::kNumConsumerWarps * Cfg::kCluster);
    // C chunks: one TMA transaction per stage; freed by each WG's storing thread once
    // its TMA store (which reads D from the same buffer) has read shared memory.
    epi.init_barriers(1, Cfg::kNumWG);
    ptx::tma_prefetch_descriptor(&p.tma_a);
    ptx::tma_prefetch_descriptor(&p.tma_b);
    ptx::tma_prefetch_descriptor(&p.tma_d);
    if (Cfg::kResidual) ptx::tma_prefetch_descriptor(&p.tma_c);
    if constexpr (Cfg::kBiasAct) {
      if (p.has_pre) ptx::tma_prefetch_descriptor(&p.tma_pre);
    }
  }
  __syncthreads();
  // The peer's barriers must be initialised before our multicasts / remote arrivals.
  if constexpr (Cfg::kCluster > 1) ptx::cluster_sync();
  const int rank = Cfg::kCluster > 1 ? static_cast<int>(ptx::block_rank_in_cluster()) : 0;

  // Cluster tiles (kCluster M tiles of one N tile) in the host-made order; this cluster
  // takes tiles first, first + stride, ...
  const TileScheduler sched = TileScheduler::make(
      p.order, Cfg::kCluster, 1, rank, static_cast<int>(blockIdx.x) / Cfg::kCluster,
      static_cast<int>(gridDim.x) / Cfg::kCluster);
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;

  if (warp < 4) {
    // ---------------- producer warpgroup ----------------
    ptx::setmaxnreg_dec<40>();
    if (warp == 0 && lane == 0) {
      auto producer = input.producer();
      for (int t = sched.first; t < sched.count(); t += sched.stride) {
        int b, mt, nt;
        sched.tile(t, b, mt, nt);
        const int m0 = mt * Cfg::kBlockM, n0 = nt * Cfg::kBlockN;
        const int za = p.a_batched ? b : 0, zb = p.b_batched ? b : 0;
        for (int kb = 0; kb < k_blocks; ++kb) {
          auto st = producer.acquire_stage();  // waits on empty[stage]
          st.expect_bytes(p.stage_tx_bytes);
          load_ab_block<Cfg, T>(&p.tma_a, &p.tma_b, st.mbar()->ptr(), st.a_tile(), st.b_tile(),
                                kb * Cfg::kBlockK, m0, n0, za, zb, p.trans_a, p.trans_b, rank);
          std::move(st).release();
        }
      }
      // With a cluster, the peers' consumers arrive on this CTA's empty barriers: wait
      // until all of them released every stage, so that no arrival lands after this CTA
      // exits. (Every multicast into this CTA has landed: its consumers waited for every
      // full barrier.) This replaces a cluster barrier at the kernel's end.
      if constexpr (Cfg::kCluster > 1) producer.drain();
    } else if (Cfg::kResidual && warp == 1 && lane == 0) {
      // Epilogue-load warp: C in the same (tile, chunk) order the consumers walk.
      for (int t = sched.first; t < sched.count(); t += sched.stride) {
        int b, mt, nt;
        sched.tile(t, b, mt, nt);
        const int zc = p.c_batched ? b : 0;
        for (int c = 0; c < kChunks; ++c) {
          auto stage = epi.produce();  // waits until every WG freed the stage
          stage.mbar()->arrive_expect_tx(Cfg::kNumWG * Cfg::kEpiTileBytes);
          uint8_t* dst = smem_c + stage.index() * Cfg::kNumWG * Cfg::kEpiTileBytes;
#pragma unroll
          for (int w = 0; w < Cfg::kNumWG; ++w) {
            const int wm = Cfg::kWgM == 2 ? w : 0, wn = Cfg::kWgM == 2 ? 0 : w;
            ptx::tma_load_3d(dst + w * Cfg::kEpiTileBytes, &p.tma_c, stage.mbar()->ptr(),
                             nt * Cfg::kBlockN + wn * Cfg::kWgTileN + c * kEpiN,
                             mt * Cfg::kBlockM + wm * 64, zc);
          }
        }  // guard exit: producer_step
      }
    }
  } else {
    // ---------------- consumer warpgroups ----------------
    ptx::setmaxnreg_inc<232>();
    const int w = warp / 4 - 1;  // 0 .. NumWG-1
    const int wm = Cfg::kWgM == 2 ? w : 0, wn = Cfg::kWgM == 2 ? 0 : w;
    const int tid_wg = threadIdx.x % 128;
    const int warp_wg = tid_wg / 32;
    // Byte offsets of this WG's part inside a stage's A / B tile (same for both majors:
    // 64 rows of a K-major tile and one 64-wide block of an MN-major tile are 8 KB).
    const uint32_t a_off = wm * 64 * 128;
    const uint32_t b_off = wn * Cfg::kWgTileN * 128;
    float acc[Cfg::kWgTileN / 2];
    uint8_t* my_d = smem_d + w * Cfg::kDBufs * Cfg::kEpiTileBytes;
    int held_c_stage = -1;  // residual, storing thread: C stage whose store may still read
    float* col_sums = nullptr;  // dact: this warpgroup's (4, kWgTileN) column sums
    if constexpr (Cfg::kDact) col_sums = reinterpret_cast<float*>(smem + Cfg::kSumOffset) + w * 4 * Cfg::kWgTileN;

    for (int t = sched.first; t < sched.count(); t += sched.stride) {
      int b, mt, nt;
      sched.tile(t, b, mt, nt);
#pragma unroll
      for (int i = 0; i < Cfg::kWgTileN / 2; ++i) acc[i] = 0.f;
      BiasSlice<Cfg> bias;  // bias kernels: loaded now, used after the main loop
      if constexpr (Cfg::kBiasAct) bias.load(p, nt * Cfg::kBlockN + wn * Cfg::kWgTileN, tid_wg);

      consumer_mainloop_for_layout<Cfg, T>(p.trans_a, p.trans_b, input, acc, k_blocks, a_off,
                                           b_off, lane);
      // The consumer's pipeline state lives in `input`, advanced by k_blocks above.

      // ---- epilogue: 64 x kWgTileN accumulators in chunks of 64 x kEpiN ----
      const int row0 = mt * Cfg::kBlockM + wm * 64;
      const int col0 = nt * Cfg::kBlockN + wn * Cfg::kWgTileN;
      const int zd = b;
      const uint32_t r_lo = warp_wg * 16 + lane / 4;  // fragment rows r_lo, r_lo + 8
      if constexpr (Cfg::kBiasAct) {  // z = alpha*acc + bias, d = act(z) [, pre = z]
        float* slice = reinterpret_cast<float*>(smem + Cfg::kBiasOffset) + w * Cfg::kWgTileN;
        bias_act_epilogue<Cfg, Out>(p, acc, bias, slice, my_d, w, tid_wg, lane, row0, col0, zd);
        continue;
      }
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        uint8_t* buf;
        if constexpr (Cfg::kResidual) {
          epi.wait_producer();  // C chunk landed; D goes to the same bytes
          buf = smem_c + (epi.consumer_stage() * Cfg::kNumWG + w) * Cfg::kEpiTileBytes;
        } else {
          buf = my_d + (c % Cfg::kDBufs) * Cfg::kEpiTileBytes;
          if (c % Cfg::kDBufs == 0) {
            // A new group reuses every buffer: the previous group's stores (issued one
            // main loop ago, except for f32 tiles wider than one group) must have read them.
            if (tid_wg == 0) ptx::tma_store_wait_group_read<0>();
            named_barrier_sync(1 + w, 128);
          }
        }
        float col_sum[kEpiN / 4];  // dact: this thread's column sums of the chunk
#pragma unroll
        for (int j = 0; j < kEpiN / 4; ++j) col_sum[j] = 0.f;
#pragma unroll
        for (int j = 0; j < kEpiN / 8; ++j) {
          const int f = c * (kEpiN / 8) + j;  // 8-column fragment index in the WG tile
          const uint32_t byte = (j * 8 + 2 * (lane % 4)) * sizeof(Out);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t off = detail::swizzle128(r_lo + 8 * h, byte);
            // The dact target has no alpha (its handler passes 1): acc * act'(c) as is.
            float x = Cfg::kDact ? acc[4 * f + 2 * h] : p.alpha * acc[4 * f + 2 * h];
            float y = Cfg::kDact ? acc[4 * f + 2 * h + 1] : p.alpha * acc[4 * f + 2 * h + 1];
            if constexpr (Cfg::kResidual) {
              const float2 cv = detail::Pack2<Out>::unpack(
                  *reinterpret_cast<const typename detail::Pack2<Out>::Storage*>(buf + off));
              if constexpr (Cfg::kDact) {
                x *= activation_grad<Cfg::kActivation>(cv.x);
                y *= activation_grad<Cfg::kActivation>(cv.y);
                // Rows past M may hold stale accumulators (A's box stopping at M).
                if (row0 + static_cast<int>(r_lo) + 8 * h < p.m) {
                  col_sum[2 * j] += x;
                  col_sum[2 * j + 1] += y;
                }
              } else {
                x = fmaf(p.beta, cv.x, x);
                y = fmaf(p.beta, cv.y, y);
              }
            }
            *reinterpret_cast<typename detail::Pack2<Out>::Storage*>(buf + off) =
                detail::Pack2<Out>::pack(x, y);
          }
        }
        if constexpr (Cfg::kDact) {
          if (p.dbias != nullptr) reduce_column_sums(col_sum, lane);
        }
        if constexpr (!Cfg::kResidual) {
          // Plain: store a group once all of its chunks are in shared memory.
          if (c % Cfg::kDBufs == Cfg::kDBufs - 1 || c == kChunks - 1) {
            ptx::fence_proxy_async_shared_cta();  // st.shared -> visible to the TMA store
            named_barrier_sync(1 + w, 128);
            if (tid_wg == 0) {
              for (int cc = c - c % Cfg::kDBufs; cc <= c; ++cc)
                ptx::tma_store_3d(&p.tma_d, my_d + (cc % Cfg::kDBufs) * Cfg::kEpiTileBytes,
                                  col0 + cc * kEpiN, row0, zd);
              ptx::tma_store_commit_group();
            }
          }
          continue;
        }
        ptx::fence_proxy_async_shared_cta();  // st.shared -> visible to the TMA store
        named_barrier_sync(1 + w, 128);
        if constexpr (Cfg::kDact) {
          // After the barrier: every thread has finished the previous tile's flush.
          if (p.dbias != nullptr) stage_column_sums(col_sums + warp_wg * Cfg::kWgTileN, col_sum, c * kEpiN, lane);
        }
        if (tid_wg == 0) {
          ptx::tma_store_3d(&p.tma_d, buf, col0 + c * kEpiN, row0, zd);
          ptx::tma_store_commit_group();
          if constexpr (Cfg::kResidual) {
            // Hand the previous chunk's C stage back once its store has read it; this
            // chunk's stage stays held until the next chunk (or the end of the tile).
            ptx::tma_store_wait_group_read<1>();
            if (held_c_stage >= 0) epi.pipeline.consumer_mbar(held_c_stage)->arrive();
            held_c_stage = static_cast<int>(epi.consumer_stage());
          }
        }
        if constexpr (Cfg::kResidual) epi.consumer_step();
      }
      if constexpr (Cfg::kDact) {
        if (p.dbias != nullptr) {
          named_barrier_sync(1 + w, 128);  // every warp's sums of the tile are staged
          flush_column_sums<Cfg::kWgTileN>(col_sums, p.dbias, col0, p.n, tid_wg);
        }
      }
      if constexpr (Cfg::kResidual) {
        // Free the tile's last C stage so the load warp can run ahead into the next tile.
        if (tid_wg == 0) {
          ptx::tma_store_wait_group_read<0>();
          epi.pipeline.consumer_mbar(held_c_stage)->arrive();
          held_c_stage = -1;
        }
      }
    }
    // The last stores must have read shared memory before the CTA exits; their global
    // writes complete with the kernel.
    if (tid_wg == 0) ptx::tma_store_wait_group_read<0>();
  }
#endif  // JAX_SM100_SM90A_DEVICE
}

}  // namespace jax_sm100::kernels::sm90
