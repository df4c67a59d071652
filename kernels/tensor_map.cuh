// TMA tensor maps for the Hopper kernels (kernels/gemm_swiglu.cu, kernels/prefill_attention.cu),
// encoded on the host by the driver's cuTensorMapEncodeTiled, fetched through the runtime
// (cudaGetDriverEntryPointByVersion) so that nothing links libcuda. ~1 us per map.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace cosmos::kernels {

// True when the driver offers cuTensorMapEncodeTiled (CUDA 12.0 or newer).
bool tensor_maps_available();

// A map over a 16-bit (bf16, or fp16 with f16) tensor of `rank` (2 or 3) dimensions, read in boxes
// with the 128-byte swizzle (box[0] * 2 must be 128 bytes or less). dims[0] is the innermost
// (contiguous) dimension in elements; strides[i] is the byte step of dimension i + 1 (a multiple of
// 16). Coordinates past a dimension read as zeros. False when the driver refuses the arguments.
bool encode_tensor_map_16bit(CUtensorMap& map, const void* ptr, int rank, const std::uint64_t* dims,
                             const std::uint64_t* strides, const std::uint32_t* box, bool f16);

}  // namespace cosmos::kernels
