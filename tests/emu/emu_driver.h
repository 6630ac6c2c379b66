// What every sm_100a kernel emulator test program (tests/emu/sm100_*_emu_test.cc) shares:
// its command line, the debug bound of the pipeline waits, and running a kernel's CTA over
// an emulated grid with the kernel entries' 1024-byte alignment of dynamic shared memory.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "emu/emu_runtime.h"

namespace jax_sm100::emu {

struct TestArgs {
  uint32_t seed = 12345;
  bool quick = false;        ///< the short case list (the planted-fault runs)
  long long wait_ms = 20000;  ///< bound of every wait: a broken protocol fails, never hangs
};

/// Parses `--seed S`, `--quick` and `--wait-ms MS`, prints the seed, bounds every pipeline
/// wait by wait_ms and reports the stage handles a failing thread leaves unreleased as
/// notes of the failure (the run fails anyway) instead of aborting the program.
inline TestArgs start_test(int argc, char** argv) {
  TestArgs a;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) a.seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--quick")) a.quick = true;
    else if (!std::strcmp(argv[i], "--wait-ms") && i + 1 < argc) a.wait_ms = std::atoll(argv[++i]);
  }
  std::printf("seed %u\n", a.seed);
  jax_sm100::pipeline::debug::host_wait_timeout_ms() = a.wait_ms;
  jax_sm100::pipeline::debug::unreleased_handler() = [](const char* pipe, const char* handle, uint32_t stage) {
    std::fprintf(stderr, "note: pipeline '%s': %s for stage %u left unreleased by a failing thread\n", pipe,
                 handle, stage);
  };
  return a;
}

/// Runs `cta(storage)` on every thread of the grid `spec`, the kernel's Storage at the
/// first 1024-aligned byte of the CTA's dynamic shared memory (as the kernel entries align
/// it).
template <class Storage, class Ops, class Cta>
GridResult run_kernel_grid(const GridSpec& spec, Cta&& cta) {
  return run_grid(spec, [&cta] {
    uint8_t* raw = Ops::dynamic_smem();
    const uint32_t pad = (1024 - Ops::smem_u32(raw) % 1024) % 1024;
    cta(*reinterpret_cast<Storage*>(raw + pad));
  });
}

/// Runs a plan's `make_*_params(shape, plan, make_map, &params)` as `make(make_map)` with the
/// emulator's tensor-map model (TensorMap(MapSpec)); "" or the error (the model throws on a
/// map the hardware would refuse).
template <class Make>
std::string make_emu_params(Make&& make) {
  try {
    return make([](const auto& spec, auto, auto* map) {
      *map = std::remove_pointer_t<decltype(map)>(spec);
      return std::string();
    });
  } catch (const std::exception& e) {
    return e.what();
  }
}

/// Unit roundoff of X (half an ulp at 1): f32, f16 or bf16.
template <class X>
double unit_roundoff() {
  if constexpr (std::is_same_v<X, float>) return 1.0 / (1 << 24);
  else if constexpr (std::is_same_v<X, __half>) return 1.0 / (1 << 11);
  else return 1.0 / (1 << 8);
}

/// Fills `v` with n values drawn from U(-r, r) rounded to X; returns them as doubles.
template <class X>
std::vector<double> fill_uniform(std::vector<X>& v, size_t n, std::mt19937& rng, float r = 1.f) {
  std::uniform_real_distribution<float> u(-r, r);
  v.resize(n);
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<X>(u(rng));
    d[i] = static_cast<double>(static_cast<float>(v[i]));
  }
  return d;
}

/// A case label's name of element type X (bf16, f16 or f32).
template <class X>
const char* type_name() {
  if constexpr (std::is_same_v<X, float>) return "f32";
  else if constexpr (std::is_same_v<X, __half>) return "f16";
  else return "bf16";
}

/// Group sizes for a case label: "a,b,c", cut at 40 characters.
inline std::string sizes_label(const std::vector<int32_t>& sizes) {
  std::string out;
  for (int32_t s : sizes) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out.size() > 40 ? out.substr(0, 37) + "..." : out;
}

}  // namespace jax_sm100::emu
