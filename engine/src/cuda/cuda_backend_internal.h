// Inside the CUDA backend: the factory that module_entry.cpp (the module's exported functions)
// calls after checking the GPU and the model folder.
#pragma once

#include <memory>

#include "cosmos/backend.h"
#include "cosmos/checkpoint.h"
#include "kernels/device_info.cuh"

namespace cosmos {

// Allocates and uploads the model to `gpu`; errors as documented in cosmos/cuda_backend.h. With
// options.random_weights set, `ckpt` may be null (the weights are generated on the GPU).
Result<std::unique_ptr<Backend>> load_cuda_backend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape,
                                                   const Checkpoint* ckpt, const BackendOptions& options);

}  // namespace cosmos
