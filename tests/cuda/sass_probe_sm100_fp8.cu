// SASS probe for the sm_100a blockwise FP8 GEMM: the one PTX instruction it adds to the
// bf16 GEMM's set (tests/cuda/sass_probe_sm100.cu), tcgen05.mma.kind::f8f6f4, so that its
// SASS mnemonic is read off the disassembly instead of guessed.
//
// Never launched (no sm_100 machine here): tests/test_sm100_fp8_sass.py compiles this file
// with `nvcc -arch=sm_100a -cubin`, disassembles it with `cuobjdump -sass`, and compares
// probe_f8f6f4_mma with probe_f8f6f4_baseline, which does the same surrounding work
// without the instruction; probe_f16_mma is the kind::f16 form for contrast (the FP8
// kernel must hold the f8f6f4 form and not the f16 one). Operands are kernel parameters
// so that nothing is constant-folded.
#include <cuda/ptx>

#include <cstdint>

namespace ptx = cuda::ptx;

namespace {

struct ProbeSmem {
  alignas(128) uint8_t tile[1024];
  alignas(8) uint64_t bar;
};

__device__ __forceinline__ ProbeSmem& probe_smem() {
  __shared__ ProbeSmem s;
  return s;
}

__device__ __forceinline__ void init_bar(ProbeSmem& s) {
  if (threadIdx.x == 0) ptx::mbarrier_init(&s.bar, 1);
  __syncthreads();
}

}  // namespace

extern "C" {

/// No instruction under test.
__global__ void probe_f8f6f4_baseline(uint32_t* out, uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                      uint32_t idesc, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  out[threadIdx.x] = d_tmem + static_cast<uint32_t>(a_desc + b_desc) + idesc + acc + s.tile[threadIdx.x];
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 1000

/// tcgen05.mma.cta_group::1.kind::f8f6f4 [d_tmem], a_desc, b_desc, idesc, enable_input_d
__global__ void probe_f8f6f4_mma(uint32_t* out, uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                 uint32_t idesc, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_mma(ptx::kind_f8f6f4, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, acc != 0);
  out[threadIdx.x] = d_tmem + s.tile[threadIdx.x];
}

/// tcgen05.mma.cta_group::1.kind::f16 (the bf16 GEMM's form), for contrast.
__global__ void probe_f16_mma(uint32_t* out, uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                              uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_mma(ptx::kind_f16, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, acc != 0);
  out[threadIdx.x] = d_tmem + s.tile[threadIdx.x];
}

#endif

}  // extern "C"
