#include "kernels/convert_dtype.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cosmos::kernels {
namespace {

// Eight elements (16 bytes) per thread per step, grid-stride loop; scalar tail.
__global__ void bf16_to_f16_kernel(const std::uint16_t* __restrict__ in, std::uint16_t* __restrict__ out,
                                   std::size_t n, bool aligned) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t vec_n = aligned ? n / 8 : 0;
  const uint4* in8 = reinterpret_cast<const uint4*>(in);
  uint4* out8 = reinterpret_cast<uint4*>(out);
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vec_n; v += stride) {
    uint4 x = in8[v];
    std::uint32_t* w = reinterpret_cast<std::uint32_t*>(&x);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float lo = __uint_as_float((w[k] & 0xFFFFu) << 16);
      const float hi = __uint_as_float(w[k] & 0xFFFF0000u);
      const __half2 h = __floats2half2_rn(lo, hi);
      w[k] = *reinterpret_cast<const std::uint32_t*>(&h);
    }
    out8[v] = x;
  }
  for (std::size_t i = vec_n * 8 + blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const __half h = __float2half_rn(__uint_as_float(static_cast<std::uint32_t>(in[i]) << 16));
    out[i] = __half_as_ushort(h);
  }
}

__global__ void bf16_to_f32_kernel(const std::uint16_t* __restrict__ in, float* __restrict__ out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = __uint_as_float(static_cast<std::uint32_t>(in[i]) << 16);
}

__global__ void f16_to_f32_kernel(const std::uint16_t* __restrict__ in, float* __restrict__ out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = __half2float(__ushort_as_half(in[i]));
}

unsigned grid_for(std::size_t work, unsigned block) {
  const std::size_t blocks = (work + block - 1) / block;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks ? blocks : 1) : 65535 * 8);
}

}  // namespace

std::size_t launch_bf16_to_f16(const std::uint16_t* in, std::uint16_t* out, std::size_t n, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  // uint4 loads need 16-byte alignment (cudaMalloc gives 256; sub-tensors may not): else scalar.
  const bool aligned = (reinterpret_cast<std::uintptr_t>(in) | reinterpret_cast<std::uintptr_t>(out)) % 16 == 0;
  bf16_to_f16_kernel<<<grid_for(aligned ? n / 8 + 1 : n, kBlock), kBlock, 0, stream>>>(in, out, n, aligned);
  return 4 * n;
}

std::size_t launch_bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  bf16_to_f32_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(in, out, n);
  return 6 * n;
}

std::size_t launch_f16_to_f32(const std::uint16_t* in, float* out, std::size_t n, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  f16_to_f32_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(in, out, n);
  return 6 * n;
}

}  // namespace cosmos::kernels
