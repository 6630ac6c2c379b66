// The one nanobind module of jax_sm100: hands the registration table (targets.h) to
// Python, which registers the CUDA handlers for platform CUDA and the CPU handlers for
// platform cpu, and reports what was compiled.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/numerics.h"
#include "targets.h"

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule handler_capsule(Fn* fn) {
  static_assert(std::is_invocable_r_v<XLA_FFI_Error*, Fn, XLA_FFI_CallFrame*>,
                "FFI handlers take an XLA_FFI_CallFrame*");
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_ffi, m) {
  m.doc() = "jax_sm100 FFI handlers (CUDA kernels and their CPU counterparts) for XLA.";

  m.def("has_cuda", []() { return JAX_SM100_WITH_CUDA != 0; },
        "True when the extension was built with CUDA kernels.");

  m.def("cuda_archs", []() {
        std::vector<std::string> archs;
        std::string csv = JAX_SM100_CUDA_ARCHS;
        size_t start = 0;
        while (start < csv.size()) {
          size_t end = csv.find(',', start);
          if (end == std::string::npos) end = csv.size();
          if (end > start) archs.push_back("sm_" + csv.substr(start, end - start));
          start = end + 1;
        }
        return archs;
      },
      "GPU architectures with machine code in this build, e.g. ['sm_90a', 'sm_100a'].");

  m.def("target_names", []() {
        std::vector<std::string> names;
#define JAX_SM100_NAME(name, symbol, cpu_symbol, sm100) names.push_back(name);
        JAX_SM100_FFI_TARGETS(JAX_SM100_NAME)
#undef JAX_SM100_NAME
        return names;
      },
      "Every FFI target this package defines (also in a build without CUDA).");

  m.def("sm100_targets", []() {
        std::vector<std::string> names;
#if JAX_SM100_WITH_CUDA && defined(JAX_SM100_HAS_SM100) && JAX_SM100_HAS_SM100
#define JAX_SM100_SM100(name, symbol, cpu_symbol, sm100) \
  if (sm100) names.push_back(name);
        JAX_SM100_FFI_TARGETS(JAX_SM100_SM100)
#undef JAX_SM100_SM100
#endif
        return names;
      },
      "Targets whose handlers have an sm_100a kernel in this build (none without sm_100a code).");

  m.def("registrations", []() {
        nb::dict targets;
#if JAX_SM100_WITH_CUDA
#define JAX_SM100_CAPSULE(name, symbol, cpu_symbol, sm100) targets[name] = handler_capsule(&symbol);
        JAX_SM100_FFI_TARGETS(JAX_SM100_CAPSULE)
#undef JAX_SM100_CAPSULE
#endif
        return targets;
      },
      "Map of FFI target name -> handler capsule, for platform CUDA.");

  m.def("cpu_registrations", []() {
        nb::dict targets;
#define JAX_SM100_CPU_CAPSULE(name, symbol, cpu_symbol, sm100) \
  targets[name] = handler_capsule(&cpu_symbol);
        JAX_SM100_FFI_TARGETS(JAX_SM100_CPU_CAPSULE)
#undef JAX_SM100_CPU_CAPSULE
        return targets;
      },
      "Map of FFI target name -> CPU handler capsule, for platform cpu (every build).");

  m.def("cpu_f32_to_e4m3fn", [](nb::bytes f32) {
        const size_t n = f32.size() / 4;
        std::string out(n, '\0');
        const char* p = static_cast<const char*>(f32.data());
        for (size_t i = 0; i < n; ++i) {
          float v;
          std::memcpy(&v, p + 4 * i, 4);
          out[i] = static_cast<char>(jax_sm100::cpu::f32_to_e4m3fn_satfinite(v));
        }
        return nb::bytes(out.data(), out.size());
      },
      "Test hook: the CPU handlers' float32 -> float8_e4m3fn rounding (saturating, "
      "NaN -> 0x7f) of native-endian float32 bytes, one byte per value.");
}
