// The one launch path of the persistent GEMM kernels: raise the kernel's dynamic shared
// memory limit once per device, size the persistent grid in whole clusters from the
// number of work units and the (cached, per device) occupancy query, and launch with or
// without the cluster attribute. Host-only; the kernel is a template argument so that the
// once-per-kernel state lives in one static per kernel instantiation.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace jax_sm100::host {

/// Devices whose once-per-kernel state is cached (a device beyond it is served uncached).
constexpr int kMaxCachedDevices = 64;

/// The current device's ordinal, or -1 when it cannot be cached. The kernel attribute
/// and the occupancy answer belong to the current device's copy of the kernel: one
/// process driving several GPUs (one JAX process, a mesh of local devices) must set the
/// attribute on each, or the launches on all but the first fail — and a peer blocked in
/// the collective after this call would then wait forever.
inline int cached_device_slot() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev >= 0 && dev < kMaxCachedDevices ? dev : -1;
}

/// Raises Kernel's dynamic shared memory limit to `bytes` on the current device, once per
/// (kernel, device) — host-side function state only: no sync, no allocation, so also fine
/// while XLA captures a command buffer; a benign race, the call is idempotent. Returns the
/// CUDA error (cleared) of a failed call.
template <auto Kernel>
cudaError_t set_smem_limit_once(int bytes) {
  static std::atomic<bool> done[kMaxCachedDevices] = {};
  const int slot = cached_device_slot();
  if (slot >= 0 && done[slot].load(std::memory_order_acquire)) return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it
    return e;
  }
  if (slot >= 0) done[slot].store(true, std::memory_order_release);
  return cudaSuccess;
}

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
/// kernel on this device, cached per device; num_sms / cluster when the query is skipped
/// or fails) and no more clusters than work units. The dynamic shared memory limit is
/// raised to l.smem_limit once per device (set_smem_limit_once).
/// Returns "" or an error sentence; a launch error is cleared.
template <auto Kernel, class... Args>
std::string launch_persistent(const PersistentLaunch& l, cudaStream_t stream,
                              const Args&... args) {
  auto kernel = Kernel;
  if (const cudaError_t e = set_smem_limit_once<Kernel>(l.smem_limit); e != cudaSuccess)
    return std::string("cudaFuncSetAttribute failed: ") + cudaGetErrorString(e);

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
  // How many clusters can be resident at once depends on the GPC layout: ask once per
  // device.
  static std::atomic<int> cached_max_clusters[kMaxCachedDevices] = {};
  const int slot = cached_device_slot();
  int max_clusters = slot >= 0 ? cached_max_clusters[slot].load(std::memory_order_relaxed) : 0;
  if (max_clusters == 0) {
    int n = 0;
    cfg.gridDim = dim3(static_cast<unsigned>(l.num_sms / l.cluster * l.cluster), 1, 1);
    if (plain || cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = l.num_sms / l.cluster;
    }
    max_clusters = n;
    if (slot >= 0) cached_max_clusters[slot].store(n, std::memory_order_relaxed);
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
  if (const cudaError_t e = set_smem_limit_once<Kernel>(static_cast<int>(smem_bytes));
      e != cudaSuccess)
    return std::string("cudaFuncSetAttribute failed: ") + cudaGetErrorString(e);
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
