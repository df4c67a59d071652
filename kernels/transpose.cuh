// Out-of-place transpose of a row-major matrix of 16-bit elements (bf16 or fp16 bit patterns):
//   dst[c, r] = src[r, c],  src [rows, cols], dst [cols, rows].
// Used at load time for the fused decode MLP's transposed down weights (kernels/mlp_decode.cuh).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace cosmos::kernels {

// 32 x 32 tiles through shared memory. Returns the bytes moved (2 x rows x cols x 2); 0, with
// nothing launched, for an empty matrix. src and dst must not overlap.
std::size_t launch_transpose16(const std::uint16_t* src, int rows, int cols, std::uint16_t* dst, cudaStream_t stream);

}  // namespace cosmos::kernels
