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
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
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

// Pulls [p, p + bytes) into this SM's L1, one 128-byte line per thread and step. For immutable
// data (a norm weight) before the PDL wait: the reads after the wait then hit L1 instead of paying
// an L2 round trip on the kernel's critical path.
template <int kThreads>
__device__ __forceinline__ void prefetch_l1(const void* p, int bytes) {
  const char* c = static_cast<const char*>(p);
  for (int off = static_cast<int>(threadIdx.x) * 128; off < bytes; off += kThreads * 128)
    asm volatile("prefetch.global.L1 [%0];" ::"l"(c + off));
}

// The RMSNorm prologue's rescale of x staged in shared memory (float4 i at xs[(i & 1) * ps + i / 2],
// the layout of kernels/gemv.cu): v = g * (v * inv) for the float4s this thread staged
// (i = threadIdx.x + k * kThreads < n4 <= kMaxN4), g read as uint2 (4 half-precision values, Ops::pair),
// all of the thread's loads issued before any is used (one round trip, not one per float4).
template <typename Ops, int kThreads, int kMaxN4 = 1024>
__device__ __forceinline__ void rescale_staged(float4* xs, int ps, const uint2* g2, int n4, float inv) {
  constexpr int kPer = (kMaxN4 + kThreads - 1) / kThreads;
  uint2 gb[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) gb[k] = __ldg(g2 + i);
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) {
      float4& v = xs[(i & 1) * ps + (i >> 1)];
      const float2 g0 = Ops::pair(gb[k].x), g1 = Ops::pair(gb[k].y);
      v = make_float4(g0.x * (v.x * inv), g0.y * (v.y * inv), g1.x * (v.z * inv), g1.y * (v.w * inv));
    }
  }
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
