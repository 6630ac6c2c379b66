// Facts about the current CUDA device that the FFI launchers size their grids by.
#pragma once

#include <cuda_runtime.h>

namespace jax_sm100::host {

/// Number of SMs of the current device, queried once per process (132, an H100 SXM's
/// count, if the query fails; the launchers only use it to size persistent grids).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
      return v;
    cudaGetLastError();  // clear the sticky error of the failed query
    return 132;
  }();
  return n;
}

}  // namespace jax_sm100::host
