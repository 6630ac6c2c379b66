// SASS probe for sm_100a: one tiny kernel per PTX instruction that the Blackwell GEMM
// relies on, so that the SASS mnemonic each instruction becomes can be read off the
// disassembly without guessing.
//
// Never launched (no sm_100 machine here): tests/test_sm100_sass.py compiles this file
// with `nvcc -arch=sm_100a -cubin`, disassembles it with `cuobjdump -sass`, and compares
// the mnemonics of each probe_<instr> kernel with those of probe_baseline, which does
// the same surrounding work (parameter loads, shared-memory addresses, an mbarrier)
// without the instruction under test. What a probe has and the baseline lacks is the
// instruction's SASS; the test asserts the expected names are there, so a toolchain that
// renames them fails the probe test instead of silently weakening the kernel checks.
//
// Each probe issues exactly one instance of its instruction, through CCCL's cuda::ptx
// wrappers (the same ones ffi/include/jax_sm100/ptx/ uses). Operand values are kernel
// parameters so that nothing is constant-folded; the shapes/descriptors need not be
// meaningful, only well-formed PTX.
#include <cuda.h>  // CUtensorMap
#include <cuda/ptx>

#include <cstdint>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 1000
#define PROBE_SM100 1
#endif

namespace ptx = cuda::ptx;

namespace {

// Shared state every probe uses: an mbarrier, a TMEM-address slot, a tile buffer, and
// a try_cancel response. The same in the baseline, so it cancels out of the diff.
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

/// No instruction under test: the mnemonics every probe shares.
__global__ void probe_baseline(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

#ifdef PROBE_SM100

/// tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
__global__ void probe_tcgen05_alloc(uint32_t* out, uint32_t ncols) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x < 32) ptx::tcgen05_alloc(ptx::cta_group_1, &s.tmem_slot, ncols);
  __syncthreads();
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.dealloc.cta_group::1.sync.aligned.b32
__global__ void probe_tcgen05_dealloc(uint32_t* out, uint32_t taddr, uint32_t ncols) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x < 32) ptx::tcgen05_dealloc(ptx::cta_group_1, taddr, ncols);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.mma.cta_group::1.kind::f16 [d_tmem], a_desc, b_desc, idesc, enable_input_d
__global__ void probe_tcgen05_mma_cta1(uint32_t* out, uint32_t d_tmem, uint64_t a_desc,
                                       uint64_t b_desc, uint32_t idesc, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_mma(ptx::kind_f16, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, acc != 0);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.mma.cta_group::2.kind::f16 (the 2-SM form; compiles without a cluster launch)
__global__ void probe_tcgen05_mma_cta2(uint32_t* out, uint32_t d_tmem, uint64_t a_desc,
                                       uint64_t b_desc, uint32_t idesc, uint32_t acc) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_mma(ptx::kind_f16, ptx::cta_group_2, d_tmem, a_desc, b_desc, idesc, acc != 0);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
__global__ void probe_tcgen05_commit(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_commit(ptx::cta_group_1, &s.bar);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

/// tcgen05.ld.sync.aligned.32x32b.x16.b32, then tcgen05.wait::ld (a load is useless
/// without its wait; the wait alone is probe_tcgen05_wait_ld).
__global__ void probe_tcgen05_ld(uint32_t* out, uint32_t taddr) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  uint32_t r[16];
  ptx::tcgen05_ld_32x32b(r, taddr);
  ptx::tcgen05_wait_ld();
  uint32_t sum = s.tmem_slot + s.tile[threadIdx.x];
#pragma unroll
  for (int i = 0; i < 16; ++i) sum += r[i];
  out[threadIdx.x] = sum;
}

/// tcgen05.wait::ld.sync.aligned alone.
__global__ void probe_tcgen05_wait_ld(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  ptx::tcgen05_wait_ld();
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

/// cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes (TMA load)
__global__ void probe_tma_load_3d(uint32_t* out, const __grid_constant__ CUtensorMap tmap, int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0) ptx::cp_async_bulk_tensor(ptx::space_shared, ptx::space_global, s.tile, &tmap, coords, &s.bar);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// cp.async.bulk.tensor.3d ... .cta_group::2 (TMA load completing on the pair's barrier)
__global__ void probe_tma_load_3d_cta2(uint32_t* out, const __grid_constant__ CUtensorMap tmap, int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0)
    ptx::cp_async_bulk_tensor(ptx::space_shared, ptx::space_global, ptx::cta_group_2, s.tile, &tmap, coords, &s.bar);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group (TMA store)
__global__ void probe_tma_store_3d(uint32_t* out, const __grid_constant__ CUtensorMap tmap, int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0) ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &tmap, coords, s.tile);
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128
__global__ void probe_clc_try_cancel(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::clusterlaunchcontrol_try_cancel(s.clc_response, &s.bar);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

// Forms the 2-SM / CLC path may use besides the ones above.

/// tcgen05.commit.cta_group::2 ... multicast::cluster (2-SM MMA: arrive in both CTAs)
__global__ void probe_tcgen05_commit_2cta_multicast(uint32_t* out, uint32_t mask) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::tcgen05_commit_multicast(ptx::cta_group_2, &s.bar, static_cast<uint16_t>(mask));
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.alloc.cta_group::2 (the pair allocates together). dealloc and
/// relinquish_alloc_permit of cta_group::2 disassemble exactly like their ::1 forms.
__global__ void probe_tcgen05_alloc_cta2(uint32_t* out, uint32_t ncols) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x < 32) ptx::tcgen05_alloc(ptx::cta_group_2, &s.tmem_slot, ncols);
  __syncthreads();
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// tcgen05.relinquish_alloc_permit.cta_group::1
__global__ void probe_tcgen05_relinquish(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x < 32) ptx::tcgen05_relinquish_alloc_permit(ptx::cta_group_1);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

/// cp.async.bulk.tensor.3d ... multicast::cluster.cta_group::2 (A/B tile multicast in a pair)
__global__ void probe_tma_load_3d_multicast_cta2(uint32_t* out, const __grid_constant__ CUtensorMap tmap,
                                                 int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0)
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, ptx::cta_group_2, s.tile, &tmap, coords,
                              &s.bar, static_cast<uint16_t>(x));
  out[threadIdx.x] = s.tmem_slot + s.tile[threadIdx.x];
}

/// clusterlaunchcontrol.try_cancel ... multicast::cluster::all (response to every CTA)
__global__ void probe_clc_try_cancel_multicast(uint32_t* out, uint32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  if (threadIdx.x == 0) ptx::clusterlaunchcontrol_try_cancel_multicast(s.clc_response, &s.bar);
  out[threadIdx.x] = s.tmem_slot + x + s.tile[threadIdx.x];
}

/// Every instruction the GEMM check requires, in one kernel: the test runs its check of
/// the shipped sm100_gemm_kernel instantiations on this one (it must pass) and on
/// probe_baseline / probe_trap_stub (they must fail), so the check is exercised before
/// the kernel exists.
__global__ void probe_gemm_like(uint32_t* out, const __grid_constant__ CUtensorMap tmap, uint32_t d_tmem,
                                uint64_t a_desc, uint64_t b_desc, uint32_t idesc, int32_t x) {
  ProbeSmem& s = probe_smem();
  init_bar(s);
  const int32_t coords[3] = {x, x + 1, x + 2};
  if (threadIdx.x == 0) {
    ptx::clusterlaunchcontrol_try_cancel(s.clc_response, &s.bar);
    ptx::cp_async_bulk_tensor(ptx::space_shared, ptx::space_global, s.tile, &tmap, coords, &s.bar);
    ptx::tcgen05_mma(ptx::kind_f16, ptx::cta_group_1, d_tmem, a_desc, b_desc, idesc, x != 0);
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

/// What a kernel compiled for an architecture it has no code for looks like (a body
/// behind `#if __CUDA_ARCH__` that falls back to __trap()): the test's trap-stub
/// definition must classify this as a stub and every probe above as not one.
__global__ void probe_trap_stub(uint32_t* /*out*/, uint32_t /*x*/) { __trap(); }

}  // extern "C"
