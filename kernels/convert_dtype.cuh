// Element-type conversion on the GPU (used when loading weights: bf16 checkpoint -> fp16 / fp32).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace cosmos::kernels {

// out[i] = fp16(in[i]), round to nearest even; values beyond fp16's range become +-inf.
// in:  [n] bf16 (raw bits)   out: [n] fp16 (raw bits)
// Returns the bytes the kernel moves (4 n), for GB/s reporting.
std::size_t launch_bf16_to_f16(const std::uint16_t* in, std::uint16_t* out, std::size_t n, cudaStream_t stream);

// out[i] = fp32(in[i]) (exact).
// in:  [n] bf16 (raw bits)   out: [n] fp32
// Returns the bytes moved (6 n).
std::size_t launch_bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n, cudaStream_t stream);

// out[i] = fp32(in[i]) (exact).
// in:  [n] fp16 (raw bits)   out: [n] fp32
// Returns the bytes moved (6 n).
std::size_t launch_f16_to_f32(const std::uint16_t* in, float* out, std::size_t n, cudaStream_t stream);

}  // namespace cosmos::kernels
