// The one launch path of the persistent GEMM kernels: raise the kernel's dynamic shared
// memory limit once, size the persistent grid in whole clusters from the number of work
// units and the (cached) occupancy query, and launch with or without the cluster
// attribute. Host-only; the kernel is a template argument so that the once-per-kernel
// state lives in one static per kernel instantiation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace jax_sm100::host {

/// How a kernel whose clusters are a single CTA is launched.
enum class SingleCtaLaunch {
  /// <<<>>> without a cluster attribute (the cheaper path for microsecond kernels), the
  /// grid capped at one CTA per SM without asking the occupancy API.
  kPlain,
  /// cudaLaunchKernelEx with a cluster dimension of 1, the grid capped by the occupancy
  /// query like any other cluster size.
  kClusterOfOne,
};

/// One launch of a persistent kernel: its block, shared memory, cluster and work.
struct PersistentLaunch {
  int cluster = 1;          ///< CTAs per cluster (along x)
  unsigned threads = 0;     ///< threads per CTA
  unsigned smem_bytes = 0;  ///< dynamic shared memory of this launch
  int smem_limit = 0;       ///< the kernel's dynamic shared memory limit (set once)
  int64_t units = 0;        ///< work units the clusters share (each cluster takes whole units)
  int num_sms = 0;          ///< multiprocessors of the device
  SingleCtaLaunch single_cta = SingleCtaLaunch::kClusterOfOne;  ///< when cluster == 1
};

/// Launches Kernel(args...) on a persistent grid: at most as many clusters as can be
/// resident at once (from cudaOccupancyMaxActiveClusters on the first launch of this
/// kernel, cached: one device type per process assumed; num_sms / cluster when the query
/// is skipped or fails) and no more clusters than work units. The dynamic shared memory
/// limit is raised to l.smem_limit on the first successful call per kernel (host-side
/// function state: no sync, no allocation; a benign race, the call is idempotent).
/// Returns "" or an error sentence; a launch error is cleared.
template <auto Kernel, class... Args>
std::string launch_persistent(const PersistentLaunch& l, cudaStream_t stream,
                              const Args&... args) {
  auto kernel = Kernel;
  static bool attr_set = false;
  if (!attr_set) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem_limit);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it
      return std::string("cudaFuncSetAttribute failed: ") + cudaGetErrorString(e);
    }
    attr_set = true;
  }

  const bool plain = l.cluster == 1 && l.single_cta == SingleCtaLaunch::kPlain;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(l.cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(l.threads, 1, 1);
  cfg.dynamicSmemBytes = l.smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // How many clusters can be resident at once depends on the GPC layout: ask once.
  static int max_clusters = 0;
  if (max_clusters == 0) {
    int n = 0;
    cfg.gridDim = dim3(static_cast<unsigned>(l.num_sms / l.cluster * l.cluster), 1, 1);
    if (plain || cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = l.num_sms / l.cluster;
    }
    max_clusters = n;
  }
  const int64_t clusters = l.units < max_clusters ? l.units : max_clusters;
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * l.cluster), 1, 1);

  cudaError_t e;
  if (plain) {
    kernel<<<cfg.gridDim, cfg.blockDim, cfg.dynamicSmemBytes, stream>>>(args...);
    e = cudaGetLastError();
  } else {
    e = cudaLaunchKernelEx(&cfg, kernel, args...);
    if (e != cudaSuccess) cudaGetLastError();  // clear it
    else e = cudaGetLastError();
  }
  if (e != cudaSuccess) return std::string("kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

/// Launches Kernel(args...) on `grid_ctas` CTAs in clusters of `cluster` along x (every
/// work item gets its own cluster; kernels with cluster launch control take over the ones
/// not yet running). The dynamic shared memory limit is raised once, as above.
template <auto Kernel, class... Args>
std::string launch_clusters(int cluster, unsigned threads, unsigned smem_bytes, unsigned grid_ctas,
                            cudaStream_t stream, const Args&... args) {
  auto kernel = Kernel;
  static bool attr_set = false;
  if (!attr_set) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem_bytes));
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it
      return std::string("cudaFuncSetAttribute failed: ") + cudaGetErrorString(e);
    }
    attr_set = true;
  }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(grid_ctas, 1, 1);
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (e != cudaSuccess) cudaGetLastError();  // clear it
  else e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace jax_sm100::host
