// Matrix-vector product for batch-1 decode: y = W x (+ bias) (+ residual), W in bf16.
// The decode step is memory-bound: every weight byte is read once per token, so this kernel's
// job is to stream W at the copy bandwidth (16-byte loads, several in flight per lane).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

struct GemvArgs {
  const __nv_bfloat16* w = nullptr;  // [rows, cols] bf16, row-major, 16-byte aligned rows when cols % 8 == 0
  const float* x = nullptr;          // [cols] fp32
  const __nv_bfloat16* bias = nullptr;  // [rows] bf16 or null
  const float* residual = nullptr;   // [rows] fp32 or null (may alias y)
  float* y = nullptr;                // [rows] fp32
  int rows = 0;
  int cols = 0;
};

// Launches on `stream`. Returns the bytes the kernel moves (W + x + bias + residual + y), for GB/s.
std::size_t launch_gemv_bf16(const GemvArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
