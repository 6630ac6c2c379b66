// SASS probe of the PTX instructions the sm_100a MXFP8 GEMM adds to the bf16 GEMM's
// (tests/cuda/sass_probe_sm100.cu has those): one tiny kernel per instruction, so that
// the SASS each becomes can be read off the disassembly (the method of that file: a
// probe minus probe_mx_baseline is its instruction's SASS).
//
// Never launched (no sm_100 machine here): tests/test_sm100_mxfp8_sass.py compiles it
// with `nvcc -gencode arch=compute_100a,code=sm_100a -cubin` and disassembles it. Each
// probe issues one instance of its instruction through the CCCL cuda::ptx wrapper the
// kernel's wrappers use (ptx/sm100/tcgen05_block_scale.cuh, ptx/common/tma.cuh); operand
// values are kernel parameters so that nothing is constant-folded.
#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 1000
#define PROBE_SM100 1
#endif

namespace ptx = cuda::ptx;

namespace {

struct ProbeSmem {
  alignas(128) uint8_t tile[1024];
  alignas(16) uint32_t clc_response[4];
  alignas(8) uint64_t bar;
  uint32_t tmem_slot;
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
__global__ void probe_mx_baseline(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

#ifdef PROBE_SM100

/// tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X
__global__ void probe_tcgen05_mma_mxf8f6f4(uint32_t* out, uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                           uint32_t idesc, uint32_t sfa, uint32_t sfb, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0)
    ptx::tcgen05_mma_block_scale_vec_1x(ptx::kind_mxf8f6f4, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, sfa, sfb,
                                        acc != 0);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.mma.cta_group::1.kind::f8f6f4 (fp8 WITHOUT block scaling): the SASS test must
/// tell it from the block-scaled form.
__global__ void probe_tcgen05_mma_f8f6f4(uint32_t* out, uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                         uint32_t idesc, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_mma(ptx::kind_f8f6f4, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, acc != 0);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s_desc
__global__ void probe_tcgen05_cp_32x128b_warpx4(uint32_t* out, uint32_t taddr, uint64_t s_desc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_cp_32x128b_warpx4(ptx::cta_group_1, taddr, s_desc);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes (plain bulk copy)
__global__ void probe_bulk_copy(uint32_t* out, const uint8_t* src, uint32_t bytes) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, s.tile, src, bytes, &s.bar);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// Every instruction the MXFP8 kernel check requires, in one kernel: the test runs that
/// check on it (it must pass), on the baseline and on probe_mx_trap_stub (they must fail).
__global__ void probe_mx_gemm_like(uint32_t* out, const __grid_constant__ CUtensorMap tmap, const uint8_t* src,
                                   uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc, int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0) {
    ptx::clusterlaunchcontrol_try_cancel(s.clc_response, &s.bar);
    ptx::cp_async_bulk_tensor(ptx::space_shared, ptx::space_global, s.tile, &tmap, coords, &s.bar);
    ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, s.tile + 512, src, 512u, &s.bar);
    ptx::tcgen05_cp_32x128b_warpx4(ptx::cta_group_1, d_tmem + 256, a_desc);
    ptx::tcgen05_mma_block_scale_vec_1x(ptx::kind_mxf8f6f4, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc,
                                        d_tmem + 256, d_tmem + 260, x != 0);
    ptx::tcgen05_commit(ptx::cta_group_1, &s.bar);
  }
  uint32_t r[16];
  ptx::tcgen05_ld_32x32b(r, d_tmem);
  ptx::tcgen05_wait_ld();
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) sum += r[i];
  s.tile[threadIdx.x] = static_cast<uint8_t>(sum);
  __syncthreads();
  if (threadIdx.x == 0) ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &tmap, coords, s.tile);
  out[threadIdx.x] = sum;
}

#endif  // PROBE_SM100

/// A kernel compiled out to a trap.
__global__ void probe_mx_trap_stub(uint32_t* /*out*/, uint32_t /*x*/) { __trap(); }

}  // extern "C"
