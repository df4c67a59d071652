// RMSNorm over rows, fp32 throughout: y = x * rsqrt(mean(x^2) + eps) * weight.
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

// x: [n, d] fp32 (row stride x_stride)   weight: [d] bf16   y: [n, d] fp32 (row stride d)
// Returns bytes moved.
std::size_t launch_rms_norm(const float* x, int x_stride, const __nv_bfloat16* weight, float* y, int n, int d, float eps,
                            cudaStream_t stream);

}  // namespace cosmos::kernels
