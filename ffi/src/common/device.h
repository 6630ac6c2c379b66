// The one query of the current CUDA device that host code makes: multiprocessor count
// and compute capability, read once per device and cached (thread-safe).
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <unordered_map>

namespace jax_sm100::host {

/// Properties of one CUDA device.
struct DeviceInfo {
  int ordinal = 0;
  int num_sms = 0;
  int cc_major = 0, cc_minor = 0;
  /// Compute capability as one number: 90 for 9.0, 100 for 10.0.
  int arch() const { return cc_major * 10 + cc_minor; }
};

/// Fills *out with the current device's properties. Returns "" or an error sentence
/// (the CUDA error is cleared so later launch checks see only their own errors).
inline std::string current_device(DeviceInfo* out) {
  static std::mutex mu;
  static std::unordered_map<int, DeviceInfo> cache;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDevice failed: ") + cudaGetErrorString(e);
  }
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it == cache.end()) {
    DeviceInfo info;
    info.ordinal = dev;
    if ((e = cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, dev)) !=
            cudaSuccess ||
        (e = cudaDeviceGetAttribute(&info.cc_major, cudaDevAttrComputeCapabilityMajor, dev)) !=
            cudaSuccess ||
        (e = cudaDeviceGetAttribute(&info.cc_minor, cudaDevAttrComputeCapabilityMinor, dev)) !=
            cudaSuccess) {
      cudaGetLastError();
      return std::string("cudaDeviceGetAttribute failed: ") + cudaGetErrorString(e);
    }
    it = cache.emplace(dev, info).first;
  }
  *out = it->second;
  return "";
}

}  // namespace jax_sm100::host
