// Quantization and dequantization on the GPU, bit for bit the math of engine/src/quant.cpp
// (cosmos::quantize_rows / dequantize_row) for bf16 sources, so the CUDA backend can quantize while
// shards stream in and its results equal the CPU backend's and the quantized-weight cache's.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/quant_format.cuh"

namespace cosmos::kernels {

// Where quantize writes; pointers at the first row being quantized (a caller quantizing rows
// [r0, r1) of a larger matrix offsets them itself: q by r0 * quant_row_bytes, row_scale by r0,
// group_scale / group_min by r0 * quant_groups(cols)).
struct QuantOut {
  std::uint8_t* q = nullptr;
  float* row_scale = nullptr;            // int8 / fp8
  std::uint16_t* group_scale = nullptr;  // int4
  std::uint16_t* group_min = nullptr;    // int4
};

// First bad weight found, written by quantize (device memory, set to kQuantNoError before the
// launch by launch_quantize itself): (row << 32 | col) of the smallest bad index, and what was wrong.
struct QuantStatus {
  unsigned long long non_finite;  // NaN or infinity: cosmos "quant.non_finite"
  unsigned long long out_of_range;  // finite beyond +-2^126: "quant.range"
};
inline constexpr unsigned long long kQuantNoError = ~0ull;

// src: [rows, cols] bf16 row-major. Enqueues the reset of *status and the quantization. Returns the
// bytes moved. Rows are independent: any row range of a matrix can be quantized on its own.
std::size_t launch_quantize(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, QuantKind kind,
                            const QuantOut& out, QuantStatus* status, cudaStream_t stream);

// dst: [rows, cols] bf16 = the fp32 value dequantize_row gives, rounded to nearest bf16 (for the
// tensor-core GEMMs of passes of several tokens). Returns the bytes moved.
std::size_t launch_dequantize(const QuantMatrix& m, std::int64_t rows, std::int64_t cols, __nv_bfloat16* dst,
                              cudaStream_t stream);

}  // namespace cosmos::kernels
