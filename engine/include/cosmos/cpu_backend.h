// The CPU reference backend: fp32 arithmetic over the checkpoint's bf16 weights (memory-mapped,
// not copied), multithreaded with OpenMP. The reference every faster backend is tested against,
// and the fallback without an NVIDIA GPU.
#pragma once

#include <filesystem>
#include <memory>

#include "cosmos/backend.h"

namespace cosmos {

// Errors: the config/checkpoint codes of the model folder, "backend.precision" (unsupported_model)
// for a precision the CPU backend does not run yet, "backend.context" for a bad context length.
Result<std::unique_ptr<Backend>> create_cpu_backend(const std::filesystem::path& model_dir,
                                                    const BackendOptions& options);

}  // namespace cosmos
