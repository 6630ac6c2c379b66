// Common macros and the debug-mode reporting of the pipeline library.
//
// Every pipeline header is usable from plain C++ (g++/clang, for the host protocol
// tests with HostBarrier) and from nvcc (kernels with DeviceBarrier). Functions that
// both sides call are JAX_SM100_HD; device-only instructions sit behind __CUDA_ARCH__.
//
// Debug mode: define JAX_SM100_PIPELINE_DEBUG to make
//   * every pipeline wait bounded: past the bound it reports the pipeline's name, the
//     role and the stage, then traps (device) or throws PipelineError (host), instead
//     of hanging forever;
//   * every linear stage handle destroyed without release() report the leak (device:
//     printf + trap; host: the unreleased-handle handler, which aborts by default).
// Bounds: device JAX_SM100_PIPELINE_DEBUG_TIMEOUT_NS (%globaltimer, default 10 s);
// host debug::host_wait_timeout_ms() (runtime-settable, default 20 s).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define JAX_SM100_HD __host__ __device__ __forceinline__
#define JAX_SM100_DEVICE __device__ __forceinline__
#else
#define JAX_SM100_HD inline
#define JAX_SM100_DEVICE inline
#endif

#ifndef JAX_SM100_PIPELINE_DEBUG_TIMEOUT_NS
#define JAX_SM100_PIPELINE_DEBUG_TIMEOUT_NS 10000000000ull
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace jax_sm100::pipeline {

/// Where a wait happens, for the debug-mode report: pipeline name, role, stage.
struct WaitSite {
  const char* pipeline = "pipeline";  ///< name given to the pipeline's constructor
  const char* role = "wait";          ///< e.g. "producer waits for consumer (empty)"
  uint32_t stage = 0;                 ///< stage index being waited on
};

/// Host-side report of a broken protocol (a bounded wait that ran out, an over-arrival).
class PipelineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace debug {

/// Host bounded-wait limit in milliseconds (debug builds). Tests lower it to catch hangs fast.
inline std::atomic<long long>& host_wait_timeout_ms() {
  static std::atomic<long long> ms{20000};
  return ms;
}

/// Called when a linear stage handle is destroyed without release() (debug builds, host).
using UnreleasedHandler = void (*)(const char* pipeline, const char* handle, uint32_t stage);

inline void default_unreleased_handler(const char* pipeline, const char* handle, uint32_t stage) {
  std::fprintf(stderr,
               "jax_sm100 pipeline '%s': %s for stage %u destroyed without release()\n",
               pipeline, handle, stage);
  std::abort();
}

/// The handler in force; tests swap it to observe the report instead of aborting.
inline std::atomic<UnreleasedHandler>& unreleased_handler() {
  static std::atomic<UnreleasedHandler> h{&default_unreleased_handler};
  return h;
}

inline std::string hang_message(const WaitSite& site, uint32_t phase) {
  return std::string("jax_sm100 pipeline '") + site.pipeline + "': " + site.role + " on stage " +
         std::to_string(site.stage) + " (phase parity " + std::to_string(phase) +
         ") exceeded the debug wait bound; the protocol is broken (e.g. a stage never released)";
}

/// A bounded wait ran out: device prints and traps, host throws PipelineError.
JAX_SM100_HD void report_hang(const WaitSite& site, uint32_t phase) {
#if defined(__CUDA_ARCH__)
  printf("jax_sm100 pipeline '%s': %s on stage %u (phase parity %u) exceeded the debug wait "
         "bound in block (%d,%d,%d) thread %d; trapping\n",
         site.pipeline, site.role, site.stage, phase, (int)blockIdx.x, (int)blockIdx.y,
         (int)blockIdx.z, (int)threadIdx.x);
  __trap();
#else
  throw PipelineError(hang_message(site, phase));
#endif
}

/// A linear stage handle was destroyed without release().
JAX_SM100_HD void report_unreleased(const char* pipeline, const char* handle, uint32_t stage) {
#if defined(__CUDA_ARCH__)
  printf("jax_sm100 pipeline '%s': %s for stage %u destroyed without release() in block (%d,%d,%d) "
         "thread %d; trapping\n",
         pipeline, handle, stage, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z,
         (int)threadIdx.x);
  __trap();
#else
  unreleased_handler().load()(pipeline, handle, stage);
#endif
}

}  // namespace debug
}  // namespace jax_sm100::pipeline
