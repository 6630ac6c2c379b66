// sm_90a blockwise-scaled FP8 GEMM, part 4 of 5: the math warpgroups' main loops.
//   math_loop_chained  128-row tiles: overlapped promotion, two accumulators, K blocks
//                      (and tiles) in flight across each promotion and epilogue;
//   math_loop_waves    192- and 256-row tiles: one accumulator per wave, the next tile's
//                      first wave in flight across the epilogue; a 256-row tile whose
//                      waves are all live runs its K loop unrolled over the ring.
// Every loop frees the stages of tiles the WG holds no rows of (skip_dead_tile).
#pragma once

#include <cuda.h>
#include <stdint.h>

#include <utility>

#include "jax_sm100/common/tile_scheduler.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_config.cuh"
#include "jax_sm100/kernels/sm90/fp8_gemm_math.cuh"
#include "jax_sm100/ptx/common/tma.cuh"
#include "jax_sm100/ptx/sm90/wgmma.cuh"

namespace jax_sm100::kernels::sm90_fp8 {


/// A tile the WG holds no rows of (job.waves_live == 0): free each of its stages (the
/// other WG and the cluster peers still use them) without MMAs, and consume the
/// residual's C stage (the loader streams C for every tile). False, doing nothing, for a
/// live tile. (Job: TileJob, or the grouped kernel's job, kernels/sm90/grouped_fp8_gemm.cuh.)
template <class Cfg, class Ring, class Job>
__device__ __forceinline__ bool skip_dead_tile(const Job& job, Ring& ring, typename Cfg::EpiPipe& epi,
                                               int lane, int num_kb) {
  if (job.waves_live != 0) return false;
  for (int kb = 0; kb < num_kb; ++kb) {
    ring.wait_producer();
    release_input_barrier<Cfg>(ring.consumer_mbar(ring.consumer_stage()), lane);
    ring.consumer_step();
  }
  if constexpr (Cfg::kResidual) {
    auto c_stage = epi.acquire_consumer();
    std::move(c_stage).release();
  }
  return true;
}

/// Begin tiles from t on (advancing t by the order's stride), skipping those this WG holds
/// no rows of (skip_dead_tile), until one it does: that one goes to `job`. False when the
/// order has no tile left. (Math, Order, Params, Job: MathWG<Cfg>, TileScheduler,
/// Fp8GemmParams, TileJob, or the grouped kernel's.)
template <class Cfg, class Ring, class Math, class Order, class Params, class Job>
__device__ __forceinline__ bool next_live_tile(Math& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                               const Order& order, const Params& p,
                                               int& t, Job& job) {
  for (; t < order.count(); t += order.stride) {
    job = m.begin_tile(order, p, t);
    if (!skip_dead_tile<Cfg>(job, ring, epi, m.lane, p.num_kb)) return true;
  }
  return false;
}

template <class Cfg, int W>
__device__ __forceinline__ void zero(float (&acc)[W][Cfg::kAcc]) {
#pragma unroll
  for (int w = 0; w < W; ++w)
#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[w][i] = 0.0f;
}

/// Wait for the wave in flight in `acc` (wave `wave` of stage s, scales sc), free the
/// stage when it was the stage's last live wave (its smem is no longer read: the scales
/// are in registers), promote it into that wave's final accumulator.
template <class Cfg, class Ring, class Job>
__device__ __forceinline__ void finish_wave(Ring& ring, float (&final_w)[Cfg::kAcc], float (&acc)[Cfg::kAcc],
                                            const KScales& sc, uint32_t s, int wave, const Job& job,
                                            int lane) {
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  if (wave == job.waves_live - 1) {
    release_input_barrier<Cfg>(ring.consumer_mbar(s), lane);
    ring.consumer_step();
  }
  promote<Cfg>(final_w, acc, sc);
}

/// finish_wave for a tile whose every wave is live (the common case): the stage is freed
/// right after the last wave's wgmma_wait, before its FFMAs, with no branch (the wave is
/// a compile-time index), and the next stage's full barrier is polled there too, so the
/// next K block starts without a wait when its data has landed. (With the release under
/// a run-time condition, the compiler sank it past 62 of the 64 FFMAs, and the producer,
/// 3 stages ahead, refilled that much later: ncu showed the math WGs 2.7x as long on the
/// full barrier as DeepGEMM's kernel of the same design. Fixing it: +7% at the largest
/// shapes, H200.)
/// `s` is the ring's stage and `s_next` the one after it (constants in an unrolled loop).
template <class Cfg, int kWave, class Ring, class Job>
__device__ __forceinline__ void finish_full_wave(Ring& ring, float (&final_w)[Cfg::kAcc],
                                                 float (&acc)[Cfg::kAcc], const KScales& sc, uint32_t s,
                                                 uint32_t s_next, const Job& job, int lane,
                                                 bool& next_ready) {
  ptx::wgmma_wait<0>();
  if constexpr (kWave == Cfg::kWaves - 1) {
    release_input_barrier<Cfg>(ring.consumer_mbar(s), lane);
    ring.consumer_step();
    next_ready = ring.try_wait_producer_at(s_next);
  }
#pragma unroll
  for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(acc[i]);
  promote<Cfg>(final_w, acc, sc);
}

/// The ring stage after `s`.
template <class Cfg>
__device__ __forceinline__ uint32_t next_stage(uint32_t s) {
  return s + 1 == static_cast<uint32_t>(Cfg::STAGES) ? 0u : s + 1;
}

/// One K block (kb >= 1) of a tile whose every wave is live, in stage `s` (the ring's):
/// wait for its data (unless the last release's poll saw it), then each wave's wgmmas,
/// wait, promote.
template <class Cfg, bool kConstStage, class Ring, class Job>
__device__ __forceinline__ void full_waves_k_block(Ring& ring, const TileDescs<Cfg>& descs_in,
                                                   float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                   float (&acc)[Cfg::kAcc], const Job& job, int lane,
                                                   int kb, uint32_t s, bool& next_ready) {
  // With a constant stage (kConstStage) the descriptor bases are made opaque here: the
  // compiler otherwise hoists every stage's 64-bit descriptors out of the loop and
  // spills them.
  TileDescs<Cfg> descs = descs_in;
  if constexpr (kConstStage) asm volatile("" : "+r"(descs.a_lo0), "+r"(descs.b_lo0));
  if (!next_ready) ring.wait_producer_at(s);  // A, B, A-scales of K block kb have landed
  const KScales sc_0 = read_scales<Cfg>(descs, s, 0, job.sfb, kb);
  issue_k_block<Cfg>(acc, descs.a_lo(s, 0), descs.b_lo(s));
  finish_full_wave<Cfg, 0>(ring, final_acc[0], acc, sc_0, s, next_stage<Cfg>(s), job, lane, next_ready);
  if constexpr (Cfg::kWaves == 2) {
    const KScales sc_1 = read_scales<Cfg>(descs, s, 1, job.sfb, kb);
    issue_k_block<Cfg>(acc, descs.a_lo(s, 1), descs.b_lo(s));
    finish_full_wave<Cfg, 1>(ring, final_acc[1], acc, sc_1, s, next_stage<Cfg>(s), job, lane, next_ready);
  }
}

/// K blocks 1 .. num_kb-1 of a full tile with compile-time stage indices: K block 1 sits
/// in stage S1 (the ring's stage, dispatched on once per tile: full_waves_rest_from), so
/// every stage address, descriptor word and barrier of the loop is a constant offset and
/// the ring's index steps fold away. The loop runs whole laps of the ring (STAGES K
/// blocks each), then up to STAGES - 1 K blocks, each under its own check. (Free
/// functions: a struct of references here was kept in local memory.)
template <class Cfg, int S, int N, class Ring, class Job>
__device__ __forceinline__ void full_waves_lap(Ring& ring, const TileDescs<Cfg>& descs,
                                               float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                               float (&acc)[Cfg::kAcc], const Job& job, int lane,
                                               int kb, bool& next_ready) {
  if constexpr (N > 0) {  // N K blocks from kb, the first in stage S
    full_waves_k_block<Cfg, true>(ring, descs, final_acc, acc, job, lane, kb, S, next_ready);
    full_waves_lap<Cfg, (S + 1) % Cfg::STAGES, N - 1>(ring, descs, final_acc, acc, job, lane, kb + 1,
                                                      next_ready);
  }
}
template <class Cfg, int S, int N, class Ring, class Job>
__device__ __forceinline__ void full_waves_tail(Ring& ring, const TileDescs<Cfg>& descs,
                                                float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                float (&acc)[Cfg::kAcc], const Job& job, int lane,
                                                int kb, int num_kb, bool& next_ready) {
  if constexpr (N > 0) {  // K blocks kb .. num_kb-1 (at most N), the first in stage S
    if (kb < num_kb) {
      full_waves_k_block<Cfg, true>(ring, descs, final_acc, acc, job, lane, kb, S, next_ready);
      full_waves_tail<Cfg, (S + 1) % Cfg::STAGES, N - 1>(ring, descs, final_acc, acc, job, lane, kb + 1,
                                                         num_kb, next_ready);
    }
  }
}
template <class Cfg, int S1 = 0, class Ring, class Job>
__device__ __forceinline__ void full_waves_rest_from(Ring& ring, const TileDescs<Cfg>& descs,
                                                     float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                     float (&acc)[Cfg::kAcc], const Job& job,
                                                     int lane, int num_kb, uint32_t s1, bool& next_ready) {
  if constexpr (S1 < Cfg::STAGES) {
    if (s1 == S1) {
      int kb = 1;
      for (; kb + Cfg::STAGES <= num_kb; kb += Cfg::STAGES)
        full_waves_lap<Cfg, S1, Cfg::STAGES>(ring, descs, final_acc, acc, job, lane, kb, next_ready);
      full_waves_tail<Cfg, S1, Cfg::STAGES - 1>(ring, descs, final_acc, acc, job, lane, kb, num_kb,
                                                next_ready);
    } else {
      full_waves_rest_from<Cfg, S1 + 1>(ring, descs, final_acc, acc, job, lane, num_kb, s1, next_ready);
    }
  }
}

/// mainloop_waves for a tile whose every wave is live: no run-time branch between a
/// wave's wait, the stage release and the next wave's issue.
template <class Cfg, class Ring, class Job>
__device__ __forceinline__ void mainloop_full_waves(Ring& ring, const TileDescs<Cfg>& descs,
                                                    float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                                    float (&acc)[Cfg::kAcc], const Job& job, int lane,
                                                    int num_kb, uint32_t s0, const KScales& sc0) {
  bool next_ready = false;
  const uint32_t s1 = next_stage<Cfg>(s0);
  finish_full_wave<Cfg, 0>(ring, final_acc[0], acc, sc0, s0, s1, job, lane, next_ready);
  if constexpr (Cfg::kWaves == 2) {
    const KScales sc = read_scales<Cfg>(descs, s0, 1, job.sfb, 0);
    issue_k_block<Cfg>(acc, descs.a_lo(s0, 1), descs.b_lo(s0));
    finish_full_wave<Cfg, 1>(ring, final_acc[1], acc, sc, s0, s1, job, lane, next_ready);
  }
  // Unrolled (one loop per starting stage) where it was measured: 256-row tiles, 3
  // stages. The one-wave 192-row tiles keep the plain loop.
  if constexpr (Cfg::kWaves == 2 && Cfg::STAGES <= 4) {
    full_waves_rest_from<Cfg>(ring, descs, final_acc, acc, job, lane, num_kb, s1, next_ready);
  } else {
    for (int kb = 1; kb < num_kb; ++kb)
      full_waves_k_block<Cfg, false>(ring, descs, final_acc, acc, job, lane, kb,
                                     __shfl_sync(0xffffffffu, ring.consumer_stage(), 0), next_ready);
  }
}

/// The first wave of a tile: wait for K block 0's stage, issue its wave 0 into `acc`
/// (not waited for); its stage and scales go to `s0` / `sc0` for the tile's main loop.
template <class Cfg, class Ring, class Job>
__device__ __forceinline__ void issue_first_wave(Ring& ring, const TileDescs<Cfg>& descs,
                                                 float (&acc)[Cfg::kAcc], const Job& job,
                                                 uint32_t& s0, KScales& sc0) {
  ring.wait_producer();
  s0 = __shfl_sync(0xffffffffu, ring.consumer_stage(), 0);
  sc0 = read_scales<Cfg>(descs, s0, 0, job.sfb, 0);
  issue_k_block<Cfg>(acc, descs.a_lo(s0, 0), descs.b_lo(s0));
}

/// Main loop of one tile with one accumulator: per K block and live wave, 4 wgmmas, wait,
/// promote into that wave's final accumulator. K block 0's wave 0 is already in flight
/// (issue_first_wave, stage s0, scales sc0): a chain issues it before the previous
/// tile's epilogue. Every wgmma is waited for on the path that issued it: a conditional
/// issue ahead of a shared wait makes ptxas serialize all of them (C7518), and a form
/// with one wait site for every issue measured 7-9% slower (H200).
template <class Cfg, class Ring, class Job>
__device__ __forceinline__ void mainloop_waves(Ring& ring, const TileDescs<Cfg>& descs,
                                               float (&final_acc)[Cfg::kWaves][Cfg::kAcc],
                                               float (&acc)[Cfg::kAcc], const Job& job, int lane,
                                               int num_kb, uint32_t s0, const KScales& sc0) {
  finish_wave<Cfg>(ring, final_acc[0], acc, sc0, s0, 0, job, lane);
#pragma unroll
  for (int wave = 1; wave < Cfg::kWaves; ++wave) {
    if (wave < job.waves_live) {
      const KScales sc = read_scales<Cfg>(descs, s0, wave, job.sfb, 0);
      issue_k_block<Cfg>(acc, descs.a_lo(s0, wave), descs.b_lo(s0));
      finish_wave<Cfg>(ring, final_acc[wave], acc, sc, s0, wave, job, lane);
    }
  }
  for (int kb = 1; kb < num_kb; ++kb) {
    ring.wait_producer();  // A, B, A-scales of K block kb have landed
    const uint32_t s = ring.consumer_stage();
#pragma unroll
    for (int wave = 0; wave < Cfg::kWaves; ++wave) {
      if (wave < job.waves_live) {
        const KScales sc = read_scales<Cfg>(descs, s, wave, job.sfb, kb);
        issue_k_block<Cfg>(acc, descs.a_lo(s, wave), descs.b_lo(s));
        finish_wave<Cfg>(ring, final_acc[wave], acc, sc, s, wave, job, lane);
      }
    }
  }
}

/// Math WG with one accumulator (BLOCK_M 192 and 256), tile by tile, tiles chained: at a
/// tile's end the next tile's first wave is issued before this tile's epilogue, so the tensor cores work while it stores (the
/// registers allow it: the epilogue reads the finals, the wave runs in the accumulator).
/// A tile the WG holds no rows of breaks the chain (skip_dead_tile).
/// Drives the ring through its stage-index API (a stage is held across the epilogue).
/// Math, Params, Order (and the Job begin_tile returns): as for math_loop_chained.
template <class Cfg, class Ring, class Math, class Params, class Order>
__device__ __forceinline__ void math_loop_waves(Math& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                                const TileDescs<Cfg>& descs, const CUtensorMap* map_d,
                                                const Params& p, const Order& order) {
  using Job = decltype(m.begin_tile(order, p, 0));
  float final_acc[Cfg::kWaves][Cfg::kAcc], acc[Cfg::kAcc];

  int t = order.first;
  Job job;
  while (next_live_tile<Cfg>(m, ring, epi, order, p, t, job)) {
    uint32_t s0;  // a chain of live tiles
    KScales sc0;
    issue_first_wave<Cfg>(ring, descs, acc, job, s0, sc0);
    while (true) {
      zero<Cfg>(final_acc);
      if (job.waves_live == Cfg::kWaves)
        mainloop_full_waves<Cfg>(ring, descs, final_acc, acc, job, m.lane, p.num_kb, s0, sc0);
      else
        mainloop_waves<Cfg>(ring, descs, final_acc, acc, job, m.lane, p.num_kb, s0, sc0);
      const Job done = job;
      t = job.t + order.stride;
      if (t >= order.count() || m.waves_live(order, p, t) == 0) {
        store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
        break;
      }
      job = m.begin_tile(order, p, t);
      issue_first_wave<Cfg>(ring, descs, acc, job, s0, sc0);  // runs during the epilogue
      store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
    }
  }
}

/// Math WG with overlapped promotion (one wave): K block kb+1's wgmmas are issued into
/// the other accumulator before K block kb's is promoted (wgmma.wait_group 1), so the
/// tensor cores stay busy during the FFMAs. The overlap runs across tiles: the next
/// tile's first K block is issued before this tile's last one is promoted and stored,
/// so the epilogue runs while the tensor cores work too. A tile the WG holds no rows of
/// breaks the chain: its stages are freed without MMAs. Holding two stages at once, the
/// loop drives the ring through the pipeline's stage-index API (wait_producer /
/// consumer_stage / consumer_mbar / consumer_step).
/// Math, Params, Order: MathWG<Cfg>, Fp8GemmParams, TileScheduler for the dense kernel;
/// the grouped kernel's (kernels/sm90/grouped_fp8_gemm.cuh) supply the same members
/// (begin_tile, waves_live, first / stride / count(), num_kb) and their own store_tile.
template <class Cfg, class Ring, class Math, class Params, class Order>
__device__ __forceinline__ void math_loop_chained(Math& m, Ring& ring, typename Cfg::EpiPipe& epi,
                                                  const TileDescs<Cfg>& descs, const CUtensorMap* map_d,
                                                  const Params& p, const Order& order) {
  static_assert(Cfg::kWaves == 1, "overlapped promotion: one wave");
  using Job = decltype(m.begin_tile(order, p, 0));
  float final_acc[1][Cfg::kAcc], acc0[Cfg::kAcc], acc1[Cfg::kAcc];

  int t = order.first;
  Job job;
  while (next_live_tile<Cfg>(m, ring, epi, order, p, t, job)) {
    // A chain of live tiles. `prev`: the K block in flight (stage s_prev, its scales
    // sc_prev); kb: the next K block of `job` to issue.
    zero<Cfg>(final_acc);
    ring.wait_producer();
    uint32_t s_prev = ring.consumer_stage();
    KScales sc_prev = read_scales<Cfg>(descs, s_prev, 0, job.sfb, 0);
    issue_k_block<Cfg>(acc0, descs.a_lo(s_prev, 0), descs.b_lo(s_prev));
    ring.consumer_step();
    int kb = 1;

    // Issue the next K block (of this tile, or the first of the next) into `next`, then
    // retire `prev`; when `prev` ended a tile, store that tile. False, issuing nothing,
    // when `prev` ended the chain.
    auto step = [&](float (&next)[Cfg::kAcc], float (&prev)[Cfg::kAcc]) -> bool {
      const bool tile_end = kb == p.num_kb;
      const Job done = job;
      if (tile_end) {
        const int t_next = job.t + order.stride;
        if (t_next >= order.count() || m.waves_live(order, p, t_next) == 0)
          return false;
        job = m.begin_tile(order, p, t_next);
        kb = 0;
      }
      ring.wait_producer();
      const uint32_t s = ring.consumer_stage();
      const KScales sc = read_scales<Cfg>(descs, s, 0, job.sfb, kb);
      issue_k_block<Cfg>(next, descs.a_lo(s, 0), descs.b_lo(s));
      ring.consumer_step();
      ptx::wgmma_wait<1>();  // `prev` done; `next` may still run
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(prev[i]);
      release_input_barrier<Cfg>(ring.consumer_mbar(s_prev), m.lane);
      promote<Cfg>(final_acc[0], prev, sc_prev);
      if (tile_end) {  // `next` runs on the tensor cores meanwhile
        store_tile<Cfg>(final_acc, m, epi, map_d, p, done);
        zero<Cfg>(final_acc);
      }
      s_prev = s;
      sc_prev = sc;
      ++kb;
      return true;
    };
    auto retire = [&](float (&last)[Cfg::kAcc]) {
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) ptx::fence_operand(last[i]);
      release_input_barrier<Cfg>(ring.consumer_mbar(s_prev), m.lane);
      promote<Cfg>(final_acc[0], last, sc_prev);
    };
    // Unrolled by two so each accumulator stays a fixed register array. Each half keeps
    // its own exit and wait: a loop whose in-flight wgmma crosses the back-edge must have
    // at least two exits, each with its own wgmma_wait, or ptxas serializes every wgmma of
    // the kernel (C7514; reproduced with a minimal kernel).
    while (true) {
      if (!step(acc1, acc0)) { retire(acc0); break; }
      if (!step(acc0, acc1)) { retire(acc1); break; }
    }
    store_tile<Cfg>(final_acc, m, epi, map_d, p, job);
    t = job.t + order.stride;
  }
}

/// A math WG: its per-WG state, C pipeline and wgmma descriptors, then the main loop of
/// the configuration (overlapped promotion, or one accumulator).
template <class Cfg>
__device__ __forceinline__ void math_wg(typename Cfg::InputPipe& pipe, typename Cfg::Smem* smem,
                                        float* sfb_all, const CUtensorMap* map_d, const Fp8GemmParams& p,
                                        const TileScheduler& order) {
  MathWG<Cfg> m(smem, sfb_all, p);
  // This WG's C pipeline (built from its own barriers: a run-time index into an array of
  // pipelines would put the array in local memory).
  typename Cfg::EpiPipe epi(smem->epi_bars[m.wg], "fp8_c");
  const TileDescs<Cfg> descs(*pipe.tiles, m.wg, m.r0);
  if constexpr (Cfg::kOverlap) math_loop_chained<Cfg>(m, pipe.pipeline, epi, descs, map_d, p, order);
  else math_loop_waves<Cfg>(m, pipe.pipeline, epi, descs, map_d, p, order);
  // The last store must have left shared memory before the CTA exits; its global writes
  // complete with the kernel.
  if (m.t128 == 0) ptx::tma_store_wait_group_read<0>();
}

}  // namespace jax_sm100::kernels::sm90_fp8
