// Embedding gather: out[i] = fp32(table[ids[i]]) (rows with ids[i] < 0 are left untouched, for
// positions whose input embedding is supplied instead).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

// table: [vocab, hidden] bf16   ids: [n] int32 (device)   out: [n, hidden] fp32
// Returns bytes moved.
std::size_t launch_embedding(const __nv_bfloat16* table, const std::int32_t* ids, float* out, int n, int hidden,
                             cudaStream_t stream);

}  // namespace cosmos::kernels
