// For the GPU benchmarks: fill_bf16, pseudo-random bf16 values in [-scale, scale) from a seed,
// generated on the device (no host copy of large buffers).
#pragma once

#include <cstddef>

#include <cuda_bf16.h>

#include "bench_check.h"

namespace bench {
namespace {  // each benchmark is one translation unit

__global__ void fill_bf16_kernel(__nv_bfloat16* p, std::size_t n, float scale, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xFFFFFF) / 8388608.0f - 1.0f));
  }
}

void fill_bf16(__nv_bfloat16* p, std::size_t n, float scale, unsigned seed) {
  fill_bf16_kernel<<<1024, 256>>>(p, n, scale, seed);
  CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace bench
