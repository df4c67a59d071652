#include "kernels/test_weights.cuh"

#include <algorithm>

namespace cosmos::kernels {
namespace {

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}

template <typename T>
__global__ void fill_kernel(T* out, std::size_t n, std::size_t first, std::uint64_t key, int kind, float matrix_scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t bits = splitmix64(key + (first + i + 1) * 0x9E3779B97F4A7C15ull);
    const float u = static_cast<float>(bits >> 40) / 8388608.0f - 1.0f;
    float v;
    switch (kind) {
      // Rounded product, then rounded sum, as on the host (an FMA would round once and differ).
      case 0: v = __fadd_rn(1.0f, __fmul_rn(0.1f, u)); break;
      case 1: v = __fmul_rn(0.1f, u); break;
      case 2: v = u; break;
      default: v = __fmul_rn(u, matrix_scale); break;
    }
    store_elem(out, i, __bfloat162float(__float2bfloat16(v)));  // the bf16 the files hold
  }
}

}  // namespace

std::size_t launch_fill_test_weights(void* out, ElemType type, std::size_t n, std::uint64_t key, int kind,
                                     std::uint64_t fan_in, cudaStream_t stream, std::size_t first) {
  if (n == 0) return 0;
  // Same float expression as test_weight_value: sqrt(3.0f / float(fan_in)) (sqrtf is correctly rounded).
  const float scale = sqrtf(3.0f / static_cast<float>(fan_in == 0 ? 1 : fan_in));
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65536));
  if (type == ElemType::f16)
    fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(out), n, first, key, kind, scale);
  else
    fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(out), n, first, key, kind, scale);
  return n * elem_size(type);
}

}  // namespace cosmos::kernels
