#include "kernels/swiglu.cuh"

namespace cosmos::kernels {
namespace {

__global__ void swiglu_kernel(const float* __restrict__ gu, float* __restrict__ out, int n, int ff) {
  const std::size_t total = static_cast<std::size_t>(n) * ff;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t t = i / ff, c = i % ff;
    const float g = gu[t * 2 * ff + c], u = gu[t * 2 * ff + ff + c];
    out[i] = g / (1.0f + expf(-g)) * u;
  }
}

}  // namespace

std::size_t launch_swiglu(const float* gu, float* out, int n, int ff, cudaStream_t stream) {
  if (n <= 0) return 0;
  const std::size_t total = static_cast<std::size_t>(n) * ff;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((total + 255) / 256, 4096));
  swiglu_kernel<<<blocks, 256, 0, stream>>>(gu, out, n, ff);
  return total * 12;
}

}  // namespace cosmos::kernels
