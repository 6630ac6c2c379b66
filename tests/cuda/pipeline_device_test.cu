// Device tests of the pipeline library on an sm_90a GPU: a producer warp against
// consumer warps through every pipeline type, thousands of rounds, data and order
// checked on the host against checksums computed independently there.
//
//   pc_*        ProducerConsumerPipeline, Stages 1,2,3,4,8, five modes: guards,
//               linear handles, explicit lane-guarded arrive, try-wait, signal_and_step
//   input_*     InputTilePipeline<BlockwiseFP8TilePayload>: TMA 2D (A) + TMA 3D (B) +
//               bulk copy (A-scales) completing ONE expect_bytes() transaction per stage;
//               consumers: guards / lane-guarded linear handles / try-acquire; drain()
//   epi_load_*  EpiLoadPipeline (producer count 1 = one TMA per stage, consumer 128)
//   output_*    OutputTilePipeline (shared memory stands in for TMEM columns) and the
//               per-K variants (MmaKStage / PerKConsumerStage / EpilogueKContext)
//   cluster_remote_arrive  2-CTA cluster ping-pong through DeviceBarrier::arrive_cluster
//   poll_answers_at_once   try_wait_producer / try_wait_consumer on incomplete phases return
//               false at once (timed), and true once the phase completes
//
// Debug-mode checks (binary built with -DJAX_SM100_PIPELINE_DEBUG):
//   --trap-hang        a consumer that never releases: the producer's bounded wait must
//                      printf the pipeline/stage and trap (the process reports a launch
//                      failure instead of hanging)
//   --trap-unreleased  a linear handle destroyed without release() must trap
//
// Usage: pipeline_device_test [--rounds N] [--blocks B] [--seed S] [--only A,B] [--exclude A,B]
//                             [--trap-hang|--trap-unreleased]
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -I ffi/include -o ... this.cu
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "jax_sm100/pipeline/all.h"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/tma.cuh"

namespace jp = jax_sm100::pipeline;
namespace px = jax_sm100::ptx;

#define CUDA_CHECK(x)                                                                    \
  do {                                                                                   \
    cudaError_t err_ = (x);                                                              \
    if (err_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s (%d) at %s:%d: %s\n", cudaGetErrorName(err_), (int)err_, \
                  __FILE__, __LINE__, #x);                                               \
      std::fflush(stdout);                                                               \
      std::exit(3);                                                                      \
    }                                                                                    \
  } while (0)

// ------------------------------------------------------------------ shared helpers

__host__ __device__ inline uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
// The value the producer writes at `idx` of `round` in `block`.
__host__ __device__ inline uint32_t item_value(uint32_t seed, uint32_t block, uint32_t round, uint32_t idx) {
  return mix(seed ^ mix(block * 0x9E3779B9u + mix(round * 0x85ebca6bu + idx)));
}
// Order-independent checksum term of value v at index idx (wrapping uint32 sum).
__host__ __device__ inline uint32_t term(uint32_t v, uint32_t idx) { return v * (2u * idx + 1u); }

// Rare short random sleeps so the warps interleave differently every round.
__device__ inline void jitter(uint32_t seed, uint32_t a, uint32_t b) {
  const uint32_t h = mix(seed ^ mix(a * 0x27d4eb2fu + b));
  if ((h & 15u) == 0) __nanosleep(h >> 23);
}

constexpr int kConsumerWarps = 4;
constexpr int kThreads = 32 * (1 + kConsumerWarps);

__device__ inline uint32_t warp_sum(uint32_t v) { return __reduce_add_sync(0xffffffffu, v); }

// ------------------------------------------------------------------ ProducerConsumerPipeline

enum PcMode { kGuards = 0, kLinear = 1, kExplicit = 2, kTryWait = 3, kSignalAndStep = 4 };
static const char* pc_mode_name(int m) {
  static const char* names[] = {"guards", "linear", "explicit", "trywait", "signal_and_step"};
  return names[m];
}
constexpr int kSlotWords = 256;  // 1 KB per stage; each lane owns 8 words

template <int Stages, int Mode>
__global__ void __launch_bounds__(kThreads) pc_kernel(uint32_t seed, int rounds, uint32_t* records,
                                                      unsigned* errors) {
  __shared__ jp::DeviceBarrier bars[2 * Stages];
  __shared__ uint32_t slots[Stages][kSlotWords];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::ProducerConsumerPipeline<Stages> pipe(bars, "pc");
  if (threadIdx.x == 0) {
    // Producer: every lane of the producer warp arrives after writing its words.
    // Consumer: every consumer thread, except in explicit mode: lanes 0 and 1 of each warp.
    pipe.init_mbars(32, Mode == kExplicit ? 2 * kConsumerWarps : 32 * kConsumerWarps);
  }
  __syncthreads();

  if (warp == 0) {
    auto write = [&](uint32_t s, int r) {
      for (int j = 0; j < kSlotWords / 32; ++j) {
        const uint32_t idx = lane + 32 * j;
        slots[s][idx] = item_value(seed, blk, r, idx);
      }
    };
    for (int r = 0; r < rounds; ++r) {
      jitter(seed, blk * 7919 + r, lane);
      if (Mode == kGuards || Mode == kExplicit) {
        auto st = pipe.produce();
        write(st.index(), r);
        st.mbar()->arrive();
      } else if (Mode == kLinear) {
        auto st = pipe.acquire_producer();
        write(st.index(), r);
        st.mbar()->arrive();
        std::move(st).release();
      } else if (Mode == kTryWait) {
        const bool ready = pipe.try_wait_consumer();
        jitter(seed, r, 99);
        pipe.wait_consumer_if_needed(ready);
        const uint32_t s = pipe.producer_stage();
        write(s, r);
        pipe.producer_mbar(s)->arrive();
        pipe.producer_step();
      } else {  // kSignalAndStep
        pipe.wait_consumer();
        write(pipe.producer_stage(), r);
        pipe.producer_signal_and_step();
      }
    }
  } else {
    const int cw = warp - 1;
    auto read = [&](uint32_t s, int r) {
      uint32_t sum = 0;
      unsigned bad = 0;
      uint32_t v[kSlotWords / 32];
      for (int j = 0; j < kSlotWords / 32; ++j) {
        const uint32_t idx = lane + 32 * j;
        v[j] = slots[s][idx];
        bad += v[j] != item_value(seed, blk, r, idx);
        sum += term(v[j], idx);
      }
      jitter(seed, r * 31 + cw, lane);
      for (int j = 0; j < kSlotWords / 32; ++j) bad += slots[s][lane + 32 * j] != v[j];  // overwritten?
      if (bad) atomicAdd(errors, bad);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * rounds + r] = sum;
    };
    for (int r = 0; r < rounds; ++r) {
      if (Mode == kGuards) {
        auto st = pipe.consume();
        read(st.index(), r);
      } else if (Mode == kLinear) {
        auto st = pipe.acquire_consumer();
        read(st.index(), r);
        if (r % 2 == 0) {
          std::move(st).release();
        } else {
          st.arrive();
          std::move(st).release_without_signal();
        }
      } else if (Mode == kExplicit) {
        auto st = pipe.consume_explicit();
        read(st.index(), r);
        __syncwarp();
        if (px::lane_id() < 2) st.arrive();  // lane-guarded arrive
      } else if (Mode == kTryWait) {
        const bool ready = pipe.try_wait_producer();
        pipe.wait_producer_if_needed(ready);
        const uint32_t s = pipe.consumer_stage();
        read(s, r);
        pipe.consumer_mbar(s)->arrive();
        pipe.consumer_step();
      } else {
        pipe.wait_producer();
        read(pipe.consumer_stage(), r);
        pipe.consumer_signal_and_step();
      }
    }
  }
}

// ------------------------------------------------------------------ InputTilePipeline + TMA

// Global operands: uint32 matrices (exact checksums). A: R x K row-major; B is the same
// kind of matrix read through a 3D view; scales: kScaleRows rows of 64 words.
constexpr int kR = 256, kK = 512;
constexpr int kBM = 64, kBN = 32, kBK = 32;  // A tile 64x32, B tile 32x32 (uint32)
constexpr int kSfa = 64;
constexpr int kScaleRows = 97;
using InPayload4 = jp::BlockwiseFP8TilePayload<uint32_t, uint32_t, uint32_t, kBM * kBK, kBN * kBK, kSfa, 4>;
using InPayload2 = jp::BlockwiseFP8TilePayload<uint32_t, uint32_t, uint32_t, kBM * kBK, kBN * kBK, kSfa, 2>;

struct TileCoords {
  int a_row, b_z, k, srow;
};
__host__ __device__ inline TileCoords tile_coords(uint32_t blk, int r) {
  TileCoords t;
  t.a_row = ((r * 7 + blk * 3) % (kR / kBM)) * kBM;
  t.b_z = (r * 5 + blk) % (kR / kBN);
  t.k = ((r + blk) % (kK / kBK)) * kBK;
  t.srow = (r * 13 + blk) % kScaleRows;
  return t;
}

enum InMode { kInGuards = 0, kInLaneGuarded = 1, kInTry = 2 };

// Dynamic shared memory, aligned by hand to 1024 bytes (the runtime only promises 16).
__device__ inline unsigned char* aligned_dsmem() {
  extern __shared__ unsigned char dsmem_raw[];
  const uint32_t a = px::smem_addr(dsmem_raw);
  return dsmem_raw + ((1024 - (a & 1023)) & 1023);
}

template <class Payload, int Mode>
__global__ void __launch_bounds__(kThreads) input_kernel(const __grid_constant__ CUtensorMap map_a,
                                                         const __grid_constant__ CUtensorMap map_b3,
                                                         const uint32_t* scales, int rounds,
                                                         uint32_t* records, unsigned* errors) {
  constexpr int S = Payload::kStages;
  Payload* tiles = reinterpret_cast<Payload*>(aligned_dsmem());
  jp::DeviceBarrier* bars = reinterpret_cast<jp::DeviceBarrier*>(tiles + 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::InputTilePipeline<Payload> pipe(bars, tiles, "input");
  if (threadIdx.x == 0) {
    px::tma_prefetch_descriptor(&map_a);
    px::tma_prefetch_descriptor(&map_b3);
    pipe.init_barriers(1, Mode == kInLaneGuarded ? kConsumerWarps : 32 * kConsumerWarps);
  }
  __syncthreads();

  if (warp == 0) {
    // Elect once, outside the loop: the pipeline state lives in the elected lane's
    // registers, so the same lane must drive every round.
    const bool leader = px::elect_one_sync();
    if (leader) {
      auto producer = pipe.producer();
      auto load = [&](auto& t, int r) {
        const TileCoords c = tile_coords(blk, r);
        t.expect_bytes();  // one transaction: A + B + scales of the stage
        px::tma_load_2d(t.a_tile(), &map_a, t.mbar()->ptr(), c.k, c.a_row);
        px::tma_load_3d(t.b_tile(), &map_b3, t.mbar()->ptr(), c.k, 0, c.b_z);
        px::bulk_load(t.sfa_tile(), scales + c.srow * kSfa, kSfa * 4, t.mbar()->ptr());
      };
      for (int r = 0; r < rounds; ++r) {
        if (r % 3 == 0) {
          auto t = producer.acquire();
          load(t, r);
        } else if (r % 3 == 1) {
          auto t = producer.acquire_stage();
          load(t, r);
          std::move(t).release();
        } else {
          const bool ready = producer.try_acquire();
          auto t = producer.acquire_if_needed(ready);
          load(t, r);
        }
      }
      producer.drain();  // every stage released before the block may exit
    }
  } else {
    const int cw = warp - 1;
    auto consumer = pipe.consumer();
    auto use = [&](auto& t, int r) {
      uint32_t sum = 0;
      const uint32_t* a = t.a_tile();
      const uint32_t* b = t.b_tile();
      const uint32_t* sf = t.sfa_tile();
      for (int i = lane; i < kBM * kBK; i += 32) sum += term(a[i], i);
      for (int i = lane; i < kBN * kBK; i += 32) sum += term(b[i], 100000 + i);
      for (int i = lane; i < kSfa; i += 32) sum += term(sf[i], 200000 + i);
      if (t.index() != uint32_t(r % S)) atomicAdd(errors, 1u);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * rounds + r] = sum;
    };
    for (int r = 0; r < rounds; ++r) {
      if (Mode == kInGuards) {
        auto t = consumer.acquire();
        use(t, r);
      } else if (Mode == kInLaneGuarded) {
        auto t = consumer.acquire_stage();
        use(t, r);
        __syncwarp();
        if (lane == 0) {
          std::move(t).release();  // arrive + step
        } else {
          std::move(t).release_without_signal();
        }
      } else {
        const bool ready = consumer.try_acquire();
        auto t = consumer.acquire_if_needed(ready);
        use(t, r);
      }
    }
  }
}

// ------------------------------------------------------------------ EpiLoadPipeline

constexpr int kCT = 32;  // C tile 32 x 32 uint32 (4 KB)

template <int Stages>
__global__ void __launch_bounds__(kThreads) epi_load_kernel(const __grid_constant__ CUtensorMap map_c,
                                                            int rounds, uint32_t* records,
                                                            unsigned* errors) {
  uint32_t(*ctile)[kCT * kCT] = reinterpret_cast<uint32_t(*)[kCT * kCT]>(aligned_dsmem());
  jp::DeviceBarrier* bars = reinterpret_cast<jp::DeviceBarrier*>(ctile + Stages);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::EpiLoadPipeline<Stages> epi(bars);
  if (threadIdx.x == 0) epi.init_barriers();  // seed defaults: producer 1, consumer 128
  __syncthreads();
  if (warp == 0) {
    const bool leader = px::elect_one_sync();
    if (leader) {
      for (int r = 0; r < rounds; ++r) {
        const int row = ((r * 3 + blk) % (kR / kCT)) * kCT, col = ((r + 5 * blk) % (kK / kCT)) * kCT;
        if (r % 2 == 0) {
          auto st = epi.produce();
          epi.producer_mbar()->arrive_expect_tx(kCT * kCT * 4);  // the one TMA transaction
          px::tma_load_2d(ctile[st.index()], &map_c, st.mbar()->ptr(), col, row);
        } else {
          auto st = epi.acquire_producer();
          st.mbar()->arrive_expect_tx(kCT * kCT * 4);
          px::tma_load_2d(ctile[st.index()], &map_c, st.mbar()->ptr(), col, row);
          std::move(st).release();
        }
      }
      for (int i = 0; i < Stages; ++i) {  // tail: wait for every release
        epi.wait_consumer();
        epi.producer_step();
      }
    }
  } else {
    const int cw = warp - 1;
    for (int r = 0; r < rounds; ++r) {
      auto st = epi.consume();  // all 128 epilogue threads arrive on exit
      const uint32_t* c = ctile[st.index()];
      uint32_t sum = 0;
      for (int i = lane; i < kCT * kCT; i += 32) sum += term(c[i], i);
      if (st.index() != uint32_t(r % Stages)) atomicAdd(errors, 1u);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * rounds + r] = sum;
    }
  }
}

// ------------------------------------------------------------------ OutputTilePipeline

constexpr int kAccCols = 256;  // "TMEM columns" per stage, here shared-memory words

// MMA warp (all 32 lanes write and arrive: producer count 32) -> 4 epilogue warps.
// PerK = false: one stage per tile, OutputProducer / OutputConsumer guards and the
//   linear MmaStage / EpilogueStage alternate; consumer count 128.
// PerK = true: kKBlocks stages per tile through per_k(): MmaKStage (linear) ->
//   PerKConsumerStage (lane-guarded arrive, count 4) or EpilogueKContext (count 4:
//   only with Explicit = false... see below); the epilogue accumulates (k+1)*partial.
constexpr int kKBlocks = 3;
template <int Stages, bool PerK>
__global__ void __launch_bounds__(kThreads) output_kernel(uint32_t seed, int tiles, uint32_t* records,
                                                          unsigned* errors) {
  __shared__ jp::DeviceBarrier bars[2 * Stages];
  __shared__ uint32_t acc[Stages * kAccCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::OutputTilePipeline<Stages> out(bars, /*tmem_base=*/0, /*stage_stride_cols=*/kAccCols, "output");
  if (threadIdx.x == 0) out.init_barriers(32, PerK ? kConsumerWarps : 32 * kConsumerWarps);
  __syncthreads();
  auto mma = [&](uint32_t col0, uint32_t item) {
    for (int j = 0; j < kAccCols / 32; ++j) acc[col0 + lane + 32 * j] = item_value(seed, blk, item, lane + 32 * j);
  };
  if (warp == 0) {
    for (int t = 0; t < tiles; ++t) {
      jitter(seed, t, lane);
      if (!PerK) {
        if (t % 2 == 0) {
          auto st = out.producer();
          mma(st.tmem_offset(), t);
          st.mbar()->arrive();  // sm_100: tcgen05.commit to this barrier
        } else {
          auto st = out.acquire_mma_stage();
          mma(st.stage().tmem_offset(), t);
          st.mbar()->arrive();
          std::move(st).release();
        }
      } else {
        auto per_k = out.per_k();
        for (int k = 0; k < kKBlocks; ++k) {
          auto st = per_k.acquire_mma_k();
          mma(st.tmem_offset(), t * kKBlocks + k);
          st.mbar()->arrive();
          std::move(st).release();
        }
      }
    }
  } else {
    const int cw = warp - 1;
    for (int t = 0; t < tiles; ++t) {
      uint32_t sum = 0;
      if (!PerK) {
        auto read = [&](uint32_t col0) {
          for (int j = 0; j < kAccCols / 32; ++j) {
            const uint32_t i = lane + 32 * j, v = acc[col0 + i];
            if (v != item_value(seed, blk, t, i)) atomicAdd(errors, 1u);
            sum += term(v, i);
          }
        };
        if ((t + cw) % 2 == 0) {
          auto st = out.consumer();
          read(st.tmem_offset());
        } else {
          auto st = out.acquire_epilogue_stage();
          read(st.tmem_offset());
          if (t % 4 == 1) {
            std::move(st).release();
          } else {
            st.arrive();
            std::move(st).release_without_signal();
          }
        }
      } else {
        auto per_k = out.per_k();
        uint32_t part[kAccCols / 32] = {};
        for (int k = 0; k < kKBlocks; ++k) {
          // Lane-guarded release in all three forms (consumer count = 4 warps).
          if ((t + k) % 2 == 0) {
            auto st = per_k.consume_k_explicit();  // PerKConsumerStage: exit steps only
            for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
            __syncwarp();
            if (lane == 0) st.arrive();
          } else {
            auto st = per_k.acquire_epilogue_k();  // EpilogueKStage: linear
            for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
            __syncwarp();
            if (lane == 0) {
              std::move(st).release();
            } else {
              std::move(st).release_without_signal();
            }
          }
        }
        for (int j = 0; j < kAccCols / 32; ++j) sum += term(part[j], lane + 32 * j);
      }
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * tiles + t] = sum;
    }
  }
}

// EpilogueKContext releases with an arrival from every thread: consumer count 128.
template <int Stages>
__global__ void __launch_bounds__(kThreads) output_k_context_kernel(uint32_t seed, int tiles,
                                                                    uint32_t* records, unsigned* errors) {
  __shared__ jp::DeviceBarrier bars[2 * Stages];
  __shared__ uint32_t acc[Stages * kAccCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::OutputTilePipeline<Stages> out(bars, 0, kAccCols, "output_k");
  if (threadIdx.x == 0) out.init_barriers(32, 32 * kConsumerWarps);
  __syncthreads();
  auto per_k = out.per_k();
  if (warp == 0) {
    for (int t = 0; t < tiles; ++t) {
      for (int k = 0; k < kKBlocks; ++k) {
        auto st = per_k.acquire_mma_k();
        for (int j = 0; j < kAccCols / 32; ++j)
          acc[st.tmem_offset() + lane + 32 * j] = item_value(seed, blk, t * kKBlocks + k, lane + 32 * j);
        st.mbar()->arrive();
        std::move(st).release();
      }
    }
  } else {
    const int cw = warp - 1;
    for (int t = 0; t < tiles; ++t) {
      uint32_t part[kAccCols / 32] = {};
      for (int k = 0; k < kKBlocks; ++k) {
        auto st = per_k.epilogue_k();  // EpilogueKContext: exit arrives + steps
        for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
      }
      uint32_t sum = 0;
      for (int j = 0; j < kAccCols / 32; ++j) sum += term(part[j], lane + 32 * j);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * tiles + t] = sum;
    }
  }
  (void)errors;
}

// ------------------------------------------------------------------ cluster remote arrive

// Two CTAs of a cluster ping-pong `rounds` times: CTA 0 writes a token into its own
// shared memory... (distributed shared memory is not needed): each CTA's barrier is
// armed for 1 arrival that only the PEER can give through arrive_cluster. CTA c waits
// on its own barrier for round r, then arrives on the peer's. Counts completed phases.
__global__ void __cluster_dims__(2, 1, 1) cluster_kernel(int rounds, unsigned* results) {
  __shared__ jp::DeviceBarrier bar;
  const uint32_t rank = px::block_rank_in_cluster();
  if (threadIdx.x == 0) {
    bar.init(1);
    jp::DeviceBarrier::fence_init();
  }
  px::cluster_sync();  // both barriers armed before any remote arrive
  if (threadIdx.x == 0) {
    uint32_t phase = 0;
    for (int r = 0; r < rounds; ++r) {
      if (rank == 0) {
        bar.arrive_cluster(1);  // CTA 0 kicks, then waits for CTA 1's answer
        bar.wait(phase, jp::WaitSite{"cluster", "rank 0 waits for rank 1", 0});
      } else {
        bar.wait(phase, jp::WaitSite{"cluster", "rank 1 waits for rank 0", 0});
        bar.arrive_cluster(0);
      }
      phase ^= 1u;
    }
    results[blockIdx.x] = rounds;
  }
  px::cluster_sync();  // keep both CTAs' shared memory alive until all remote arrives landed
}

// ------------------------------------------------------------------ debug-mode traps

// A consumer that never releases: the producer fills every stage once, then its bounded
// wait must report "trap_test" and trap.
__global__ void trap_hang_kernel() {
  __shared__ jp::DeviceBarrier bars[4];
  jp::ProducerConsumerPipeline<2> pipe(bars, "trap_test");
  if (threadIdx.x == 0) pipe.init_mbars(1, 32);
  __syncthreads();
  if (threadIdx.x / 32 == 0) {
    if (threadIdx.x == 0) {
      for (int r = 0; r < 3; ++r) {
        auto st = pipe.produce();
        st.mbar()->arrive();
      }
    }
  } else {
    for (int r = 0; r < 2; ++r) {
      auto st = pipe.consume_explicit();  // BUG under test: nobody arrives
    }
  }
}

// A linear handle destroyed without release().
__global__ void trap_unreleased_kernel() {
  __shared__ jp::DeviceBarrier bars[4];
  jp::ProducerConsumerPipeline<2> pipe(bars, "leak_test");
  if (threadIdx.x == 0) {
    pipe.init_mbars(1, 1);
    auto st = pipe.acquire_producer();
    st.mbar()->arrive();
    // BUG under test: no std::move(st).release()
  }
}

// ------------------------------------------------------------------ host side

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    void* p = nullptr;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::printf("cannot load cuTensorMapEncodeTiled\n");
      std::exit(3);
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

static CUtensorMap make_map(void* base, int rank, const cuuint64_t* dims, const cuuint64_t* strides_bytes,
                            const cuuint32_t* box) {
  CUtensorMap m;
  cuuint32_t elem[3] = {1, 1, 1};
  CUresult r = encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT32, rank, base, dims, strides_bytes, box, elem,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed: %d\n", (int)r);
    std::exit(3);
  }
  return m;
}

struct Ctx {
  uint32_t seed = 1;
  int rounds = 4000;
  int blocks = 8;
  std::string only;     // comma-separated substrings: run only matching tests
  std::string exclude;  // comma-separated substrings: skip matching tests
  int failures = 0;
  int passed = 0;
};

// Compare device records with the host's expected checksums; report the first mismatches.
static bool compare(const char* name, const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                    unsigned errors) {
  size_t bad = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (!bad) first = i;
      ++bad;
    }
  }
  if (bad || errors) {
    std::printf("FAIL %s: %zu of %zu records differ (first at %zu: got %u want %u), %u device-side errors\n",
                name, bad, got.size(), first, bad ? got[first] : 0u, bad ? want[first] : 0u, errors);
    return false;
  }
  std::printf("PASS %s (%zu records, 0 device-side errors)\n", name, got.size());
  return true;
}

struct DeviceBuf {
  uint32_t* rec = nullptr;
  unsigned* err = nullptr;
  size_t n = 0;
  explicit DeviceBuf(size_t count) : n(count) {
    CUDA_CHECK(cudaMalloc(&rec, n * 4));
    CUDA_CHECK(cudaMemset(rec, 0xA5, n * 4));  // poison: unwritten records fail
    CUDA_CHECK(cudaMalloc(&err, 4));
    CUDA_CHECK(cudaMemset(err, 0, 4));
  }
  ~DeviceBuf() {
    cudaFree(rec);
    cudaFree(err);
  }
  void fetch(std::vector<uint32_t>& out, unsigned& errors) {
    CUDA_CHECK(cudaDeviceSynchronize());
    out.resize(n);
    CUDA_CHECK(cudaMemcpy(out.data(), rec, n * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&errors, err, 4, cudaMemcpyDeviceToHost));
  }
};

// True if `name` contains one of the comma-separated substrings of `list`.
static bool matches_any(const std::string& list, const std::string& name) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = list.find(',', start);
    const std::string part = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty() && name.find(part) != std::string::npos) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

static bool selected(const Ctx& c, const std::string& name) {
  if (!c.exclude.empty() && matches_any(c.exclude, name)) return false;
  return c.only.empty() || matches_any(c.only, name);
}

template <int Stages, int Mode>
static void run_pc(Ctx& c) {
  const std::string name = "pc_stages" + std::to_string(Stages) + "_" + pc_mode_name(Mode);
  if (!selected(c, name)) return;
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  pc_kernel<Stages, Mode><<<c.blocks, kThreads>>>(c.seed, c.rounds, buf.rec, buf.err);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> got;
  unsigned errors = 0;
  buf.fetch(got, errors);
  std::vector<uint32_t> want(got.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (int r = 0; r < c.rounds; ++r) {
      uint32_t s = 0;
      for (uint32_t i = 0; i < kSlotWords; ++i) s += term(item_value(c.seed, b, r, i), i);
      for (int w = 0; w < kConsumerWarps; ++w) want[(size_t(b) * kConsumerWarps + w) * c.rounds + r] = s;
    }
  }
  if (compare(name.c_str(), got, want, errors)) ++c.passed; else ++c.failures;
}

struct Operands {
  std::vector<uint32_t> a, scales;
  uint32_t *d_a = nullptr, *d_scales = nullptr;
  CUtensorMap map_a, map_b3, map_c;
};

static void make_operands(Ctx& c, Operands& o) {
  o.a.resize(size_t(kR) * kK);
  o.scales.resize(size_t(kScaleRows) * kSfa);
  for (size_t i = 0; i < o.a.size(); ++i) o.a[i] = mix(c.seed * 2654435761u + uint32_t(i));
  for (size_t i = 0; i < o.scales.size(); ++i) o.scales[i] = mix(c.seed ^ (0x5bd1e995u * uint32_t(i + 1)));
  CUDA_CHECK(cudaMalloc(&o.d_a, o.a.size() * 4));
  CUDA_CHECK(cudaMalloc(&o.d_scales, o.scales.size() * 4));
  CUDA_CHECK(cudaMemcpy(o.d_a, o.a.data(), o.a.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(o.d_scales, o.scales.data(), o.scales.size() * 4, cudaMemcpyHostToDevice));
  {  // A: 2D (K, R), box (kBK, kBM)
    cuuint64_t dims[2] = {kK, kR}, strides[1] = {kK * 4};
    cuuint32_t box[2] = {kBK, kBM};
    o.map_a = make_map(o.d_a, 2, dims, strides, box);
  }
  {  // B: the same matrix as 3D (K, 32 rows, R/32 groups), box (kBK, 32, 1)
    cuuint64_t dims[3] = {kK, kBN, kR / kBN}, strides[2] = {kK * 4, uint64_t(kK) * 4 * kBN};
    cuuint32_t box[3] = {kBK, kBN, 1};
    o.map_b3 = make_map(o.d_a, 3, dims, strides, box);
  }
  {  // C: 2D, box 32 x 32
    cuuint64_t dims[2] = {kK, kR}, strides[1] = {kK * 4};
    cuuint32_t box[2] = {kCT, kCT};
    o.map_c = make_map(o.d_a, 2, dims, strides, box);
  }
}

template <class Payload, int Mode>
static void run_input(Ctx& c, Operands& o) {
  static const char* modes[] = {"guards", "lane_guarded_linear", "try_acquire"};
  const std::string name = "input_stages" + std::to_string(Payload::kStages) + "_tma_" + modes[Mode];
  if (!selected(c, name)) return;
  const size_t smem = sizeof(Payload) + 2 * Payload::kStages * 8 + 1024;
  CUDA_CHECK(cudaFuncSetAttribute(input_kernel<Payload, Mode>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  input_kernel<Payload, Mode><<<c.blocks, kThreads, smem>>>(o.map_a, o.map_b3, o.d_scales, c.rounds, buf.rec, buf.err);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> got;
  unsigned errors = 0;
  buf.fetch(got, errors);
  std::vector<uint32_t> want(got.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (int r = 0; r < c.rounds; ++r) {
      const TileCoords t = tile_coords(b, r);
      uint32_t s = 0;
      for (int i = 0; i < kBM * kBK; ++i) s += term(o.a[size_t(t.a_row + i / kBK) * kK + t.k + i % kBK], i);
      for (int i = 0; i < kBN * kBK; ++i)
        s += term(o.a[size_t(t.b_z * kBN + i / kBK) * kK + t.k + i % kBK], 100000 + i);
      for (int i = 0; i < kSfa; ++i) s += term(o.scales[size_t(t.srow) * kSfa + i], 200000 + i);
      for (int w = 0; w < kConsumerWarps; ++w) want[(size_t(b) * kConsumerWarps + w) * c.rounds + r] = s;
    }
  }
  if (compare(name.c_str(), got, want, errors)) ++c.passed; else ++c.failures;
}

template <int Stages>
static void run_epi_load(Ctx& c, Operands& o) {
  const std::string name = "epi_load_stages" + std::to_string(Stages) + "_tma";
  if (!selected(c, name)) return;
  const size_t smem = size_t(Stages) * kCT * kCT * 4 + 2 * Stages * 8 + 1024;
  CUDA_CHECK(cudaFuncSetAttribute(epi_load_kernel<Stages>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  epi_load_kernel<Stages><<<c.blocks, kThreads, smem>>>(o.map_c, c.rounds, buf.rec, buf.err);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> got;
  unsigned errors = 0;
  buf.fetch(got, errors);
  std::vector<uint32_t> want(got.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (int r = 0; r < c.rounds; ++r) {
      const int row = ((r * 3 + b) % (kR / kCT)) * kCT, col = ((r + 5 * b) % (kK / kCT)) * kCT;
      uint32_t s = 0;
      for (int i = 0; i < kCT * kCT; ++i) s += term(o.a[size_t(row + i / kCT) * kK + col + i % kCT], i);
      for (int w = 0; w < kConsumerWarps; ++w) want[(size_t(b) * kConsumerWarps + w) * c.rounds + r] = s;
    }
  }
  if (compare(name.c_str(), got, want, errors)) ++c.passed; else ++c.failures;
}

template <int Stages, int Kind>  // Kind 0: per tile, 1: per-K lane-guarded, 2: per-K EpilogueKContext
static void run_output(Ctx& c) {
  static const char* kinds[] = {"per_tile", "per_k_lane_guarded", "per_k_context"};
  const std::string name = "output_stages" + std::to_string(Stages) + "_" + kinds[Kind];
  if (!selected(c, name)) return;
  const int tiles = Kind == 0 ? c.rounds : c.rounds / kKBlocks;
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * tiles);
  if (Kind == 0) output_kernel<Stages, false><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  if (Kind == 1) output_kernel<Stages, true><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  if (Kind == 2) output_k_context_kernel<Stages><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> got;
  unsigned errors = 0;
  buf.fetch(got, errors);
  std::vector<uint32_t> want(got.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (int t = 0; t < tiles; ++t) {
      uint32_t s = 0;
      for (uint32_t i = 0; i < kAccCols; ++i) {
        uint32_t v = 0;
        if (Kind == 0) {
          v = item_value(c.seed, b, t, i);
        } else {
          for (int k = 0; k < kKBlocks; ++k) v += (k + 1) * item_value(c.seed, b, t * kKBlocks + k, i);
        }
        s += term(v, i);
      }
      for (int w = 0; w < kConsumerWarps; ++w) want[(size_t(b) * kConsumerWarps + w) * tiles + t] = s;
    }
  }
  if (compare(name.c_str(), got, want, errors)) ++c.passed; else ++c.failures;
}

// try_wait_producer / try_wait_consumer are polls: on a phase that is not complete they
// must answer false at once (mbarrier.test_wait), not suspend the thread for the
// hardware's time limit first as mbarrier.try_wait may. One thread polls a full barrier
// nobody fills and an empty barrier nobody frees, 256 times each, timed by %globaltimer;
// then one arrival completes the full barrier's phase and the poll must say so.
constexpr int kPolls = 256;
__global__ void poll_kernel(unsigned long long* out) {
  __shared__ jp::DeviceBarrier bars[2];
  jp::ProducerConsumerPipeline<1> pipe(bars, "poll");
  pipe.init_mbars(1, 1);
  __syncwarp();
  // The producer's first empty wait passes at once (the phase before phase 0): step past
  // it so that the empty poll below looks at a phase nobody completes.
  pipe.producer_step();
  unsigned trues = 0;
  const uint64_t t0 = jax_sm100::ptx::globaltimer_ns();
  for (int i = 0; i < kPolls; ++i) trues += pipe.try_wait_producer() ? 1u : 0u;
  for (int i = 0; i < kPolls; ++i) trues += pipe.try_wait_consumer() ? 1u : 0u;
  const uint64_t t1 = jax_sm100::ptx::globaltimer_ns();
  bars[0].arrive();  // full[0]: the one arrival that completes phase 0
  const bool seen = pipe.try_wait_producer();
  out[0] = t1 - t0;
  out[1] = trues;
  out[2] = seen ? 1 : 0;
}

static void run_poll(Ctx& c) {
  if (!selected(c, "poll_answers_at_once")) return;
  unsigned long long* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, 3 * sizeof(unsigned long long)));
  poll_kernel<<<1, 1>>>(d);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  unsigned long long h[3];
  CUDA_CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  cudaFree(d);
  // 512 polls in 50 us would be ~100 ns each; test_wait takes tens of ns, a suspending
  // try_wait microseconds.
  const bool ok = h[0] < 50000 && h[1] == 0 && h[2] == 1;
  std::printf("%s poll_answers_at_once (%d false polls in %llu ns, %llu answered true; complete phase seen: %llu)\n",
              ok ? "PASS" : "FAIL", 2 * kPolls, h[0], h[1], h[2]);
  if (ok) ++c.passed; else ++c.failures;
}

static void run_cluster(Ctx& c) {
  if (!selected(c, "cluster_remote_arrive")) return;
  unsigned* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, 2 * 4));
  CUDA_CHECK(cudaMemset(d, 0, 8));
  cluster_kernel<<<2, 32>>>(c.rounds, d);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  unsigned h[2];
  CUDA_CHECK(cudaMemcpy(h, d, 8, cudaMemcpyDeviceToHost));
  cudaFree(d);
  if (h[0] == unsigned(c.rounds) && h[1] == unsigned(c.rounds)) {
    std::printf("PASS cluster_remote_arrive (%d ping-pong rounds between 2 CTAs)\n", c.rounds);
    ++c.passed;
  } else {
    std::printf("FAIL cluster_remote_arrive: %u %u\n", h[0], h[1]);
    ++c.failures;
  }
}

int main(int argc, char** argv) {
  Ctx c;
  bool trap_hang = false, trap_unreleased = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) c.rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) c.seed = uint32_t(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) c.blocks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) c.only = argv[++i];
    else if (!std::strcmp(argv[i], "--exclude") && i + 1 < argc) c.exclude = argv[++i];
    else if (!std::strcmp(argv[i], "--trap-hang")) trap_hang = true;
    else if (!std::strcmp(argv[i], "--trap-unreleased")) trap_unreleased = true;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d), rounds %d, blocks %d, seed %u, %s build\n", prop.name, prop.major,
              prop.minor, c.rounds, c.blocks, c.seed,
#if defined(JAX_SM100_PIPELINE_DEBUG)
              "debug"
#else
              "release"
#endif
  );
  std::fflush(stdout);
  if (trap_hang || trap_unreleased) {
#if !defined(JAX_SM100_PIPELINE_DEBUG)
    std::printf("trap modes need a -DJAX_SM100_PIPELINE_DEBUG build\n");
    return 2;
#else
    if (trap_hang) trap_hang_kernel<<<1, 64>>>();
    else trap_unreleased_kernel<<<1, 32>>>();
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    std::printf("TRAP RESULT: launch=%s sync=%s\n", cudaGetErrorName(launch), cudaGetErrorName(sync));
    std::fflush(stdout);
    return sync == cudaSuccess ? 1 : 42;  // 42: the kernel trapped, as it must
#endif
  }

  run_pc<1, kGuards>(c);
  run_pc<2, kGuards>(c);
  run_pc<3, kGuards>(c);
  run_pc<4, kGuards>(c);
  run_pc<8, kGuards>(c);
  run_pc<1, kLinear>(c);
  run_pc<3, kLinear>(c);
  run_pc<8, kLinear>(c);
  run_pc<1, kExplicit>(c);
  run_pc<2, kExplicit>(c);
  run_pc<4, kExplicit>(c);
  run_pc<2, kTryWait>(c);
  run_pc<5, kTryWait>(c);
  run_pc<1, kSignalAndStep>(c);
  run_pc<4, kSignalAndStep>(c);

  Operands o;
  make_operands(c, o);
  run_input<InPayload4, kInGuards>(c, o);
  run_input<InPayload4, kInLaneGuarded>(c, o);
  run_input<InPayload2, kInTry>(c, o);
  run_input<InPayload2, kInLaneGuarded>(c, o);
  run_epi_load<2>(c, o);
  run_epi_load<4>(c, o);
  run_output<2, 0>(c);
  run_output<1, 0>(c);
  run_output<2, 1>(c);
  run_output<3, 2>(c);
  run_cluster(c);
  run_poll(c);
  cudaFree(o.d_a);
  cudaFree(o.d_scales);

  if (c.failures) {
    std::printf("FAILED: %d of %d\n", c.failures, c.failures + c.passed);
    return 1;
  }
  std::printf("ALL PASSED (%d tests)\n", c.passed);
  return 0;
}
