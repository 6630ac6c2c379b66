// Harness shared by the device tests of the pipeline library (pipeline_device_*.cu):
// CUDA_CHECK, the seeded values producers write and the order-independent checksums the
// host recomputes, the warp layout (one producer warp, kConsumerWarps consumer warps),
// and on the host the run context, record comparison, device buffers and test
// selection. The runners of each case file are declared at the end;
// pipeline_device_test.cu calls them.
#pragma once

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

// ------------------------------------------------------------------ host side

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
inline bool compare(const char* name, const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
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

// Waits for the kernel and checks its records: entry (b * kConsumerWarps + w) * per_block + r
// must be want(b, r) for every block b, consumer warp w and round (or tile) r. Counts the
// test as passed or failed in c.
template <class Want>
void check_records(Ctx& c, const std::string& name, DeviceBuf& buf, int per_block, Want want) {
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> got;
  unsigned errors = 0;
  buf.fetch(got, errors);
  std::vector<uint32_t> expect(got.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (int r = 0; r < per_block; ++r) {
      const uint32_t s = want(b, r);
      for (int w = 0; w < kConsumerWarps; ++w) expect[(size_t(b) * kConsumerWarps + w) * per_block + r] = s;
    }
  }
  if (compare(name.c_str(), got, expect, errors)) ++c.passed; else ++c.failures;
}

// True if `name` contains one of the comma-separated substrings of `list`.
inline bool matches_any(const std::string& list, const std::string& name) {
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

inline bool selected(const Ctx& c, const std::string& name) {
  if (!c.exclude.empty() && matches_any(c.exclude, name)) return false;
  return c.only.empty() || matches_any(c.only, name);
}

// ------------------------------------------------------------------ test runners
// pipeline_device_pc.cu: ProducerConsumerPipeline in every mode, the 2-CTA cluster
// ping-pong and the poll timing.
void run_pc_tests(Ctx& c);
void run_cluster(Ctx& c);
void run_poll(Ctx& c);
// pipeline_device_tiles.cu: InputTilePipeline over TMA, EpiLoadPipeline, OutputTilePipeline.
void run_tile_tests(Ctx& c);
