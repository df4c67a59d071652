// The sm_90a half of kernels/gemm_swiglu.cu: the kernel's launcher, given the two tensor maps the
// host side encoded (x: [n, k], w: [2 ff, k]; boxes of 64 columns x 128 rows, 128-byte swizzle).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/gemm_swiglu.cuh"

namespace cosmos::kernels {

inline constexpr int kGemmSwigluBlockRows = 128;  // tokens per tile
inline constexpr int kGemmSwigluBlockCols = 128;  // output columns per tile (128 gate + 128 up rows of w)
inline constexpr int kGemmSwigluBlockK = 64;      // k per pipeline stage (128 bytes: one swizzle row)

// The launch's own error (shared-memory opt-in or cudaLaunchKernelEx), or cudaSuccess.
cudaError_t launch_gemm_swiglu_sm90a(const CUtensorMap& tx, const CUtensorMap& tw, const GemmSwigluArgs& a, int sms,
                                     cudaStream_t stream);

}  // namespace cosmos::kernels
