// The test-model weight generator (cosmos/test_model.h, test_weight_value) run on the GPU, so a
// benchmark can build the exact model shape without writing or reading 15 GB of files. Produces
// the same bf16 values as the files cosmos-cli make-test-model writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

// out: [n] bf16, or fp16 converted from the bf16 value (type f16). key = seed ^ fnv1a64(name);
// kind: 0 norm, 1 bias, 2 embedding, 3 matrix (with fan_in). out[i] is the tensor's element first + i
// (a slice of a tensor: the CUDA backend quantizes large matrices a chunk of rows at a time).
// Returns bytes written.
std::size_t launch_fill_test_weights(void* out, ElemType type, std::size_t n, std::uint64_t key, int kind,
                                     std::uint64_t fan_in, cudaStream_t stream, std::size_t first = 0);

}  // namespace cosmos::kernels
