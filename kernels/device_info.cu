#include "kernels/device_info.cuh"

#include <cuda_runtime.h>

namespace cosmos::kernels {

GpuQuery query_gpus() {
  GpuQuery q;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Without an NVIDIA driver this is cudaErrorInsufficientDriver or cudaErrorNoDevice.
    q.why_none = std::string("no usable NVIDIA GPU: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return q;
  }
  if (count == 0) {
    q.why_none = "no NVIDIA GPU found";
    return q;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_major = p.major;
    g.sm_minor = p.minor;
    g.multiprocessors = p.multiProcessorCount;
    g.total_bytes = p.totalGlobalMem;
    if (cudaSetDevice(i) == cudaSuccess) {
      std::size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) g.free_bytes = free_b;
    }
    q.gpus.push_back(g);
  }
  if (q.gpus.empty()) q.why_none = "could not read GPU properties";
  return q;
}

}  // namespace cosmos::kernels

#include <algorithm>
#include <vector>

namespace cosmos::kernels {

bool current_device_is(int major, int minor) {
  int dev = 0, ma = 0, mi = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && ma == major &&
         mi == minor;
}

double measure_copy_gbps(std::size_t bytes, int reps) {
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) {
    cudaFree(src);
    cudaGetLastError();
    return 0;
  }
  cudaMemset(src, 1, bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < reps + 2; ++i) {
    cudaEventRecord(a);
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 2) ms.push_back(t);  // the first two warm up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(src);
  cudaFree(dst);
  if (cudaGetLastError() != cudaSuccess || ms.empty()) return 0;
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

}  // namespace cosmos::kernels
