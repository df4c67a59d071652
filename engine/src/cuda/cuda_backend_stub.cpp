// Builds without CUDA: the CUDA backend is absent and says so.
#include "cosmos/cuda_backend.h"

namespace cosmos {

bool cuda_backend_built() { return false; }

std::optional<DeviceMemoryInfo> gpu_memory_info() { return std::nullopt; }

double gpu_copy_bandwidth_gbps() { return 0; }

Result<std::unique_ptr<Backend>> create_cuda_backend(const std::filesystem::path&, const BackendOptions&) {
  return make_error(ErrorCategory::unsupported_model, "backend.no_gpu",
                    "this build of Cosmos Chat has no CUDA backend (built without the CUDA toolkit)");
}

}  // namespace cosmos
