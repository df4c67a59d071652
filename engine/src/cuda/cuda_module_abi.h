// The interface between the engine and the CUDA backend module (libcosmos-cuda.so): the module
// exports one C function, cosmos_cuda_module_v1(), returning this table; the engine's loader
// (cuda_module.cpp) dlopens the module and checks abi_version and the layout fields before using
// it. C++ types cross the boundary: the module and the engine come from the same build (the module
// links libcosmos-engine.so), and a module from another build is refused by the checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "cosmos/backend.h"

namespace cosmos {

// Bump when the table or any type passed through it changes.
inline constexpr int kCudaModuleAbiVersion = 4;  // 2: BackendOptions::kv_format, Backend::kv_format(); 3: pci_bus_id;
                                                 // 4: Backend's decode tuning

struct CudaModuleV1 {
  int abi_version;                   // kCudaModuleAbiVersion of the module's build
  std::size_t backend_options_size;  // sizeof(BackendOptions) there
  std::size_t error_size;            // sizeof(Error) there
  // cosmos/cuda_backend.h's functions, inside the module.
  Result<std::unique_ptr<Backend>> (*create_backend)(const std::filesystem::path& model_dir,
                                                     const BackendOptions& options);
  bool (*memory_info)(std::uint64_t* used, std::uint64_t* total);  // false without a usable GPU
  double (*copy_bandwidth_gbps)();                                 // 0 without a usable GPU
  bool (*pci_bus_id)(char* out, int size);  // the backend's GPU's PCI bus id; false without a usable GPU
};

}  // namespace cosmos

// The module's one exported symbol.
#define COSMOS_CUDA_MODULE_ENTRY "cosmos_cuda_module_v1"
extern "C" const cosmos::CudaModuleV1* cosmos_cuda_module_v1();
