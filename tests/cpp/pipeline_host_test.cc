// Host protocol tests of the pipeline library: the very same templates the kernels use,
// instantiated with HostBarrier (std::atomic model of the mbarrier) and driven by CPU
// threads: one producer, several consumers, Stages 1..8, thousands of rounds with
// random delays. Payloads are plain (non-atomic) memory, so only the pipeline's
// barriers order them: a protocol bug shows up as a wrong sequence number here and as
// a data race under ThreadSanitizer.
//
// Built and run by tests/test_pipeline_host.py:
//   c++ -std=c++17 -O2 -pthread -I ffi/include [-DJAX_SM100_PIPELINE_DEBUG] ...
//   (and with -fsanitize=thread -O1 -g, fewer rounds: --scale 0.1)
// Usage: pipeline_host_test [--scale S] [--seed N] [--only NAME]
// Prints one line per test and "ALL PASSED" / "FAILED: n" last; exit code 0 iff all pass.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jax_sm100/pipeline/all.h"

namespace jp = jax_sm100::pipeline;

// ---------------------------------------------------------------- tiny test harness
static int g_failures = 0;
static double g_scale = 1.0;
static uint64_t g_seed = 12345;
static std::atomic<int> g_check_failures{0};

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      if (g_check_failures.fetch_add(1) < 20) {                               \
        std::fprintf(stderr, "CHECK failed %s:%d: %s | ", __FILE__, __LINE__, \
                     #cond);                                                  \
        std::fprintf(stderr, __VA_ARGS__);                                    \
        std::fprintf(stderr, "\n");                                           \
      }                                                                       \
    }                                                                         \
  } while (0)

static int rounds(int base) {
  int r = static_cast<int>(base * g_scale);
  return r < 64 ? 64 : r;
}

// Random delays: mostly nothing, sometimes a yield, rarely a short sleep, so the
// threads interleave in many different ways.
struct Jitter {
  std::mt19937_64 rng;
  explicit Jitter(uint64_t seed) : rng(seed) {}
  void operator()() {
    const uint32_t r = static_cast<uint32_t>(rng() % 256);
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 50));
    } else if (r < 24) {
      std::this_thread::yield();
    } else if (r < 48) {
      for (volatile int i = 0; i < static_cast<int>(rng() % 200); ++i) {
      }
    }
  }
};

// Reusable spin barrier among a fixed set of threads: models the warp convergence that
// makes a lane-guarded arrive cover the reads of every lane.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const int gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (gen_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<int> gen_{0};
};

// Run `fn(i)` on n threads. An exception in a worker (a bounded wait that ran out, an
// over-arrival) means the protocol broke and the other threads may be stuck for good:
// report it and end the process at once with a failure.
static void run_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FATAL: thread %d threw: %s\n", i, e.what());
        std::printf("FAILED: protocol broke (thread exception)\n");
        std::fflush(stdout);
        std::_Exit(1);
      }
    });
  }
  for (auto& t : ts) t.join();
}

// ---------------------------------------------------------------- unit tests

static void test_pipeline_state() {
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

static void test_host_barrier_semantics() {
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

constexpr int kMaxConsumers = 8;
struct Slot {
  uint64_t seq;                 // item number written by the producer
  uint64_t data[6];             // f(seq, k)
  uint64_t done[kMaxConsumers]; // last item each consumer finished with (its own entry)
};
static uint64_t payload_value(uint64_t seq, int k) { return seq * 0x9E3779B97F4A7C15ull + k; }

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

static void test_stress_stages() {
  stress_all_modes<1>(g_seed + 10);
  stress_all_modes<2>(g_seed + 20);
  stress_all_modes<3>(g_seed + 30);
  stress_all_modes<4>(g_seed + 40);
  stress_all_modes<5>(g_seed + 50);
  stress_all_modes<6>(g_seed + 60);
  stress_all_modes<7>(g_seed + 70);
  stress_all_modes<8>(g_seed + 80);
}

// ---------------------------------------------------------------- InputTilePipeline

// Fill every tile of `stage` with values derived from item i.
template <class P>
static void fill_a(P& pl, uint32_t s, uint64_t i) {
  for (size_t k = 0; k < sizeof(pl.a[0]) / sizeof(pl.a[0][0]); ++k) pl.a_tile(s)[k] = payload_value(i, int(k));
}
template <class P>
static void fill_b(P& pl, uint32_t s, uint64_t i) {
  for (size_t k = 0; k < sizeof(pl.b[0]) / sizeof(pl.b[0][0]); ++k) pl.b_tile(s)[k] = payload_value(i, 100 + int(k));
}

using StdPayload = jp::StandardTilePayload<uint64_t, uint64_t, 16, 8, 4, 64>;
using Fp8Payload = jp::BlockwiseFP8TilePayload<uint64_t, uint64_t, float, 8, 16, 4, 3, 64, 16>;
using BscPayload = jp::BlockScaledTilePayload<uint64_t, uint64_t, uint32_t, 8, 8, 4, 8, 2, 64, 16>;

template <class P> struct Extra {  // fill / check the scale tiles a payload has
  static void fill(P&, uint32_t, uint64_t) {}
  static bool check(P&, uint32_t, uint64_t) { return true; }
  static uint32_t bytes() { return 0; }
};
template <> struct Extra<Fp8Payload> {
  static void fill(Fp8Payload& p, uint32_t s, uint64_t i) {
    for (int k = 0; k < 4; ++k) p.sfa_tile(s)[k] = float(i % 1000) + k * 0.25f;
  }
  static bool check(Fp8Payload& p, uint32_t s, uint64_t i) {
    for (int k = 0; k < 4; ++k) if (p.sfa_tile(s)[k] != float(i % 1000) + k * 0.25f) return false;
    return true;
  }
  static uint32_t bytes() { return Fp8Payload::sfa_bytes; }
};
template <> struct Extra<BscPayload> {
  static void fill(BscPayload& p, uint32_t s, uint64_t i) {
    for (int k = 0; k < 4; ++k) p.sfa_tile(s)[k] = uint32_t(i * 7 + k);
    for (int k = 0; k < 8; ++k) p.sfb_tile(s)[k] = uint32_t(i * 11 + k);
  }
  static bool check(BscPayload& p, uint32_t s, uint64_t i) {
    for (int k = 0; k < 4; ++k) if (p.sfa_tile(s)[k] != uint32_t(i * 7 + k)) return false;
    for (int k = 0; k < 8; ++k) if (p.sfb_tile(s)[k] != uint32_t(i * 11 + k)) return false;
    return true;
  }
  static uint32_t bytes() { return BscPayload::sfa_bytes + BscPayload::sfb_bytes; }
};

// Producer: the "TMA load warp". It arms the stage with expect_bytes() (one
// arrive_expect_tx for the whole stage), then "the TMA" writes each tile and completes
// its bytes with complete_tx. Every third item the B bytes land before the expect (tx
// goes negative), as can happen with multicast. Consumers: the "MMA warps".
template <class P>
static void stress_input(int consumers, int items, uint64_t seed) {
  constexpr int S = P::kStages;
  CHECK(P::bytes_per_stage == P::a_bytes + P::b_bytes + Extra<P>::bytes(), "bytes per stage");
  std::vector<jp::HostBarrier> bars(2 * S);
  P* tiles = new P;
  std::memset(static_cast<void*>(tiles), 0, sizeof(P));
  {
    jp::InputTilePipeline<P, S, jp::HostBarrier> init(bars.data(), tiles);
    CHECK(init.bytes_per_stage() == P::bytes_per_stage, "pipeline bytes_per_stage");
    init.init_barriers(1, consumers);
  }
  std::vector<std::vector<uint64_t>> done(S, std::vector<uint64_t>(consumers, ~0ull));
  std::atomic<uint64_t> releases{0};

  run_threads(1 + consumers, [&](int t) {
    Jitter jit(seed * 77 + t);
    jp::InputTilePipeline<P, S, jp::HostBarrier> pipe(bars.data(), tiles, "input");
    if (t == 0) {
      auto producer = pipe.producer();
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        auto load = [&](auto& tl) {
          const uint32_t s = tl.stage();
          if (i >= static_cast<uint64_t>(S)) {
            for (int c = 0; c < consumers; ++c) {
              CHECK(done[s][c] == i - S, "input: stage %u refilled before consumer %d released", s, c);
            }
          }
          if (i % 3 == 0) {  // B lands first: tx goes negative until expect_bytes()
            fill_b(tl.payload(), s, i);
            tl.mbar()->complete_tx(P::b_bytes);
            jit();
            CHECK(tl.expect_bytes() == P::bytes_per_stage, "expect_bytes returns the stage bytes");
          } else {
            CHECK(tl.expect_bytes() == P::bytes_per_stage, "expect_bytes returns the stage bytes");
            fill_b(tl.payload(), s, i);
            tl.barrier()->complete_tx(P::b_bytes);
          }
          jit();
          fill_a(tl.payload(), s, i);
          Extra<P>::fill(tl.payload(), s, i);
          tl.mbar()->complete_tx(P::a_bytes + Extra<P>::bytes());
        };
        switch (i % 3) {
          case 0: {
            auto tl = producer.acquire();  // ProducerTiles guard: exit steps
            load(tl);
            break;
          }
          case 1: {
            auto tl = producer.acquire_stage();  // InputProducerStage: linear
            load(tl);
            std::move(tl).release();
            break;
          }
          default: {
            const bool ready = producer.try_acquire();
            jit();
            auto tl = producer.acquire_if_needed(ready);
            load(tl);
            break;
          }
        }
      }
      producer.drain();  // the tail: every stage released by every consumer
      CHECK(releases.load() == static_cast<uint64_t>(items) * consumers,
            "after drain() all %d x %d releases happened (saw %llu)", items, consumers,
            (unsigned long long)releases.load());
    } else {
      const int c = t - 1;
      auto consumer = pipe.consumer();
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        auto use = [&](auto& tl) {
          const uint32_t s = tl.index();
          CHECK(s == i % S, "input consumer stage");
          bool ok = true;
          for (int k = 0; k < 16 && k < int(sizeof(tiles->a[0]) / 8); ++k) ok &= tl.a_tile()[k] == payload_value(i, k);
          for (int k = 0; k < int(sizeof(tiles->b[0]) / 8); ++k) ok &= tl.b_tile()[k] == payload_value(i, 100 + k);
          ok &= Extra<P>::check(tl.payload(), s, i);
          CHECK(ok, "input: consumer %d saw wrong tiles for item %llu", c, (unsigned long long)i);
          jit();
          done[s][c] = i;
          releases.fetch_add(1);
        };
        switch ((i + c) % 3) {
          case 0: {
            auto tl = consumer.acquire();  // ConsumerTiles guard: exit arrives + steps
            use(tl);
            break;
          }
          case 1: {
            auto tl = consumer.acquire_stage();  // InputConsumerStage: linear
            use(tl);
            if (i % 2) {
              std::move(tl).release();
            } else {
              tl.arrive();
              std::move(tl).release_without_signal();
            }
            break;
          }
          default: {
            const bool ready = consumer.try_acquire();
            auto tl = consumer.acquire_if_needed(ready);
            use(tl);
            break;
          }
        }
      }
    }
  });
  delete tiles;
}

static void test_input_tile_pipeline() {
  stress_input<StdPayload>(2, rounds(3000), g_seed + 100);
  stress_input<Fp8Payload>(3, rounds(2000), g_seed + 101);
  stress_input<BscPayload>(1, rounds(2000), g_seed + 102);
}

// ---------------------------------------------------------------- EpiLoadPipeline

// Epilogue-load "warp" -> 4 epilogue "warps" of 32 lanes: consumer arrive count 128 as
// in the seed, each consumer thread arrives with arrive(32) for its warp; the producer
// is one TMA transaction per stage (arrive count 1).
template <int Stages>
static void stress_epi_load(int items, uint64_t seed) {
  constexpr int kWarps = 4;
  std::vector<jp::HostBarrier> bars(2 * Stages);
  std::vector<Slot> slots(Stages);
  for (auto& s : slots) std::memset(&s, 0xff, sizeof(s));
  {
    jp::EpiLoadPipeline<Stages, jp::HostBarrier> init(bars.data());
    init.init_barriers();  // defaults: producer 1, consumer 128
  }
  run_threads(1 + kWarps, [&](int t) {
    Jitter jit(seed * 13 + t);
    jp::EpiLoadPipeline<Stages, jp::HostBarrier> epi(bars.data());
    if (t == 0) {
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        auto write = [&](uint32_t s) {
          if (i >= static_cast<uint64_t>(Stages)) {
            for (int w = 0; w < kWarps; ++w) CHECK(slots[s].done[w] == i - Stages, "epi_load overwrite");
          }
          slots[s].seq = i;
          for (int k = 0; k < 6; ++k) slots[s].data[k] = payload_value(i, k);
        };
        if (i % 3 == 0) {
          auto stage = epi.produce();
          epi.producer_mbar()->arrive_expect_tx(48);  // the one TMA transaction of the C tile
          write(stage.index());
          stage.mbar()->complete_tx(48);
        } else if (i % 3 == 1) {
          auto stage = epi.acquire_producer();
          stage.mbar()->arrive_expect_tx(48);
          write(stage.index());
          stage.mbar()->complete_tx(48);
          std::move(stage).release();
        } else {
          epi.wait_consumer();
          const uint32_t s = epi.producer_stage();
          epi.producer_mbar()->arrive_expect_tx(48);
          write(s);
          epi.producer_mbar()->complete_tx(48);
          epi.producer_step();
        }
      }
    } else {
      const int w = t - 1;
      for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
        jit();
        auto read = [&](uint32_t s) {
          CHECK(slots[s].seq == i, "epi_load: warp %d expected C tile %llu", w, (unsigned long long)i);
          for (int k = 0; k < 6; ++k) CHECK(slots[s].data[k] == payload_value(i, k), "epi_load data");
          slots[s].done[w] = i;
        };
        switch ((i + w) % 3) {
          case 0: {  // explicit: the warp's 32 lanes arrive through one arrive(32)
            auto stage = epi.consume_explicit();
            read(stage.index());
            stage.mbar()->arrive(32);
            break;
          }
          case 1: {
            auto stage = epi.acquire_consumer();
            read(stage.index());
            stage.mbar()->arrive(32);
            std::move(stage).release_without_signal();
            break;
          }
          default: {
            epi.wait_producer();
            const uint32_t s = epi.consumer_stage();
            read(s);
            epi.consumer_mbar()->arrive(32);
            epi.consumer_step();
            break;
          }
        }
      }
    }
  });
}

// consume() (arrive + step) with 3 consumer threads and arrive count 3.
static void test_epi_load_consume_guard(int items, uint64_t seed) {
  constexpr int Stages = 2;
  std::vector<jp::HostBarrier> bars(2 * Stages);
  std::vector<uint64_t> slot(Stages, ~0ull);
  { jp::EpiLoadPipeline<Stages, jp::HostBarrier>(bars.data()).init_barriers(1, 3); }
  run_threads(4, [&](int t) {
    Jitter jit(seed + t);
    jp::EpiLoadPipeline<Stages, jp::HostBarrier> epi(bars.data());
    for (uint64_t i = 0; i < static_cast<uint64_t>(items); ++i) {
      jit();
      if (t == 0) {
        auto st = epi.produce();
        slot[st.index()] = i;
        st.mbar()->arrive();
      } else {
        auto st = epi.consume();
        CHECK(slot[st.index()] == i, "epi consume guard order");
      }
    }
  });
}

static void test_epi_load_pipeline() {
  stress_epi_load<1>(rounds(2000), g_seed + 200);
  stress_epi_load<2>(rounds(3000), g_seed + 201);
  stress_epi_load<4>(rounds(2000), g_seed + 202);
  test_epi_load_consume_guard(rounds(3000), g_seed + 203);
}

// ---------------------------------------------------------------- OutputTilePipeline

// MMA "warp" -> epilogue threads through accumulator stages. The accumulator of stage
// s lives at tmem_offset(s) in a fake TMEM array; the MMA side signals with one arrive
// (a tcgen05.commit on sm_100).
template <int Stages>
static void stress_output(int epilogue_threads, int tiles, uint64_t seed) {
  constexpr uint32_t kBase = 1000, kStride = 64;
  std::vector<jp::HostBarrier> bars(2 * Stages);
  std::vector<uint64_t> tmem(kBase + Stages * kStride, ~0ull);
  { jp::OutputTilePipeline<Stages, jp::HostBarrier>(bars.data(), kBase, kStride).init_barriers(1, epilogue_threads); }
  run_threads(1 + epilogue_threads, [&](int t) {
    Jitter jit(seed + t);
    jp::OutputTilePipeline<Stages, jp::HostBarrier> out(bars.data(), kBase, kStride);
    for (uint64_t i = 0; i < static_cast<uint64_t>(tiles); ++i) {
      jit();
      if (t == 0) {
        auto mma = [&](auto& st) {
          CHECK(st.tmem_offset() == kBase + st.index() * kStride, "tmem offset of stage");
          CHECK(st.stage().tmem_offset() == st.tmem_offset() && st.stage().pipeline != nullptr, "OutputStage view");
          for (uint32_t k = 0; k < kStride; ++k) tmem[st.tmem_offset() + k] = payload_value(i, int(k));
          st.mbar()->arrive();  // the commit
        };
        if (i % 2) {
          auto st = out.producer();  // OutputProducer guard: exit steps
          mma(st);
        } else {
          auto st = out.acquire_mma_stage();  // MmaStage: linear
          mma(st);
          std::move(st).release();
        }
      } else {
        auto epi = [&](auto& st) {
          bool ok = true;
          for (uint32_t k = 0; k < kStride; ++k) ok &= tmem[st.tmem_offset() + k] == payload_value(i, int(k));
          CHECK(ok, "output: epilogue %d saw a wrong accumulator for tile %llu", t, (unsigned long long)i);
        };
        if ((i + t) % 2) {
          auto st = out.consumer();  // OutputConsumer guard: exit arrives + steps
          epi(st);
        } else {
          auto st = out.acquire_epilogue_stage();  // EpilogueStage: linear
          epi(st);
          if (i % 4 == 0) {
            std::move(st).release();
          } else {
            st.arrive();
            std::move(st).release_without_signal();
          }
        }
      }
    }
  });
}

// Blockwise FP8 per-K: for each output tile the MMA side produces kK partial
// accumulators through the per-K view; the epilogue scales each partial by its K block's
// scale and accumulates; the final sum is checked against the closed form.
template <int Stages>
static void stress_output_per_k(int epilogue_threads, int tiles, uint64_t seed) {
  constexpr int kK = 5;
  constexpr uint32_t kStride = 8;
  std::vector<jp::HostBarrier> bars(2 * Stages);
  std::vector<double> tmem(Stages * kStride, -1.0);
  { jp::OutputTilePipeline<Stages, jp::HostBarrier>(bars.data(), 0, kStride).init_barriers(1, 1); }
  // Explicit arrive: only epilogue thread 0 arrives (consumer arrive count 1), after
  // all epilogue threads finished reading (warp convergence stand-in).
  SpinBarrier warp(epilogue_threads);
  run_threads(1 + epilogue_threads, [&](int t) {
    Jitter jit(seed + t);
    jp::OutputTilePipeline<Stages, jp::HostBarrier> out(bars.data(), 0, kStride);
    auto per_k = out.per_k();
    for (uint64_t i = 0; i < static_cast<uint64_t>(tiles); ++i) {
      double acc[kStride] = {};
      for (int k = 0; k < kK; ++k) {
        jit();
        if (t == 0) {
          auto st = per_k.acquire_mma_k();  // MmaKStage: linear
          for (uint32_t e = 0; e < kStride; ++e) tmem[st.tmem_offset() + e] = double(i + 1) * (k + 1) + e;
          st.mbar()->arrive();
          std::move(st).release();
        } else if ((i + k) % 3 == 0) {
          auto st = per_k.consume_k_explicit();  // PerKConsumerStage: explicit arrive
          for (uint32_t e = 0; e < kStride; ++e) acc[e] += 0.5 * tmem[st.tmem_offset() + e];
          warp.arrive_and_wait();
          if (t == 1) st.arrive();
        } else if ((i + k) % 3 == 1) {
          auto st = per_k.acquire_epilogue_k();  // EpilogueKStage: linear
          for (uint32_t e = 0; e < kStride; ++e) acc[e] += 0.5 * tmem[st.tmem_offset() + e];
          warp.arrive_and_wait();
          if (t == 1) {
            std::move(st).release();
          } else {
            std::move(st).release_without_signal();
          }
        } else if (t == 1) {
          // EpilogueKContext: exit arrives + steps; it exits after the other threads'
          // reads (warp convergence stand-in), so its one arrival covers them.
          auto st = per_k.epilogue_k();
          for (uint32_t e = 0; e < kStride; ++e) acc[e] += 0.5 * tmem[st.tmem_offset() + e];
          warp.arrive_and_wait();
        } else {
          auto st = per_k.consume_k_explicit();
          for (uint32_t e = 0; e < kStride; ++e) acc[e] += 0.5 * tmem[st.tmem_offset() + e];
          warp.arrive_and_wait();
        }
      }
      if (t != 0) {
        for (uint32_t e = 0; e < kStride; ++e) {
          double expect = 0;
          for (int k = 0; k < kK; ++k) expect += 0.5 * (double(i + 1) * (k + 1) + e);
          CHECK(acc[e] == expect, "per-K: tile %llu element %u: %f vs %f", (unsigned long long)i, e, acc[e], expect);
        }
      }
    }
  });
}

static void test_output_tile_pipeline() {
  stress_output<1>(2, rounds(2000), g_seed + 300);
  stress_output<2>(3, rounds(3000), g_seed + 301);
  stress_output<4>(2, rounds(2000), g_seed + 302);
  stress_output_per_k<2>(2, rounds(600), g_seed + 303);
  stress_output_per_k<3>(3, rounds(400), g_seed + 304);
}

// ---------------------------------------------------------------- broken protocols

#if defined(JAX_SM100_PIPELINE_DEBUG)
// A consumer that never releases: the producer's bounded wait must report it (naming
// the pipeline, the role and the stage) instead of hanging.
static void test_broken_consumer_never_releases() {
  constexpr int Stages = 3;
  const long long old = jp::debug::host_wait_timeout_ms().exchange(300);
  std::vector<jp::HostBarrier> bars(2 * Stages);
  { jp::ProducerConsumerPipeline<Stages, jp::HostBarrier>(bars.data(), "broken_input").init_mbars(1, 1); }
  std::string report;
  int produced = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread producer([&] {
    jp::ProducerConsumerPipeline<Stages, jp::HostBarrier> p(bars.data(), "broken_input");
    try {
      for (int i = 0; i < 100; ++i) {
        auto st = p.produce();
        st.mbar()->arrive();
        ++produced;
      }
    } catch (const jp::PipelineError& e) {
      report = e.what();
    }
  });
  std::thread consumer([&] {
    jp::ProducerConsumerPipeline<Stages, jp::HostBarrier> p(bars.data(), "broken_input");
    for (int i = 0; i < Stages; ++i) {
      auto st = p.consume_explicit();  // BUG under test: never arrives on empty
    }
  });
  producer.join();
  consumer.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  jp::debug::host_wait_timeout_ms().store(old);
  CHECK(produced == Stages, "the producer fills every stage once, then must stop (produced %d)", produced);
  CHECK(report.find("broken_input") != std::string::npos, "report names the pipeline: '%s'", report.c_str());
  CHECK(report.find("producer waits for consumer") != std::string::npos, "report names the role: '%s'", report.c_str());
  CHECK(report.find("stage 0") != std::string::npos, "report names the stage: '%s'", report.c_str());
  CHECK(secs < 10.0, "detected within the bound (took %.2f s)", secs);
  std::printf("  broken protocol reported after %.2f s: %s\n", secs, report.c_str());
}

// A producer that never signals: the consumer's bounded wait reports it.
static void test_broken_producer_never_signals() {
  const long long old = jp::debug::host_wait_timeout_ms().exchange(200);
  std::vector<jp::HostBarrier> bars(4);
  jp::EpiLoadPipeline<2, jp::HostBarrier> epi(bars.data());
  epi.init_barriers(1, 1);
  { auto st = epi.produce(); }  // BUG under test: no arrive / TMA on full
  std::string report;
  try {
    auto st = epi.consume();
  } catch (const jp::PipelineError& e) {
    report = e.what();
  }
  jp::debug::host_wait_timeout_ms().store(old);
  CHECK(report.find("epi_load") != std::string::npos &&
            report.find("consumer waits for producer") != std::string::npos,
        "report: '%s'", report.c_str());
}

// A linear handle dropped without release() is reported with pipeline, handle, stage.
static std::string g_unreleased;
static void record_unreleased(const char* pipeline, const char* handle, uint32_t stage) {
  g_unreleased = std::string(pipeline) + "/" + handle + "/" + std::to_string(stage);
}
static void test_unreleased_handle_reported() {
  std::vector<jp::HostBarrier> bars(4);
  jp::ProducerConsumerPipeline<2, jp::HostBarrier> p(bars.data(), "leaky");
  p.init_mbars(1, 1);
  auto old = jp::debug::unreleased_handler().exchange(&record_unreleased);
  g_unreleased.clear();
  { auto st = p.acquire_producer(); st.mbar()->arrive(); }  // BUG under test: no release
  CHECK(g_unreleased == "leaky/ProducerStage/0", "producer handle leak: '%s'", g_unreleased.c_str());
  g_unreleased.clear();
  { auto st = p.acquire_consumer(); }  // BUG under test
  CHECK(g_unreleased == "leaky/ConsumerStage/0", "consumer handle leak: '%s'", g_unreleased.c_str());
  g_unreleased.clear();
  {
    auto st = p.acquire_consumer();  // still stage 0: the leaked handle never stepped
    auto moved = std::move(st);
    std::move(moved).release();
  }
  CHECK(g_unreleased.empty(), "a moved-from handle owes nothing: '%s'", g_unreleased.c_str());
  jp::debug::unreleased_handler().store(old);
}
#endif

// ---------------------------------------------------------------- main

int main(int argc, char** argv) {
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--scale") && i + 1 < argc) g_scale = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  }
  std::vector<std::pair<const char*, void (*)()>> tests = {
      {"pipeline_state", test_pipeline_state},
      {"host_barrier_semantics", test_host_barrier_semantics},
      {"stress_stages_1_to_8", test_stress_stages},
      {"input_tile_pipeline", test_input_tile_pipeline},
      {"epi_load_pipeline", test_epi_load_pipeline},
      {"output_tile_pipeline", test_output_tile_pipeline},
#if defined(JAX_SM100_PIPELINE_DEBUG)
      {"broken_consumer_never_releases", test_broken_consumer_never_releases},
      {"broken_producer_never_signals", test_broken_producer_never_signals},
      {"unreleased_handle_reported", test_unreleased_handle_reported},
#endif
  };
#if defined(JAX_SM100_PIPELINE_DEBUG)
  // A hang anywhere fails within 10 s instead of the 20 s default.
  jp::debug::host_wait_timeout_ms().store(10000);
  std::printf("debug build (bounded waits), scale %.3f, seed %llu\n", g_scale, (unsigned long long)g_seed);
#else
  std::printf("release build, scale %.3f, seed %llu\n", g_scale, (unsigned long long)g_seed);
#endif
  for (auto& [name, fn] : tests) {
    if (!only.empty() && only != name) continue;
    const int before = g_check_failures.load();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      fn();
    } catch (const std::exception& e) {
      CHECK(false, "%s threw: %s", name, e.what());
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int failed = g_check_failures.load() - before;
    std::printf("%s %s (%.2f s)\n", failed ? "FAIL" : "PASS", name, secs);
    std::fflush(stdout);
    if (failed) ++g_failures;
  }
  if (g_failures) {
    std::printf("FAILED: %d\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED\n");
  return 0;
}
