// The C ABI of libjax_sm100_ffi.so: hands the registration table (targets.h) and a few
// facts about the build to Python (jax_sm100/_ffi.py loads it with ctypes), which
// registers the CUDA handlers for platform CUDA and the CPU handlers for platform cpu.
//
// Nothing here uses the Python C API: the XLA FFI contract is itself a C ABI (a handler
// is a plain `XLA_FFI_Error* (*)(XLA_FFI_CallFrame*)`), so one build of this library
// serves every CPython version. Only the jax_sm100_* functions below are exported (the
// build hides everything else); their signatures are the library's ABI, versioned by
// jax_sm100_abi_version(): change any of them, or their meaning, and bump it (the
// Python side refuses a library whose version it does not know).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cpu/numerics.h"
#include "targets.h"

#if JAX_SM100_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#define JAX_SM100_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kAbiVersion = 1;

using Handler = XLA_FFI_Error*(XLA_FFI_CallFrame*);

template <typename Fn>
void* handler_address(Fn* fn) {
  static_assert(std::is_invocable_r_v<XLA_FFI_Error*, Fn, XLA_FFI_CallFrame*>,
                "FFI handlers take an XLA_FFI_CallFrame*");
  return reinterpret_cast<void*>(static_cast<Handler*>(fn));
}

struct Target {
  const char* name;
  void* cuda;  // nullptr in a build without CUDA
  void* cpu;
  bool sm100;  // the table says this target has an sm_100a kernel
};

#if JAX_SM100_WITH_CUDA
#define JAX_SM100_CUDA_ADDRESS(symbol) handler_address(&symbol)
#else
#define JAX_SM100_CUDA_ADDRESS(symbol) nullptr
#endif

#define JAX_SM100_TARGET(name, symbol, cpu_symbol, sm100) \
  Target{name, JAX_SM100_CUDA_ADDRESS(symbol), handler_address(&cpu_symbol), sm100},
const Target kTargets[] = {JAX_SM100_FFI_TARGETS(JAX_SM100_TARGET)};
#undef JAX_SM100_TARGET
#undef JAX_SM100_CUDA_ADDRESS

constexpr int kNumTargets = static_cast<int>(sizeof(kTargets) / sizeof(kTargets[0]));

const Target* target(int i) { return i >= 0 && i < kNumTargets ? &kTargets[i] : nullptr; }

}  // namespace

JAX_SM100_API int jax_sm100_abi_version(void) { return kAbiVersion; }

// 1 when the library was built with the CUDA kernels, 0 otherwise.
JAX_SM100_API int jax_sm100_has_cuda(void) { return JAX_SM100_WITH_CUDA != 0; }

// The CUDA architectures with machine code in this build, comma-separated as CMake
// passed them ("90a,100a"); "" without CUDA.
JAX_SM100_API const char* jax_sm100_cuda_archs(void) { return JAX_SM100_CUDA_ARCHS; }

// The registration table: every target (also in a build without CUDA), by index.
JAX_SM100_API int jax_sm100_num_targets(void) { return kNumTargets; }

JAX_SM100_API const char* jax_sm100_target_name(int i) {
  const Target* t = target(i);
  return t ? t->name : nullptr;
}

// 1 when target i's handler has an sm_100a kernel in this build: the table says it has
// one and the build compiled the sm100 launch units.
JAX_SM100_API int jax_sm100_target_has_sm100(int i) {
#if JAX_SM100_WITH_CUDA && defined(JAX_SM100_HAS_SM100) && JAX_SM100_HAS_SM100
  const Target* t = target(i);
  return t && t->sm100 ? 1 : 0;
#else
  (void)i;
  return 0;
#endif
}

// Target i's CUDA handler (an XLA FFI handler); nullptr without CUDA or out of range.
JAX_SM100_API void* jax_sm100_cuda_handler(int i) {
  const Target* t = target(i);
  return t ? t->cuda : nullptr;
}

// Target i's CPU handler (every build has one); nullptr out of range.
JAX_SM100_API void* jax_sm100_cpu_handler(int i) {
  const Target* t = target(i);
  return t ? t->cpu : nullptr;
}

// Test hook: the CPU handlers' float32 -> float8_e4m3fn rounding (saturating,
// NaN -> 0x7f), n values.
JAX_SM100_API void jax_sm100_cpu_f32_to_e4m3fn(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = jax_sm100::cpu::f32_to_e4m3fn_satfinite(in[i]);
}

// The installed driver's CUDA version (e.g. 12080 for 12.8); 0 when there is no driver,
// the query fails, or the library was built without CUDA. Creates no context.
JAX_SM100_API int jax_sm100_cuda_driver_version(void) {
#if JAX_SM100_WITH_CUDA
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no error behind for the next runtime call
    return 0;
  }
  return version;
#else
  return 0;
#endif
}

// The CUDA runtime version the library was built with and links statically
// (CUDART_VERSION, e.g. 13000); 0 without CUDA.
JAX_SM100_API int jax_sm100_cuda_runtime_version(void) {
#if JAX_SM100_WITH_CUDA
  return CUDART_VERSION;
#else
  return 0;
#endif
}
