// The CUDA backend (bf16 weights on the GPU, fp32 activations; reference-accurate kernels today,
// the fast path of the CUDA backend issue grows inside it). Built when COSMOS_WITH_CUDA is on; the
// CUDA runtime is linked statically, so a machine without an NVIDIA driver still starts and gets a
// clear "no usable NVIDIA GPU: <why>" error here.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "cosmos/backend.h"

namespace cosmos {

// True when this build contains the CUDA backend.
bool cuda_backend_built();

// Used and total bytes of the first GPU's memory (all processes), for the live panel; nullopt
// without a usable GPU.
struct DeviceMemoryInfo {
  std::uint64_t used = 0, total = 0;
};
std::optional<DeviceMemoryInfo> gpu_memory_info();

// The first GPU's device-to-device copy bandwidth in GB/s (read + write counted): the ceiling
// benchmarks compare against. 0 without a usable GPU.
double gpu_copy_bandwidth_gbps();

// Errors: "backend.no_gpu" (unsupported_model) with the runtime's reason; "backend.gpu_memory"
// (out_of_memory) with needed and free bytes; "backend.cuda" (internal) with call, file and line;
// the model folder's own errors.
Result<std::unique_ptr<Backend>> create_cuda_backend(const std::filesystem::path& model_dir,
                                                     const BackendOptions& options);

}  // namespace cosmos
