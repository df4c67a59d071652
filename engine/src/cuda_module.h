// Inside the engine: the loader of the CUDA backend module (cuda_module.cpp), for tests.
#pragma once

#include <filesystem>
#include <string>

#include "cosmos/cuda_backend.h"

namespace cosmos::detail {

// Opens `path` as the CUDA backend module and reports how that went, without touching the
// process's module (cuda_module_status()). A module that opens stays loaded.
CudaModuleStatus probe_cuda_module(const std::filesystem::path& path);

// The reason given when dlopen(path) fails with the loader's message `dlerror` (a missing CUDA
// library is named as such).
std::string describe_load_failure(const std::string& path, const std::string& dlerror);

// Tests only: forgets the process's module state, so the next call of a cosmos/cuda_backend.h
// function searches again (reading $COSMOS_CUDA_MODULE again). A loaded module stays loaded, and
// backends made from it stay valid.
void reset_cuda_module_for_testing();

}  // namespace cosmos::detail
