// JAX_SM100_ROLE: how the sm_100a kernels' role functions (and the helpers they call)
// are declared: __device__ __forceinline__ under nvcc, so every role inlines into its
// kernel; plain inline for the host compiler, which builds the same source with the CPU
// emulator's Ops (tests/emu).
#pragma once

#if defined(__CUDACC__)
#define JAX_SM100_ROLE __device__ __forceinline__
#else
#define JAX_SM100_ROLE inline
#endif
