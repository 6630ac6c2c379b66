// The one seam between the sm_100a kernels and the machine they run on.
//
// Every role function of the Blackwell kernels (kernels/sm100/gemm_roles.h) is a
// template over an `Ops` class with the static members below, and calls the hardware
// only through them. Two classes provide them:
//   * DeviceOps (kernels/sm100/device_ops.cuh): thin calls into the PTX wrappers
//     (ptx/common, ptx/sm100), compiled for sm_100a;
//   * EmuOps (tests/emu/emu_ops.h): a CPU model of the same PTX semantics, so the
//     kernel's own role functions run on host threads (one std::thread per CUDA thread).
// Nothing else differs: the kernel source is compiled once per Ops, never copied.
//
// Required members (all static; "warp-wide" = every lane of the warp calls it):
//
//   using Barrier   -- pipeline::DeviceBarrier / pipeline::HostBarrier
//   using TensorMap -- CUtensorMap / emu::TensorMap (rank-3 tiled map, see below)
//
//   Identity
//   uint32_t thread_idx()            threadIdx.x in the CTA
//   uint32_t cta_rank()              %cluster_ctarank (0 or 1 here; clusters are (c,1,1))
//   uint32_t cluster_idx()           blockIdx.x / cluster size: the launch's own work item
//   bool     elect_one()             warp-wide; true in exactly one lane (elect.sync)
//
//   Synchronisation
//   void sync_cta()                  __syncthreads()
//   void cluster_sync()              barrier.cluster.arrive.release + wait.acquire (all threads)
//   void named_sync(uint32_t id, uint32_t nthreads)   bar.sync id, nthreads
//   void sync_warp()                 __syncwarp()
//   template <class T> T* peer(T* p, uint32_t rank)
//                                    the object at p's shared-memory offset in cluster CTA
//                                    `rank` (mapa); only for Barrier* arrivals
//   void arrive_remote(Barrier* b, uint32_t rank)   one arrival on peer(b, rank)
//
//   TMA (coordinates in elements, innermost first: c0 inner, c1 rows, c2 batch)
//   void prefetch_map(const TensorMap*)
//   void tma_load(void* smem, const TensorMap*, Barrier* bar, int c0, int c1, int c2)
//        box -> this CTA's smem, completes the box's bytes (zero fill included) on bar
//   void tma_load_pair(void* smem, const TensorMap*, Barrier* bar, int c0, int c1, int c2)
//        2-SM form (.cta_group::2): data -> this CTA's smem, tx -> the pair leader's
//        (even rank's) barrier at bar's offset
//   void tma_store(const TensorMap*, const void* smem, int c0, int c1, int c2)
//   void tma_store_commit()          cp.async.bulk.commit_group
//   void tma_store_wait_read_1()     cp.async.bulk.wait_group.read 1
//   void tma_store_wait_all()        cp.async.bulk.wait_group 0
//   void fence_async_shared()        fence.proxy.async.shared::cta
//
//   Shared-memory addresses inside descriptors
//   uint32_t smem_u32(const void* p) the 32-bit shared::cta address (descriptor start)
//
//   TMEM (address: lane << 16 | column; 128 lanes x 512 32-bit columns per CTA)
//   void tmem_alloc(uint32_t* dst_smem, uint32_t ncols, bool pair)    warp-wide
//   void tmem_relinquish(bool pair)                                   warp-wide
//   void tmem_dealloc(uint32_t taddr, uint32_t ncols, bool pair)      warp-wide
//   void tmem_load_32x32b_x16(uint32_t taddr, uint32_t (&v)[16])      warp-wide; thread
//        `lane` of the warp reads TMEM lane (taddr >> 16) + lane, columns
//        (taddr & 0xffff) .. +15; warp w may only touch lanes 32*(w%4) .. +31
//   void tmem_wait_ld()
//   void tcgen05_fence_before()      tcgen05.fence::before_thread_sync
//   void tcgen05_fence_after()       tcgen05.fence::after_thread_sync
//
//   UMMA (issued by one thread)
//   void umma_f16(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
//                 bool accumulate, bool pair)
//        tcgen05.mma.cta_group::{1,2}.kind::f16; asynchronous: it reads shared memory and
//        writes TMEM some time before the issuing thread's next tcgen05.commit completes
//   void umma_f8f6f4(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
//                    bool accumulate)
//        [blockwise FP8 GEMM] tcgen05.mma.cta_group::1.kind::f8f6f4: 8-bit operands
//        (formats in idesc, ptx::make_umma_idesc_f8f6f4), K = 32; asynchronous as above.
//        In DeviceOps; on the emulator in EmuFp8Ops (tests/emu/emu_fp8_ops.h)
//   void umma_commit(Barrier* bar)                   cta_group::1, arrive::one on bar
//   void umma_commit_pair(Barrier* bar, uint16_t cta_mask)
//        cta_group::2 multicast: one arrival on bar's offset in every CTA of cta_mask
//
//   Cluster launch control
//   struct ClcResponse (16 bytes, alignas(16))
//   void clc_try_cancel(ClcResponse* resp, Barrier* bar, bool multicast)
//        asynchronously writes the response (to every CTA of the cluster when multicast,
//        at resp's offset) and completes 16 tx bytes on bar (each CTA's)
//   bool clc_decode(const ClcResponse&, uint32_t* first_cta_x)
//        true and the canceled cluster's first CTA x id, or false: no more work
//
//   The activation-backward epilogue (gemm_dact_roles.h: column sums across the rows
//   that the epilogue threads hold) needs two more, in DeviceOps and EmuOps:
//   float shfl_xor(float v, uint32_t lane_mask)
//        warp-wide (all 32 lanes): lane l returns lane (l ^ lane_mask)'s v
//        (__shfl_xor_sync with the full mask)
//   void red_add_f32(float* gmem, float v)
//        *gmem += v as one atomic reduction in global memory (red.global.add.f32)
//
//   The MXFP8 block-scaled GEMM (mx_gemm_roles.h) needs three more, provided by
//   MxDeviceOps (mx_device_ops.cuh) and the emulator's EmuMxOps (tests/emu/emu_mx_ops.h):
//   void bulk_load(void* smem, const void* gmem, uint32_t bytes, Barrier* bar)
//        cp.async.bulk global -> shared (16-byte aligned, bytes % 16 == 0), completing
//        `bytes` tx on bar
//   void tmem_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc)
//        tcgen05.cp.cta_group::1.32x128b.warpx4 (one thread): 32 rows x 16 bytes from the
//        matrix sdesc describes into TMEM lanes 0..31 of all four lane partitions,
//        columns taddr..taddr+3; asynchronous, ordered before the thread's later UMMA,
//        tracked by its next tcgen05.commit
//   void umma_mx(uint32_t tmem_d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
//                uint32_t tmem_sfa, uint32_t tmem_sfb, bool accumulate)
//        tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X (one thread;
//        M = 128, K = 32): UE8M0 scales read from TMEM at tmem_sfa / tmem_sfb, the bytes
//        idesc's scale IDs select (ptx/sm100/tcgen05_block_scale.cuh); asynchronous
#pragma once
