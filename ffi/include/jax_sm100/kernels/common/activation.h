// The activations of the fused bias/activation epilogue, one definition for the GPU
// epilogues and the CPU handlers (JAX_SM100_HD: __host__ __device__ under nvcc, inline
// elsewhere). Computed in fp32 on the fp32 pre-activation z = acc + bias; the FFI
// attribute `activation` carries the enum's value (jax_sm100/_bias.py mirrors it).
#pragma once

#include <math.h>
#include <stdint.h>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::kernels {

enum class Activation : int32_t {
  kNone = 0,
  kRelu = 1,
  kGeluTanh = 2,  ///< 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))): jax.nn.gelu's default
  kGeluErf = 3,   ///< 0.5 z (1 + erf(z / sqrt(2))): jax.nn.gelu(approximate=False)
  kSilu = 4,      ///< z * sigmoid(z): jax.nn.silu
};
inline constexpr int32_t kNumActivations = 5;

#if defined(__CUDA_ARCH__)
/// 2^x and 1 / x on the special-function unit, subnormals flushed (the .ftz forms: one
/// instruction each, where the IEEE forms add a range test and two scalings around it).
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// 1 / (1 + 2^x), i.e. sigmoid(-x ln 2): a few fp32 ulps in both tails (no 1 + tanh
/// cancellation); 0 once 2^x overflows (x >= 128), 1 once it underflows.
__device__ __forceinline__ float sigmoid_of_ex2(float x) { return rcp_ftz(1.f + ex2_ftz(x)); }

/// 1 / (1 + e^-t) (silu's sigmoid).
__device__ __forceinline__ float fast_sigmoid(float t) {
  return sigmoid_of_ex2(-1.4426950408889634f * t);
}

/// The tanh GELU's sigmoid(2 u(z)), u = sqrt(2/pi) (z + 0.044715 z^3), given z and z^2:
/// -2 u log2(e) = z (a + b z^2), one FFMA and one FMUL before the special-function unit.
__device__ __forceinline__ float gelu_tanh_sigmoid(float z, float z2) {
  constexpr float kA = -2.f * 0.7978845608028654f * 1.4426950408889634f;
  constexpr float kB = kA * 0.044715f;
  return sigmoid_of_ex2(z * fmaf(z2, kB, kA));
}
#endif

/// act(z) in fp32. On the host (CPU handlers, the emulator) the library functions; in
/// device code the tanh GELU and silu as z * sigmoid(.) on the special-function unit
/// (0.5 (1 + tanh u) == sigmoid(2 u)): within a few fp32 ulps of the library functions,
/// a fraction of their instructions in the GEMM epilogues, where those functions cost the
/// math warpgroups more than the output's rounding is worth.
template <Activation A>
JAX_SM100_HD float apply_activation(float z) {
  if constexpr (A == Activation::kRelu) {
    return z > 0.f ? z : 0.f;
  } else if constexpr (A == Activation::kGeluTanh) {
#if defined(__CUDA_ARCH__)
    return z * gelu_tanh_sigmoid(z, z * z);
#else
    const float u = 0.7978845608028654f * (z + 0.044715f * z * z * z);
    return 0.5f * z * (1.f + tanhf(u));
#endif
  } else if constexpr (A == Activation::kGeluErf) {
    return 0.5f * z * (1.f + erff(z * 0.7071067811865476f));
  } else if constexpr (A == Activation::kSilu) {
#if defined(__CUDA_ARCH__)
    return z * fast_sigmoid(z);
#else
    return z / (1.f + expf(-z));
#endif
  } else {
    return z;
  }
}

/// apply_activation with the activation chosen at run time (host loops, tests).
JAX_SM100_HD float apply_activation(Activation a, float z) {
  switch (a) {
    case Activation::kRelu: return apply_activation<Activation::kRelu>(z);
    case Activation::kGeluTanh: return apply_activation<Activation::kGeluTanh>(z);
    case Activation::kGeluErf: return apply_activation<Activation::kGeluErf>(z);
    case Activation::kSilu: return apply_activation<Activation::kSilu>(z);
    default: return z;
  }
}

/// act'(z) in fp32: the backward's factor dz = g * act'(z) (the dact epilogue, its CPU
/// handler). relu's derivative is taken as 0 at z == 0 (jax's), and may be read from the
/// output act(z) as well as from z (both are > 0 on the same set). The tanh GELU's is
/// written with s = sigmoid(2 u) (0.5 (1 + tanh u) = s, 1 - tanh(u)^2 = 4 s (1 - s)), on
/// the host too: the tanh form loses the whole value to cancellation in the negative tail
/// (1 + tanh u rounds to 0 in fp32 below z of about -4.5, where act' is still -2e-6).
template <Activation A>
JAX_SM100_HD float activation_grad(float z) {
  if constexpr (A == Activation::kRelu) {
    return z > 0.f ? 1.f : 0.f;
  } else if constexpr (A == Activation::kGeluTanh) {
    constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
#if defined(__CUDA_ARCH__)
    // s + (2 z du/dz) s (1 - s), 2 du/dz = 2 kC (1 + 0.134145 z^2), s (1 - s) as one FFMA
    // (s - s^2, rounded once): eight FP32 instructions and two on the special-function unit.
    const float z2 = z * z;
    const float s = gelu_tanh_sigmoid(z, z2);
    const float two_z_du = z * fmaf(z2, 2.f * kC * 0.134145f, 2.f * kC);
    return fmaf(two_z_du, fmaf(-s, s, s), s);
#else
    const float u = kC * (z + 0.044715f * z * z * z);
    const float du = kC * (1.f + 0.134145f * z * z);  // du/dz
    const float s = 1.f / (1.f + expf(-2.f * u));
    return s + 2.f * z * s * (1.f - s) * du;
#endif
  } else if constexpr (A == Activation::kGeluErf) {
    return 0.5f * (1.f + erff(z * 0.7071067811865476f)) +
           z * expf(-0.5f * z * z) * 0.3989422804014327f;  // 1 / sqrt(2 pi)
  } else if constexpr (A == Activation::kSilu) {
#if defined(__CUDA_ARCH__)
    const float s = fast_sigmoid(z);
    return fmaf(z, fmaf(-s, s, s), s);  // s + z s (1 - s), s (1 - s) as one FFMA
#else
    const float s = 1.f / (1.f + expf(-z));
    return s * (1.f + z * (1.f - s));
#endif
  } else {
    return 1.f;
  }
}

/// activation_grad with the activation chosen at run time (host loops, tests).
JAX_SM100_HD float activation_grad(Activation a, float z) {
  switch (a) {
    case Activation::kRelu: return activation_grad<Activation::kRelu>(z);
    case Activation::kGeluTanh: return activation_grad<Activation::kGeluTanh>(z);
    case Activation::kGeluErf: return activation_grad<Activation::kGeluErf>(z);
    case Activation::kSilu: return activation_grad<Activation::kSilu>(z);
    default: return 1.f;
  }
}

}  // namespace jax_sm100::kernels
