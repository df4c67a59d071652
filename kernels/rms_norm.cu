#include "kernels/rms_norm.cuh"

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;

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
  __shared__ float warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kThreads / 32; ++k) total += warp_sums[k];
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
  for (int i = threadIdx.x; i < d; i += kThreads) store_elem(yr, i, __bfloat162float(w[i]) * (xr[i] * inv));
}

}  // namespace

std::size_t launch_rms_norm(const float* x, int x_stride, const __nv_bfloat16* weight, void* y, ElemType y_type, int n,
                            int d, float eps, cudaStream_t stream) {
  if (n <= 0) return 0;
  switch (y_type) {
    case ElemType::f32:
      launch_pdl(rms_norm_kernel<float>, n, kThreads, 0, stream, x, x_stride, weight, static_cast<float*>(y), d, eps);
      break;
    case ElemType::bf16:
      launch_pdl(rms_norm_kernel<__nv_bfloat16>, n, kThreads, 0, stream, x, x_stride, weight,
                 static_cast<__nv_bfloat16*>(y), d, eps);
      break;
    case ElemType::f16:
      launch_pdl(rms_norm_kernel<__half>, n, kThreads, 0, stream, x, x_stride, weight, static_cast<__half*>(y), d, eps);
      break;
  }
  return static_cast<std::size_t>(n) * d * (4 + elem_size(y_type)) + static_cast<std::size_t>(d) * 2;
}

}  // namespace cosmos::kernels
