// Host protocol tests, part 2: InputTilePipeline over the three payloads,
// EpiLoadPipeline and OutputTilePipeline (per tile and per K). See pipeline_host_test.cc.
#include "pipeline_host_harness.h"

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

void test_input_tile_pipeline() {
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

void test_epi_load_pipeline() {
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

void test_output_tile_pipeline() {
  stress_output<1>(2, rounds(2000), g_seed + 300);
  stress_output<2>(3, rounds(3000), g_seed + 301);
  stress_output<4>(2, rounds(2000), g_seed + 302);
  stress_output_per_k<2>(2, rounds(600), g_seed + 303);
  stress_output_per_k<3>(3, rounds(400), g_seed + 304);
}
