// Host protocol tests of the pipeline library: the very same templates the kernels use,
// instantiated with HostBarrier (std::atomic model of the mbarrier) and driven by CPU
// threads: one producer, several consumers, Stages 1..8, thousands of rounds with
// random delays. Payloads are plain (non-atomic) memory, so only the pipeline's
// barriers order them: a protocol bug shows up as a wrong sequence number here and as
// a data race under ThreadSanitizer.
//
// This file: the broken-protocol tests (debug builds) and main; the protocol cases are in
// pipeline_host_pc.cc and pipeline_host_tiles.cc, the shared harness in
// pipeline_host_harness.h.
//
// Built and run by tests/test_pipeline_host.py:
//   c++ -std=c++17 -O2 -pthread -I ffi/include [-DJAX_SM100_PIPELINE_DEBUG]
//       pipeline_host_test.cc pipeline_host_pc.cc pipeline_host_tiles.cc -o ...
//   (and with -fsanitize=thread -O1 -g, fewer rounds: --scale 0.1)
// Usage: pipeline_host_test [--scale S] [--seed N] [--only NAME]
// Prints one line per test and "ALL PASSED" / "FAILED: n" last; exit code 0 iff all pass.
#include "pipeline_host_harness.h"

static int g_failures = 0;

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
