// For the quantized-weight benchmarks (bench_gemv_quant, bench_gemm_q_small): random weight bytes
// (E4M3 without its NaN codes) and scale / activation values, generated on the device.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>

namespace bench_quant {
namespace {  // each benchmark is one translation unit

__device__ unsigned hash(std::size_t i, unsigned seed) {
  unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed ^ static_cast<unsigned>(i >> 32) * 0x9E3779B9u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return h;
}

// Random bytes; for E4M3 with the NaN codes (S.1111.111) replaced by +-448.
__global__ void fill_bytes(std::uint8_t* p, std::size_t n, unsigned seed, bool fp8) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned b = hash(i, seed) & 0xFFu;
    if (fp8 && (b & 0x7Fu) == 0x7Fu) b &= 0xFEu;
    p[i] = static_cast<std::uint8_t>(b);
  }
}

// Pseudo-random values in [offset - scale / 2, offset + scale / 2), fp32 or bf16 bits.
__global__ void fill_f32(float* p, std::size_t n, unsigned seed, float scale, float offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = (static_cast<float>(hash(i, seed) & 0xFFFFu) / 65536.0f - 0.5f) * scale + offset;
}
__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, unsigned seed, float scale, float offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16((static_cast<float>(hash(i, seed) & 0xFFFFu) / 65536.0f - 0.5f) * scale + offset);
}

}  // namespace
}  // namespace bench_quant
