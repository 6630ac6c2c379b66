// Device tests, part 1: ProducerConsumerPipeline (Stages 1..8, five consumer modes),
// DeviceBarrier::arrive_cluster between the CTAs of a 2-CTA cluster, and the
// non-suspending polls. See pipeline_device_test.cu.
#include "pipeline_device_harness.cuh"

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

// ------------------------------------------------------------------ host side

template <int Stages, int Mode>
static void run_pc(Ctx& c) {
  const std::string name = "pc_stages" + std::to_string(Stages) + "_" + pc_mode_name(Mode);
  if (!selected(c, name)) return;
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  pc_kernel<Stages, Mode><<<c.blocks, kThreads>>>(c.seed, c.rounds, buf.rec, buf.err);
  check_records(c, name, buf, c.rounds, [&](int b, int r) {
    uint32_t s = 0;
    for (uint32_t i = 0; i < kSlotWords; ++i) s += term(item_value(c.seed, b, r, i), i);
    return s;
  });
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

void run_poll(Ctx& c) {
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

void run_cluster(Ctx& c) {
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

void run_pc_tests(Ctx& c) {
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
}
