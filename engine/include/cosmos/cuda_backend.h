// The CUDA backend (bf16 weights on the GPU, fp32 activations; reference-accurate kernels today,
// the fast path of the CUDA backend issue grows inside it). It lives in a module,
// libcosmos-cuda.so (built when COSMOS_WITH_CUDA is on), that the engine loads on first use: the
// engine and the binaries depend on no CUDA library, so a machine without an NVIDIA driver or the
// CUDA libraries still starts and gets a clear "backend.no_gpu" error here saying why.
//
// Where the module is looked for, first found wins:
//   $COSMOS_CUDA_MODULE (when set: only there),
//   <executable's dir>/../lib/libcosmos-cuda.so (the build tree: build/X/bin, build/X/lib),
//   <executable's dir>/../lib/cosmos-chat/libcosmos-cuda.so (installed),
//   the directory of libcosmos-engine.so and its cosmos-chat/ subdirectory,
//   then libcosmos-cuda.so through the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cosmos/backend.h"

namespace cosmos {

// True when this build has the CUDA backend module (COSMOS_WITH_CUDA); whether it loads on this
// machine is cuda_module_status().loaded.
bool cuda_backend_built();

// The CUDA backend module as found on this machine. The first call (of this or any function here)
// loads it, once per process, thread-safely; it is never unloaded.
struct CudaModuleStatus {
  bool loaded = false;
  std::filesystem::path path;  // the module loaded, or the one that failed to load; empty if none found
  std::string why_not;         // when not loaded: why, a sentence for people (includes dlerror())
};
const CudaModuleStatus& cuda_module_status();

// Used and total bytes of the first GPU's memory (all processes), for the live panel; nullopt
// without a usable GPU.
struct DeviceMemoryInfo {
  std::uint64_t used = 0, total = 0;
};
std::optional<DeviceMemoryInfo> gpu_memory_info();

// The first GPU's device-to-device copy bandwidth in GB/s (read + write counted): the ceiling
// benchmarks compare against. 0 without a usable GPU.
double gpu_copy_bandwidth_gbps();

// The PCI bus id of the GPU the CUDA backend uses ("0000:1A:00.0"), for NVML's view of the same
// device (cosmos/gpu_clocks.h); empty without a usable GPU.
std::string gpu_pci_bus_id();

// Errors: "backend.no_gpu" (unsupported_model) with the reason (the module cannot be loaded and
// why, or the CUDA runtime's reason); "backend.gpu_memory" (out_of_memory) with needed and free
// bytes; "backend.cuda" (internal) with call, file and line; the model folder's own errors.
Result<std::unique_ptr<Backend>> create_cuda_backend(const std::filesystem::path& model_dir,
                                                     const BackendOptions& options);

}  // namespace cosmos
