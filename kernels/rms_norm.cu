#include "kernels/rms_norm.cuh"

#include <cstdint>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;

// The sum of every thread's `ss` over the block (one row), in a fixed order: warp shuffles, then the
// warps' sums in warp order; every thread gets it.
__device__ __forceinline__ float block_sum(float ss) {
  __shared__ float warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kThreads / 32; ++k) total += warp_sums[k];
  return total;
}

template <typename Out>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* __restrict__ x, int x_stride,
                                                            const __nv_bfloat16* __restrict__ w, Out* __restrict__ y,
                                                            int d, float eps) {
  pdl_wait();
  pdl_launch_dependents();
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * x_stride;
  Out* yr = y + static_cast<std::size_t>(blockIdx.x) * d;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < d; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int i = threadIdx.x; i < d; i += kThreads) store_elem(yr, i, __bfloat162float(w[i]) * (xr[i] * inv));
}

// Rows of d % 4 == 0 floats, d <= 4 kVec kThreads (the 7B hidden size 3,584: 3.5 chunks per
// thread): each thread keeps its float4 chunks in registers between the sum and the scaling (x is
// read once), 16-byte loads, 8-byte bf16/fp16 (16-byte fp32) stores. ~1.6x the scalar kernel's
// rate on the 2,048-token prefill (docs/PERFORMANCE.md session 18).
constexpr int kVec = 4;

__device__ __forceinline__ void store4(float* y, int c, float a, float b, float e, float f) {
  reinterpret_cast<float4*>(y)[c] = make_float4(a, b, e, f);
}
__device__ __forceinline__ void store4(__nv_bfloat16* y, int c, float a, float b, float e, float f) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(e, f);
  uint2 u;
  u.x = *reinterpret_cast<const unsigned*>(&lo);
  u.y = *reinterpret_cast<const unsigned*>(&hi);
  reinterpret_cast<uint2*>(y)[c] = u;
}
__device__ __forceinline__ void store4(__half* y, int c, float a, float b, float e, float f) {
  const __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(e, f);
  uint2 u;
  u.x = *reinterpret_cast<const unsigned*>(&lo);
  u.y = *reinterpret_cast<const unsigned*>(&hi);
  reinterpret_cast<uint2*>(y)[c] = u;
}

template <typename Out>
__global__ void __launch_bounds__(kThreads) rms_norm_vec_kernel(const float* __restrict__ x, int x_stride,
                                                                const __nv_bfloat16* __restrict__ w,
                                                                Out* __restrict__ y, int d, float eps) {
  pdl_wait();
  pdl_launch_dependents();
  const auto* xr = reinterpret_cast<const float4*>(x + static_cast<std::size_t>(blockIdx.x) * x_stride);
  Out* yr = y + static_cast<std::size_t>(blockIdx.x) * d;
  const int chunks = d >> 2;
  float4 v[kVec];  // [kVec] this thread's chunks threadIdx.x + k kThreads
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int c = threadIdx.x + k * kThreads;
    if (c < chunks) {
      v[k] = xr[c];
      ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  const auto* w4 = reinterpret_cast<const uint2*>(w);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int c = threadIdx.x + k * kThreads;
    if (c < chunks) {
      const uint2 wu = w4[c];
      const float2 w01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wu.x));
      const float2 w23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wu.y));
      store4(yr, c, w01.x * (v[k].x * inv), w01.y * (v[k].y * inv), w23.x * (v[k].z * inv), w23.y * (v[k].w * inv));
    }
  }
}

template <typename Out>
void launch_as(const float* x, int x_stride, const __nv_bfloat16* w, Out* y, int n, int d, float eps,
               cudaStream_t stream) {
  const auto aligned = [](const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; };
  if (d % 4 == 0 && x_stride % 4 == 0 && d <= 4 * kVec * kThreads && aligned(x, 16) && aligned(w, 8) &&
      aligned(y, 4 * sizeof(Out)))
    launch_pdl(rms_norm_vec_kernel<Out>, n, kThreads, 0, stream, x, x_stride, w, y, d, eps);
  else
    launch_pdl(rms_norm_kernel<Out>, n, kThreads, 0, stream, x, x_stride, w, y, d, eps);
}

}  // namespace

std::size_t launch_rms_norm(const float* x, int x_stride, const __nv_bfloat16* weight, void* y, ElemType y_type, int n,
                            int d, float eps, cudaStream_t stream) {
  if (n <= 0) return 0;
  switch (y_type) {
    case ElemType::f32: launch_as(x, x_stride, weight, static_cast<float*>(y), n, d, eps, stream); break;
    case ElemType::bf16: launch_as(x, x_stride, weight, static_cast<__nv_bfloat16*>(y), n, d, eps, stream); break;
    case ElemType::f16: launch_as(x, x_stride, weight, static_cast<__half*>(y), n, d, eps, stream); break;
  }
  return static_cast<std::size_t>(n) * d * (4 + elem_size(y_type)) + static_cast<std::size_t>(d) * 2;
}

}  // namespace cosmos::kernels
