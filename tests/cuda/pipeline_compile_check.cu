// Compile check: instantiates every type and method of the pipeline library and every
// ptx wrapper in device code. Built (not run) by tests/test_pipeline_device.py and by
// hand: nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -I ffi/include -c ...
// (and for compute_100a to cover the tcgen05 / clc wrappers).
#include <cuda.h>

#include "jax_sm100/pipeline/all.h"
#include "jax_sm100/ptx/sm100/clc.cuh"
#include "jax_sm100/ptx/common/elect.cuh"
#include "jax_sm100/ptx/common/fence.cuh"
#include "jax_sm100/ptx/common/mbarrier.cuh"
#include "jax_sm100/ptx/sm100/tcgen05.cuh"
#include "jax_sm100/ptx/common/tma.cuh"

namespace jp = jax_sm100::pipeline;
namespace px = jax_sm100::ptx;

using Std = jp::StandardTilePayload<uint16_t, uint16_t, 128 * 64, 128 * 64, 4>;
using Fp8 = jp::BlockwiseFP8TilePayload<uint8_t, uint8_t, float, 128 * 128, 128 * 128, 128, 3>;
using Bsc = jp::BlockScaledTilePayload<uint8_t, uint8_t, uint8_t, 128 * 128, 128 * 128, 512, 512, 2>;

template <class Payload>
__device__ void exercise_input(jp::DeviceBarrier* bars, Payload* tiles, const CUtensorMap* map) {
  jp::InputTilePipeline<Payload> pipe(bars, tiles);
  if (threadIdx.x == 0) pipe.init_barriers(1, 1);
  __syncthreads();
  auto prod = pipe.producer();
  auto cons = pipe.consumer();
  {
    auto t = prod.acquire();
    t.expect_bytes();
    px::tma_load_2d(t.a_tile(), map, t.mbar()->ptr(), 0, 0);
    px::tma_load_2d(t.b_tile(), map, t.barrier()->ptr(), 0, 0);
    (void)t.payload();
    (void)t.stage();
  }
  {
    auto s = prod.acquire_stage();
    s.expect_bytes();
    std::move(s).release();
  }
  {
    bool r = prod.try_acquire();
    auto t = prod.acquire_if_needed(r);
  }
  prod.drain();
  {
    auto t = cons.acquire();
    (void)t.a_tile();
  }
  {
    auto s = cons.acquire_stage();
    s.arrive();
    std::move(s).release_without_signal();
  }
  {
    bool r = cons.try_acquire();
    auto t = cons.acquire_if_needed(r);
  }
  auto s1 = pipe.acquire_producer();
  std::move(s1).release();
  auto s2 = pipe.acquire_consumer();
  std::move(s2).release();
}

__global__ void compile_all(const __grid_constant__ CUtensorMap map, int* out) {
  __shared__ jp::DeviceBarrier bars[16];
  extern __shared__ __align__(1024) unsigned char dsmem[];
  // ptx layer
  if (px::elect_one_sync()) {
    px::mbarrier_init(bars[0].ptr(), 1);
    px::fence_barrier_init();
    px::mbarrier_arrive(bars[0].ptr());
    px::mbarrier_arrive(bars[0].ptr(), 1u);
    px::mbarrier_arrive_expect_tx(bars[0].ptr(), 16);
    px::mbarrier_expect_tx(bars[0].ptr(), 16);
    out[0] = px::mbarrier_try_wait_parity(bars[0].ptr(), 0);
    out[1] = px::mbarrier_try_wait_parity(bars[0].ptr(), 0, 1000);
    out[2] = px::mbarrier_test_wait_parity(bars[0].ptr(), 1);
    out[3] = bars[1].test_wait(0);
    px::mbarrier_wait_parity(bars[0].ptr(), 1);
    px::mbarrier_arrive_cluster(bars[0].ptr(), 0);
    px::tma_prefetch_descriptor(&map);
    px::tma_load_3d(dsmem, &map, bars[0].ptr(), 0, 0, 0);
    px::tma_load_2d_multicast(dsmem, &map, bars[0].ptr(), 0x3, 0, 0);
    px::tma_load_3d_multicast(dsmem, &map, bars[0].ptr(), 0x3, 0, 0, 0);
    px::fence_proxy_async_shared_cta();
    px::fence_view_async_shared();
    px::fence_proxy_async();
    px::tma_store_2d(&map, dsmem, 0, 0);
    px::tma_store_3d(&map, dsmem, 0, 0, 0);
    px::tma_store_commit_group();
    px::tma_store_wait_group_read<0>();
    px::tma_store_wait_group<1>();
    px::bulk_load(dsmem, out, 16, bars[0].ptr());
    px::fence_acq_rel_cta();
    px::fence_acq_rel_cluster();
    out[2] = px::block_rank_in_cluster() + px::lane_id() + px::warp_idx_sync() + (int)px::globaltimer_ns();
  }
  px::cluster_arrive_relaxed();
  px::cluster_wait();
  px::cluster_sync();

  // ProducerConsumerPipeline, every method
  jp::ProducerConsumerPipeline<4> p(bars, "compile");
  static_assert(jp::ProducerConsumerPipeline<4>::smem_bytes() == 64, "2*Stages mbarriers");
  if (threadIdx.x == 0) p.init_mbars(1, 128);
  __syncthreads();
  p.wait_producer();
  p.wait_consumer();
  bool a = p.try_wait_producer();
  bool b = p.try_wait_consumer();
  p.wait_producer_if_needed(a);
  p.wait_consumer_if_needed(b);
  p.producer_mbar(p.producer_stage())->arrive();
  p.consumer_mbar(p.consumer_stage())->arrive_expect_tx(4);
  p.consumer_mbar(0)->expect_tx(4);
  p.consumer_mbar(0)->arrive_cluster(0);
  p.producer_step();
  p.consumer_step();
  p.producer_signal_and_step();
  p.consumer_signal_and_step();
  { auto st = p.produce(); out[3] = st.index() + (int)(uintptr_t)st.mbar(); (void)st.stage(); }
  { auto st = p.consume(); out[4] = st.index(); }
  { auto st = p.consume_explicit(); if (px::lane_id() < 2) st.arrive(); }
  {
    auto ps = p.acquire_producer();
    auto moved = std::move(ps);
    std::move(moved).release();
    auto cs = p.acquire_consumer();
    cs.arrive();
    std::move(cs).release_without_signal();
    auto cs2 = p.acquire_consumer();
    std::move(cs2).release();
  }

  // EpiLoadPipeline
  jp::EpiLoadPipeline<2> e(bars + 8);
  if (threadIdx.x == 0) e.init_barriers();
  { auto st = e.produce(); px::tma_load_2d(dsmem, &map, e.producer_mbar()->ptr(), 0, 0); }
  e.wait_consumer();
  e.producer_step();
  { auto st = e.consume(); }
  { auto st = e.consume_explicit(); st.arrive(); }
  auto ep = e.acquire_producer();
  std::move(ep).release();
  auto ec = e.acquire_consumer();
  std::move(ec).release();
  e.wait_producer();
  out[5] = e.consumer_stage() + e.producer_stage() + (int)(uintptr_t)e.consumer_mbar();
  e.consumer_step();
  static_assert(jp::EpiLoadPipeline<2>::smem_bytes() == 32, "");

  // Tile pipelines
  exercise_input(bars, reinterpret_cast<Std*>(dsmem), &map);
  exercise_input(bars, reinterpret_cast<Fp8*>(dsmem), &map);
  exercise_input(bars, reinterpret_cast<Bsc*>(dsmem), &map);
  {
    jp::InputTilePipeline<Fp8> fp(bars, reinterpret_cast<Fp8*>(dsmem));
    auto t = fp.consumer().acquire();
    out[6] = (int)t.sfa_tile()[0];
    jp::InputTilePipeline<Bsc> bp(bars, reinterpret_cast<Bsc*>(dsmem));
    auto u = bp.consumer().acquire();
    out[7] = u.sfa_tile()[0] + u.sfb_tile()[0];
  }

  jp::OutputTilePipeline<2> op(bars, 0, 128);
  if (threadIdx.x == 0) op.init_barriers(1, 128);
  { auto m = op.producer(); out[8] = m.tmem_offset() + m.index() + m.stage().index(); (void)m.mbar(); }
  { auto c = op.consumer(); out[9] = c.stage().tmem_offset(); }
  { auto m = op.acquire_mma_stage(); (void)m.stage(); std::move(m).release(); }
  { auto c = op.acquire_epilogue_stage(); c.arrive(); std::move(c).release_without_signal(); }
  { auto c = op.acquire_epilogue_stage(); std::move(c).release(); }
  auto kp = op.per_k();
  { auto m = kp.acquire_mma_k(); out[10] = m.tmem_offset(); std::move(m).release(); }
  { auto c = kp.acquire_epilogue_k(); std::move(c).release(); }
  { auto c = kp.epilogue_k(); out[11] = c.tmem_offset(); }
  { auto c = kp.consume_k_explicit(); c.arrive(); }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  __shared__ uint32_t tmem_addr;
  __shared__ px::ClcResponse resp;
  if (threadIdx.x < 32) {
    px::tmem_alloc(&tmem_addr, 128);
    px::tmem_relinquish_alloc_permit();
  }
  px::tcgen05_fence_before_thread_sync();
  __syncthreads();
  px::tcgen05_fence_after_thread_sync();
  if (threadIdx.x == 0) {
    px::umma_commit(bars[0].ptr());
    px::umma_commit_multicast(bars[0].ptr(), 0x3);
    px::clc_try_cancel(&resp, bars[1].ptr());
    px::clc_try_cancel_multicast(&resp, bars[1].ptr());
    out[12] = px::clc_query_is_canceled(resp);
    out[13] = px::clc_query_first_ctaid(resp).x;
  }
  px::tcgen05_wait_ld();
  px::tcgen05_wait_st();
  if (threadIdx.x < 32) px::tmem_dealloc(tmem_addr, 128);
#endif
}
