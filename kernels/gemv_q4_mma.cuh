// The int4 decode matrix-vector product on tensor cores (kernels/gemv_q4_mma.cu): the int4 path of
// launch_gemv_quant (kernels/gemv_quant.cuh) when QGemvTuning::mma selects it. Internal to the
// kernels library.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/gemv_quant.cuh"

namespace cosmos::kernels {

// Whether the tensor-core kernel can run `a` on the current device: int4 weights, cols a multiple
// of the group size 128, q, x and the norm weight 16-byte aligned, sm_80 or newer, and its shared
// memory (580 bytes per group of columns and 512) within the device's limit per block.
bool gemv_q4_mma_fits(const QGemvArgs& a);

// Warps per 16-row tile (8 or 4; the other warps of the block run other tiles) for `requested`
// 4 or 8, or the automatic choice for anything else.
int gemv_q4_mma_tile_warps(const QGemvArgs& a, int depth, int requested);

// Enqueues the kernel with `depth` (2 or 4) groups of 128 columns in flight per warp and
// `tile_warps` as above. Same contract and return value (bytes moved) as launch_gemv_quant; call
// only when gemv_q4_mma_fits.
std::size_t launch_gemv_q4_mma(const QGemvArgs& a, int depth, int tile_warps, cudaStream_t stream);

}  // namespace cosmos::kernels
