// Host protocol tests, part 1: PipelineState, HostBarrier and ProducerConsumerPipeline
// (every consumer mode, Stages 1..8). See pipeline_host_test.cc.
#include "pipeline_host_harness.h"

// ---------------------------------------------------------------- unit tests

void test_pipeline_state() {
  for (int lap = 0; lap < 3; ++lap) {
    jp::PipelineState<1> s1 = jp::PipelineState<1>::producer_start();
    CHECK(s1.index == 0 && s1.phase == 1, "producer starts at phase 1");
    s1.step();
    CHECK(s1.index == 0 && s1.phase == 0, "1 stage: every step wraps and flips");
  }
  jp::PipelineState<5> s = jp::PipelineState<5>::consumer_start();
  CHECK(s.index == 0 && s.phase == 0, "consumer starts at phase 0");
  for (int i = 1; i <= 23; ++i) {
    s.step();
    CHECK(s.index == static_cast<uint32_t>(i % 5), "index after %d steps", i);
    CHECK(s.phase == static_cast<uint32_t>((i / 5) % 2), "phase after %d steps", i);
  }
  CHECK(jp::ProducerConsumerPipeline<7>::smem_bytes() == 7 * 2 * 8, "2*Stages mbarriers of 8 bytes");
  CHECK(jp::EpiLoadPipeline<2>::smem_bytes() == 32, "epi load: 4 mbarriers");
}

void test_host_barrier_semantics() {
  jp::HostBarrier b;
  b.init(2);
  CHECK(b.try_wait(1), "parity 1 (the phase before phase 0) counts as completed");
  CHECK(!b.try_wait(0), "phase 0 not complete yet");
  b.arrive();
  CHECK(!b.try_wait(0) && b.pending_arrivals() == 1, "one of two arrivals");
  b.arrive();
  CHECK(b.try_wait(0) && !b.try_wait(1), "phase 0 complete, phase 1 running");
  CHECK(b.pending_arrivals() == 2 && b.completed_phases() == 1, "re-armed");
  // Transactions: the phase needs both the arrivals and the bytes.
  b.arrive_expect_tx(100);
  b.arrive();
  CHECK(!b.try_wait(1), "arrivals done, 100 bytes outstanding");
  b.complete_tx(60);
  CHECK(!b.try_wait(1), "40 bytes outstanding");
  b.complete_tx(40);
  CHECK(b.try_wait(1), "bytes landed: phase 1 complete");
  // tx may go negative transiently (bytes land before the expect).
  b.complete_tx(32);
  b.arrive();
  CHECK(!b.try_wait(0), "tx is -32: not complete");
  b.expect_tx(32);
  CHECK(!b.try_wait(0), "one arrival still missing");
  b.arrive();
  CHECK(b.try_wait(0) && b.completed_phases() == 3, "phase 2 complete");
  // arrive(count) counts several arrivals at once.
  jp::HostBarrier w;
  w.init(128);
  for (int warp = 0; warp < 4; ++warp) w.arrive(32);
  CHECK(w.try_wait(0), "4 x arrive(32) completes a 128-arrival phase");
  // Over-arrival is a protocol error (undefined on the GPU).
  jp::HostBarrier o;
  o.init(1);
  o.arrive_expect_tx(8);
  bool threw = false;
  try {
    o.arrive();
  } catch (const jp::PipelineError&) {
    threw = true;
  }
  CHECK(threw, "arriving twice on a 1-arrival barrier in one phase is reported");
}

// ---------------------------------------------------------------- ProducerConsumerPipeline stress

enum class Mode { Guards, Linear, Explicit, TryWait, TryWaitAt, SignalAndStep, Throttle };
static const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Guards: return "guards";
    case Mode::Linear: return "linear";
    case Mode::Explicit: return "explicit";
    case Mode::TryWait: return "trywait";
    case Mode::TryWaitAt: return "trywait_at";
    case Mode::SignalAndStep: return "signal_and_step";
    case Mode::Throttle: return "throttle";
  }
  return "?";
}

// One producer thread, `consumers` consumer threads, `items` items through a
// Stages-deep ring. In Explicit mode only the first `arrivers` consumers arrive (after a
// spin barrier that stands in for warp convergence).
template <int Stages>
static void stress_pc(Mode mode, int consumers, int arrivers, int items, uint64_t seed) {
  std::vector<jp::HostBarrier> bars(2 * Stages);
  std::vector<Slot> slots(Stages);
  for (auto& s : slots) std::memset(&s, 0xff, sizeof(s));
  const int arrive_count = (mode == Mode::Explicit) ? arrivers : consumers;
  {
    jp::ProducerConsumerPipeline<Stages, jp::HostBarrier> init(bars.data(), "stress");
    init.init_mbars(1, arrive_count);
  }
  std::vector<uint64_t> consumed(consumers, 0);
  SpinBarrier warp(consumers);
  // Throttle mode (CLC style: no payload, only the ring bounds how far ahead the
  // producer runs): calls started, counted before each signal_and_step.
  std::atomic<uint64_t> producer_started{0};
  std::vector<std::atomic<uint64_t>> consumer_started(consumers);
  for (auto& a : consumer_started) a.store(0);

  auto produce_item = [&](Slot& slot, uint64_t i) {
    // Every consumer must have finished the previous item in this slot.
    if (i >= static_cast<uint64_t>(Stages)) {
      for (int c = 0; c < consumers; ++c) {
        CHECK(slot.done[c] == i - Stages, "S=%d %s: slot overwritten before consumer %d released "
              "item %llu (done=%llu)", Stages, mode_name(mode), c,
              (unsigned long long)(i - Stages), (unsigned long long)slot.done[c]);
      }
    }
    slot.seq = i;
    for (int k = 0; k < 6; ++k) slot.data[k] = payload_value(i, k);
  };
  auto check_item = [&](const Slot& slot, uint64_t expect, int c, Jitter& jit) {
    CHECK(slot.seq == expect, "S=%d %s: consumer %d expected item %llu, got %llu", Stages,
          mode_name(mode), c, (unsigned long long)expect, (unsigned long long)slot.seq);
    jit();
    for (int k = 0; k < 6; ++k) {
      CHECK(slot.data[k] == payload_value(expect, k), "S=%d %s: data of item %llu", Stages,
            mode_name(mode), (unsigned long long)expect);
    }
    CHECK(slot.seq == expect, "S=%d %s: item %llu changed while consumer %d held it", Stages,
          mode_name(mode), (unsigned long long)expect, c);
  };

  run_threads(1 + consumers, [&](int t) {
    Jitter jit(seed * 1000 + t);
    jp::ProducerConsumerPipeline<Stages, jp::HostBarrier> p(bars.data(), "stress");
    if (t == 0) {  // producer
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        switch (mode) {
          case Mode::Guards:
          case Mode::Explicit: {
            auto stage = p.produce();
            CHECK(stage.index() == i % Stages, "producer stage index");
            produce_item(slots[stage.index()], i);
            jit();
            stage.mbar()->arrive();
            break;  // ~ProduceContext: producer_step
          }
          case Mode::Linear: {
            auto stage = p.acquire_producer();
            produce_item(slots[stage.index()], i);
            stage.mbar()->arrive();
            auto moved = std::move(stage);  // transfer of the obligation
            std::move(moved).release();
            break;
          }
          case Mode::TryWait:
          case Mode::TryWaitAt: {
            const bool ready = p.try_wait_consumer();
            jit();
            p.wait_consumer_if_needed(ready);
            CHECK(p.try_wait_consumer(), "after wait_consumer_if_needed the stage is free");
            produce_item(slots[p.producer_stage()], i);
            p.producer_mbar(p.producer_stage())->arrive();
            p.producer_step();
            break;
          }
          case Mode::SignalAndStep: {
            p.wait_consumer();
            produce_item(slots[p.producer_stage()], i);
            p.producer_signal_and_step();  // wait (passes), arrive on full, step
            break;
          }
          case Mode::Throttle: {
            producer_started.fetch_add(1);
            p.producer_signal_and_step();  // its own wait is what throttles
            if (i >= static_cast<uint64_t>(Stages)) {
              for (int c = 0; c < consumers; ++c) {
                CHECK(consumer_started[c].load() >= i + 1 - Stages,
                      "S=%d throttle: producer passed item %llu before consumer %d released item %llu",
                      Stages, (unsigned long long)i, c, (unsigned long long)(i - Stages));
              }
            }
            break;
          }
        }
      }
    } else {  // consumer c
      const int c = t - 1;
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        switch (mode) {
          case Mode::Guards: {
            auto stage = p.consume();
            check_item(slots[stage.index()], i, c, jit);
            slots[stage.index()].done[c] = i;
            break;  // ~ConsumeContext: arrive + consumer_step
          }
          case Mode::Linear: {
            auto stage = p.acquire_consumer();
            check_item(slots[stage.index()], i, c, jit);
            slots[stage.index()].done[c] = i;
            if (i % 2 == 0) {
              std::move(stage).release();
            } else {
              stage.arrive();
              std::move(stage).release_without_signal();
            }
            break;
          }
          case Mode::Explicit: {
            auto stage = p.consume_explicit();
            check_item(slots[stage.index()], i, c, jit);
            slots[stage.index()].done[c] = i;
            warp.arrive_and_wait();       // all "lanes" done reading
            if (c < arrivers) stage.arrive();  // lane-guarded arrive
            break;  // ~ExplicitConsumeContext: consumer_step only
          }
          case Mode::TryWait: {
            const bool ready = p.try_wait_producer();
            jit();
            p.wait_producer_if_needed(ready);
            const uint32_t s = p.consumer_stage();
            check_item(slots[s], i, c, jit);
            slots[s].done[c] = i;
            p.consumer_mbar(s)->arrive();
            p.consumer_step();
            break;
          }
          case Mode::TryWaitAt: {  // the stage from the item count, as an unrolled loop knows it
            const uint32_t s = static_cast<uint32_t>(i % Stages);
            const bool ready = p.try_wait_producer_at(s);
            jit();
            if (!ready) p.wait_producer_at(s);
            CHECK(p.try_wait_producer_at(s), "after wait_producer_at the stage is full");
            check_item(slots[s], i, c, jit);
            slots[s].done[c] = i;
            p.consumer_mbar(s)->arrive();
            p.consumer_step();
            CHECK(p.consumer_stage() == (i + 1) % Stages, "consumer stage after step");
            break;
          }
          case Mode::SignalAndStep: {
            p.wait_producer();
            const uint32_t s = p.consumer_stage();
            check_item(slots[s], i, c, jit);
            slots[s].done[c] = i;
            p.consumer_signal_and_step();  // wait (passes), arrive on empty, step
            break;
          }
          case Mode::Throttle: {
            consumer_started[c].fetch_add(1);
            p.consumer_signal_and_step();  // waits for the producer's signal of item i
            CHECK(producer_started.load() >= i + 1,
                  "S=%d throttle: consumer %d passed item %llu before the producer signalled it",
                  Stages, c, (unsigned long long)i);
            break;
          }
        }
        consumed[c] += 1;
      }
    }
  });
  for (int c = 0; c < consumers; ++c) {
    CHECK(consumed[c] == static_cast<uint64_t>(items), "consumer %d consumed %llu of %d", c,
          (unsigned long long)consumed[c], items);
  }
  // Every barrier completed exactly items/Stages (+1 for the first stages) phases.
  for (int s = 0; s < Stages; ++s) {
    const uint32_t laps = static_cast<uint32_t>((items - s + Stages - 1) / Stages);
    CHECK(bars[s].completed_phases() == (laps & 0xffffu), "full[%d] phases", s);
    CHECK(bars[Stages + s].completed_phases() == (laps & 0xffffu), "empty[%d] phases", s);
  }
}

template <int Stages>
static void stress_all_modes(uint64_t seed) {
  const int items = rounds(3000);
  stress_pc<Stages>(Mode::Guards, 3, 3, items, seed + 1);
  stress_pc<Stages>(Mode::Linear, 2, 2, items, seed + 2);
  stress_pc<Stages>(Mode::Explicit, 4, 2, items / 2, seed + 3);
  stress_pc<Stages>(Mode::TryWait, 3, 3, items, seed + 4);
  stress_pc<Stages>(Mode::TryWaitAt, 3, 3, items, seed + 7);
  stress_pc<Stages>(Mode::SignalAndStep, 2, 2, items, seed + 5);
  stress_pc<Stages>(Mode::Throttle, 3, 3, items, seed + 6);
}

void test_stress_stages() {
  stress_all_modes<1>(g_seed + 10);
  stress_all_modes<2>(g_seed + 20);
  stress_all_modes<3>(g_seed + 30);
  stress_all_modes<4>(g_seed + 40);
  stress_all_modes<5>(g_seed + 50);
  stress_all_modes<6>(g_seed + 60);
  stress_all_modes<7>(g_seed + 70);
  stress_all_modes<8>(g_seed + 80);
}
