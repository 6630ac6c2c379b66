// Device tests of the pipeline library on an sm_90a GPU: a producer warp against
// consumer warps through every pipeline type, thousands of rounds, data and order
// checked on the host against checksums computed independently there.
//
//   pc_*        ProducerConsumerPipeline, Stages 1,2,3,4,8, five modes: guards,
//               linear handles, explicit lane-guarded arrive, try-wait, signal_and_step
//   input_*     InputTilePipeline<BlockwiseFP8TilePayload>: TMA 2D (A) + TMA 3D (B) +
//               bulk copy (A-scales) completing ONE expect_bytes() transaction per stage;
//               consumers: guards / lane-guarded linear handles / try-acquire; drain()
//   epi_load_*  EpiLoadPipeline (producer count 1 = one TMA per stage, consumer 128)
//   output_*    OutputTilePipeline (shared memory stands in for TMEM columns) and the
//               per-K variants (MmaKStage / PerKConsumerStage / EpilogueKContext)
//   cluster_remote_arrive  2-CTA cluster ping-pong through DeviceBarrier::arrive_cluster
//   poll_answers_at_once   try_wait_producer / try_wait_consumer on incomplete phases return
//               false at once (timed), and true once the phase completes
//
// Debug-mode checks (binary built with -DJAX_SM100_PIPELINE_DEBUG):
//   --trap-hang        a consumer that never releases: the producer's bounded wait must
//                      printf the pipeline/stage and trap (the process reports a launch
//                      failure instead of hanging)
//   --trap-unreleased  a linear handle destroyed without release() must trap
//
// This file: the debug-mode trap kernels and main. The cases are in pipeline_device_pc.cu
// (pc_*, cluster_remote_arrive, poll_answers_at_once) and pipeline_device_tiles.cu
// (input_*, epi_load_*, output_*); the shared harness is pipeline_device_harness.cuh.
//
// Usage: pipeline_device_test [--rounds N] [--blocks B] [--seed S] [--only A,B] [--exclude A,B]
//                             [--trap-hang|--trap-unreleased]
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -I ffi/include -o ...
//        pipeline_device_test.cu pipeline_device_pc.cu pipeline_device_tiles.cu
#include "pipeline_device_harness.cuh"

// ------------------------------------------------------------------ debug-mode traps

// A consumer that never releases: the producer fills every stage once, then its bounded
// wait must report "trap_test" and trap.
__global__ void trap_hang_kernel() {
  __shared__ jp::DeviceBarrier bars[4];
  jp::ProducerConsumerPipeline<2> pipe(bars, "trap_test");
  if (threadIdx.x == 0) pipe.init_mbars(1, 32);
  __syncthreads();
  if (threadIdx.x / 32 == 0) {
    if (threadIdx.x == 0) {
      for (int r = 0; r < 3; ++r) {
        auto st = pipe.produce();
        st.mbar()->arrive();
      }
    }
  } else {
    for (int r = 0; r < 2; ++r) {
      auto st = pipe.consume_explicit();  // BUG under test: nobody arrives
    }
  }
}

// A linear handle destroyed without release().
__global__ void trap_unreleased_kernel() {
  __shared__ jp::DeviceBarrier bars[4];
  jp::ProducerConsumerPipeline<2> pipe(bars, "leak_test");
  if (threadIdx.x == 0) {
    pipe.init_mbars(1, 1);
    auto st = pipe.acquire_producer();
    st.mbar()->arrive();
    // BUG under test: no std::move(st).release()
  }
}

int main(int argc, char** argv) {
  Ctx c;
  bool trap_hang = false, trap_unreleased = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) c.rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) c.seed = uint32_t(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) c.blocks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) c.only = argv[++i];
    else if (!std::strcmp(argv[i], "--exclude") && i + 1 < argc) c.exclude = argv[++i];
    else if (!std::strcmp(argv[i], "--trap-hang")) trap_hang = true;
    else if (!std::strcmp(argv[i], "--trap-unreleased")) trap_unreleased = true;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d), rounds %d, blocks %d, seed %u, %s build\n", prop.name, prop.major,
              prop.minor, c.rounds, c.blocks, c.seed,
#if defined(JAX_SM100_PIPELINE_DEBUG)
              "debug"
#else
              "release"
#endif
  );
  std::fflush(stdout);
  if (trap_hang || trap_unreleased) {
#if !defined(JAX_SM100_PIPELINE_DEBUG)
    std::printf("trap modes need a -DJAX_SM100_PIPELINE_DEBUG build\n");
    return 2;
#else
    if (trap_hang) trap_hang_kernel<<<1, 64>>>();
    else trap_unreleased_kernel<<<1, 32>>>();
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    std::printf("TRAP RESULT: launch=%s sync=%s\n", cudaGetErrorName(launch), cudaGetErrorName(sync));
    std::fflush(stdout);
    return sync == cudaSuccess ? 1 : 42;  // 42: the kernel trapped, as it must
#endif
  }

  run_pc_tests(c);
  run_tile_tests(c);
  run_cluster(c);
  run_poll(c);

  if (c.failures) {
    std::printf("FAILED: %d of %d\n", c.failures, c.failures + c.passed);
    return 1;
  }
  std::printf("ALL PASSED (%d tests)\n", c.passed);
  return 0;
}
