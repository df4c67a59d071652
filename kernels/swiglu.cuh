// SwiGLU activation: out[t, i] = silu(gu[t, i]) * gu[t, ff + i] for the fused gate/up product,
// read as fp32, bf16 or fp16, computed in fp32, stored as fp32, bf16 or fp16 (the down GEMM's input).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

// gu: [n, 2 * ff] gu_type (gate | up)   out: [n, ff] out_type. gu_type is f32 or out_type.
// Launched with launch_pdl. Returns bytes moved.
std::size_t launch_swiglu(const void* gu, ElemType gu_type, void* out, ElemType out_type, int n, int ff,
                          cudaStream_t stream);

inline std::size_t launch_swiglu(const float* gu, void* out, ElemType out_type, int n, int ff, cudaStream_t stream) {
  return launch_swiglu(gu, ElemType::f32, out, out_type, n, ff, stream);
}
inline std::size_t launch_swiglu(const float* gu, float* out, int n, int ff, cudaStream_t stream) {
  return launch_swiglu(gu, ElemType::f32, out, ElemType::f32, n, ff, stream);
}

}  // namespace cosmos::kernels
