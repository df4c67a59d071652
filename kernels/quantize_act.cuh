// Per-row fp8 (E4M3) quantization of activations, the input of prefill's fp8 tensor-core GEMMs
// (GemmLt::run_fp8, W8A8: fp8 weights with per-output-channel scales times fp8 activations with
// per-token scales, both applied by cuBLASLt as outer-vector scales):
//   amax_r   = max_c |x[r][c]|
//   scale[r] = amax_r / 448                      (448: the largest finite E4M3 value)
//   q[r][c]  = e4m3(x[r][c] * (448 / amax_r))    (round to nearest even, saturating)
// so x[r][c] ~ e4m3(q[r][c]) * scale[r], with a relative rounding error of at most 2^-4 per element
// (3 mantissa bits) above E4M3's normal range (2^-6 of amax). A row of zeros gets scale 1 and q = 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

inline constexpr float kE4m3Max = 448.0f;

// x: [n, cols] bf16, f16 or f32 (row-major, rows cols apart)   q: [n, cols] E4M3 bytes   scale: [n] fp32.
// Launched with launch_pdl. Returns the bytes moved (x read once, q and scale written once).
std::size_t launch_quantize_rows_fp8(const void* x, ElemType type, int n, int cols, std::uint8_t* q, float* scale,
                                     cudaStream_t stream);

}  // namespace cosmos::kernels
