// Thin device wrappers for cluster launch control (Blackwell sm_100): a persistent CTA
// asks the hardware to cancel a not-yet-launched cluster and takes over its work.
//
// COMPILE-ONLY in this project (no sm_100 machine here); bodies exist only for
// __CUDA_ARCH__ >= 1000 and trap elsewhere.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda/ptx>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define JAX_SM100_CLC_BODY(...) __VA_ARGS__
#else
#define JAX_SM100_CLC_BODY(...) __trap()
#endif

namespace jax_sm100::ptx {

/// 16-byte try_cancel response, written asynchronously to shared memory.
struct alignas(16) ClcResponse {
  uint32_t word[4];
};

/// clusterlaunchcontrol.try_cancel: request cancellation of a pending cluster; the
/// 16-byte response is written to `response` and completes 16 tx bytes on `bar`
/// (so arm `bar` with arrive_expect_tx(16) first).
__device__ __forceinline__ void clc_try_cancel(ClcResponse* response, uint64_t* bar) {
  JAX_SM100_CLC_BODY(cuda::ptx::clusterlaunchcontrol_try_cancel(response, bar));
}

/// try_cancel with the response multicast to every CTA of the cluster (sm_100a).
__device__ __forceinline__ void clc_try_cancel_multicast(ClcResponse* response, uint64_t* bar) {
  JAX_SM100_CLC_BODY(cuda::ptx::clusterlaunchcontrol_try_cancel_multicast(response, bar));
}

/// query_cancel.is_canceled: true when the response names a cluster this CTA now owns.
__device__ __forceinline__ bool clc_query_is_canceled(const ClcResponse& response) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  return cuda::ptx::clusterlaunchcontrol_query_cancel_is_canceled(response);
#else
  __trap();
  return false;
#endif
}

/// query_cancel.get_first_ctaid: the first CTA id (x, y, z) of the canceled cluster.
/// Only meaningful when clc_query_is_canceled(response) is true.
__device__ __forceinline__ uint3 clc_query_first_ctaid(const ClcResponse& response) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  uint3 id;
  id.x = cuda::ptx::clusterlaunchcontrol_query_cancel_get_first_ctaid_x<uint32_t>(response);
  id.y = cuda::ptx::clusterlaunchcontrol_query_cancel_get_first_ctaid_y<uint32_t>(response);
  id.z = cuda::ptx::clusterlaunchcontrol_query_cancel_get_first_ctaid_z<uint32_t>(response);
  return id;
#else
  __trap();
  return uint3{0, 0, 0};
#endif
}

}  // namespace jax_sm100::ptx

#undef JAX_SM100_CLC_BODY
#endif  // __CUDACC__
