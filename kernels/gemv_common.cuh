// Helpers shared by the decode matrix-vector kernels (kernels/gemv.cu, kernels/gemv_quant.cu):
// warp and block reductions for the fused RMSNorm prologue, and the per-device launch shape.
// Internal to the kernels library (not an API).
#pragma once

#include <atomic>

#include <cuda_runtime.h>

namespace cosmos::kernels::gemv_common {

inline constexpr int kBlockWarps = 8;  // warps per block of every gemv kernel (256 threads)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// 1 / sqrt(mean(x^2) + eps) from each thread's partial sum of squares; every thread gets it.
// Contains a __syncthreads(): call from all threads of a block of W warps.
template <int W = kBlockWarps>
__device__ __forceinline__ float block_inv_rms(float ss, int cols, float eps) {
  __shared__ float red[W];
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < W; ++k) total += red[k];
  return 1.0f / sqrtf(total / static_cast<float>(cols) + eps);
}

// block_inv_rms over x[0, cols) read element by element (any length and alignment): the
// element-wise kernels' RMSNorm prologue. Call from all threads of a block of kBlockWarps warps.
__device__ __forceinline__ float block_inv_rms_of(const float* x, int cols, float eps) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += kBlockWarps * 32) {
    const float v = x[i];
    ss += v * v;
  }
  return block_inv_rms(ss, cols, eps);
}

// SM count and opt-in shared memory per block of the current device, queried once per device.
struct DeviceShape {
  int sms = 1, smem_optin = 48 * 1024;
};
inline DeviceShape device_shape() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices][2];  // 0 = not queried yet; benign race: same values
  int device = 0;
  cudaGetDevice(&device);
  DeviceShape d;
  if (device >= 0 && device < kMaxDevices && cache[device][0].load() > 0) {
    d.sms = cache[device][0].load();
    d.smem_optin = cache[device][1].load();
    return d;
  }
  int sms = 0, smem = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && sms > 0) d.sms = sms;
  if (cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess && smem > 0)
    d.smem_optin = smem;
  if (device >= 0 && device < kMaxDevices) {
    cache[device][1].store(d.smem_optin);
    cache[device][0].store(d.sms);
  }
  return d;
}

}  // namespace cosmos::kernels::gemv_common
