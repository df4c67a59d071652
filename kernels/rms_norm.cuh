// RMSNorm over rows: y = x * rsqrt(mean(x^2) + eps) * weight, computed in fp32; y stored as fp32,
// bf16 or fp16 (the input of the next GEMM).
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

// x: [n, d] fp32 (row stride x_stride)   weight: [d] bf16   y: [n, d] y_type (row stride d)
// Launched with launch_pdl (kernels/pdl.cuh). Returns bytes moved.
std::size_t launch_rms_norm(const float* x, int x_stride, const __nv_bfloat16* weight, void* y, ElemType y_type, int n,
                            int d, float eps, cudaStream_t stream);

inline std::size_t launch_rms_norm(const float* x, int x_stride, const __nv_bfloat16* weight, float* y, int n, int d,
                                   float eps, cudaStream_t stream) {
  return launch_rms_norm(x, x_stride, weight, y, ElemType::f32, n, d, eps, stream);
}

}  // namespace cosmos::kernels
