// The one nanobind module of jax_sm100: hands the FFI handler capsules to
// Python (jax_sm100/_ffi_registry.py registers them for platform CUDA) and
// reports what was compiled.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "handlers.h"

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
  m.doc() = "jax_sm100 FFI handlers (CUDA kernels registered with XLA).";

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

  m.def("registrations", []() {
        nb::dict targets;
#if JAX_SM100_WITH_CUDA
        targets["jax_sm100_quantize_fp8"] = handler_capsule(&JaxSm100QuantizeFp8);
        targets["jax_sm100_quantize_fp8_dual"] = handler_capsule(&JaxSm100QuantizeFp8Dual);
        targets["jax_sm100_gemm"] = handler_capsule(&JaxSm100Gemm);
        targets["jax_sm100_gemm_residual"] = handler_capsule(&JaxSm100GemmResidual);
        targets["jax_sm100_fp8_gemm"] = handler_capsule(&JaxSm100Fp8Gemm);
        targets["jax_sm100_fp8_gemm_residual"] = handler_capsule(&JaxSm100Fp8GemmResidual);
#endif
        return targets;
      },
      "Map of FFI target name -> handler capsule, for platform CUDA.");
}
