// Element types of activations and KV-cache entries, chosen at run time by the CUDA backend:
// fp32 (reference math), bf16 or fp16 (inputs of tensor-core GEMMs, the bf16 KV cache).
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cosmos::kernels {

enum class ElemType : int { f32 = 0, bf16 = 1, f16 = 2 };

inline constexpr std::size_t elem_size(ElemType t) { return t == ElemType::f32 ? 4 : 2; }

__device__ __forceinline__ float load_elem(const float* p, std::size_t i) { return p[i]; }
__device__ __forceinline__ float load_elem(const __nv_bfloat16* p, std::size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load_elem(const __half* p, std::size_t i) { return __half2float(p[i]); }

__device__ __forceinline__ void store_elem(float* p, std::size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_elem(__nv_bfloat16* p, std::size_t i, float v) { p[i] = __float2bfloat16(v); }
// fp16 saturates instead of overflowing to inf (activations beyond 65504 are rare but real); NaN
// stays NaN.
__device__ __forceinline__ void store_elem(__half* p, std::size_t i, float v) {
  p[i] = __float2half(v != v ? v : fminf(fmaxf(v, -65504.0f), 65504.0f));
}

}  // namespace cosmos::kernels
