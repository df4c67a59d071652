// SwiGLU activation: out[t, i] = silu(gu[t, i]) * gu[t, ff + i] for the fused gate/up product.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace cosmos::kernels {

// gu: [n, 2 * ff] fp32 (gate | up)   out: [n, ff] fp32. Returns bytes moved.
std::size_t launch_swiglu(const float* gu, float* out, int n, int ff, cudaStream_t stream);

}  // namespace cosmos::kernels
