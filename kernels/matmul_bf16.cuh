// Matrix product for several tokens (prefill, batches): y = x W^T (+ bias) (+ residual), W in
// bf16, activations fp32, fp32 FMA (the reference-accurate path; tensor-core GEMMs come with
// cuBLASLt). Tiles of 64 outputs x 16 tokens, K in steps of 32 through shared memory.
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

struct MatmulArgs {
  const float* x = nullptr;             // [n, cols] fp32
  const __nv_bfloat16* w = nullptr;     // [rows, cols] bf16
  const __nv_bfloat16* bias = nullptr;  // [rows] bf16 or null
  const float* residual = nullptr;      // [n, rows] fp32 or null (may alias y)
  float* y = nullptr;                   // [n, rows] fp32
  int n = 0, rows = 0, cols = 0;
};

// Returns bytes moved (W once per 16-token tile column, x, y).
std::size_t launch_matmul_bf16(const MatmulArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
