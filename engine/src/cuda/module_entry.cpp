// The CUDA backend module's entry point (libcosmos-cuda.so, loaded by the engine's cuda_module.cpp):
// GPU checks, model folder checks, then load_cuda_backend(). Only cosmos_cuda_module_v1() is
// exported (module.map); the engine implements cosmos/cuda_backend.h by calling through its table.
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "cosmos/cuda_backend.h"
#include "cuda/cuda_backend_internal.h"
#include "cuda/cuda_module_abi.h"
#include "kernels/attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/prefill_attention.cuh"

namespace cosmos {
namespace {

bool module_memory_info(std::uint64_t* used, std::uint64_t* total) {
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *used = total_b - free_b;
  *total = total_b;
  return true;
}

double module_copy_bandwidth_gbps() {
  if (kernels::query_gpus().gpus.empty()) return 0;
  return kernels::measure_copy_gbps();
}

// The GPU module_create_backend() uses (the first usable one), as "0000:1A:00.0".
bool module_pci_bus_id(char* out, int size) {
  const kernels::GpuQuery q = kernels::query_gpus();
  if (q.gpus.empty() || size <= 0) return false;
  if (cudaDeviceGetPCIBusId(out, size, q.gpus[0].index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

Result<std::unique_ptr<Backend>> module_create_backend(const std::filesystem::path& model_dir,
                                                       const BackendOptions& options) {
  const kernels::GpuQuery q = kernels::query_gpus();
  if (q.gpus.empty()) return make_error(ErrorCategory::unsupported_model, "backend.no_gpu", q.why_none);
  auto config = load_model_config(model_dir / "config.json");
  if (!config) return config.error();
  // Random weights (benchmarks) need only config.json; else the checkpoint must hold the text model.
  std::optional<Checkpoint> ckpt;
  if (!options.random_weights) {
    auto opened = Checkpoint::open(model_dir);
    if (!opened) return opened.error();
    if (auto st = opened->validate_text_model(*config); !st) return st.error();
    ckpt.emplace(std::move(*opened));
  }
  if (cudaSetDevice(q.gpus[0].index) != cudaSuccess)
    return make_error(ErrorCategory::unsupported_model, "backend.no_gpu", "cannot use " + q.gpus[0].name);
  KvCacheShape shape;
  shape.n_layers = config->num_layers;
  shape.n_kv_heads = config->num_kv_heads;
  shape.head_dim = config->head_dim;
  shape.block_size = 16;
  // The reference attention kernel keeps a whole row of scores in shared memory; it serves
  // reference math and head sizes the flash kernels do not take.
  const bool needs_reference_attention =
      options.reference_math || !kernels::prefill_attention_supports(config->num_heads, config->num_kv_heads,
                                                                     config->head_dim);
  if (needs_reference_attention && options.kv_format != KvFormat::full)
    return make_error(ErrorCategory::unsupported_model, "backend.kv_format",
                      "an int8 KV cache needs the flash attention kernels (head_dim 64 or 128, no reference math)");
  const int context = needs_reference_attention ? std::min(options.context_tokens, kernels::attention_max_context())
                                                : options.context_tokens;
  if (context < options.context_tokens)
    spdlog::warn("cuda backend: context limited to {} tokens by this attention kernel (asked {})", context,
                 options.context_tokens);
  shape.n_blocks = (context + shape.block_size - 1) / shape.block_size;
  auto backend = load_cuda_backend(std::move(*config), q.gpus[0], shape, ckpt ? &*ckpt : nullptr, options);
  if (!backend) return backend.error();
  const BackendMemory m = (*backend)->memory();
  spdlog::info("cuda backend: {} (sm_{}{}), weights {} MiB, KV cache {} MiB ({} tokens), from {}", q.gpus[0].name,
               q.gpus[0].sm_major, q.gpus[0].sm_minor, m.weights >> 20, m.kv_cache >> 20, shape.tokens(),
               options.random_weights ? std::string("random weights generated on the GPU") : model_dir.string());
  return std::move(*backend);
}

constexpr CudaModuleV1 kModule{
    kCudaModuleAbiVersion, sizeof(BackendOptions), sizeof(Error),
    &module_create_backend, &module_memory_info, &module_copy_bandwidth_gbps, &module_pci_bus_id,
};

}  // namespace
}  // namespace cosmos

extern "C" __attribute__((visibility("default"))) const cosmos::CudaModuleV1* cosmos_cuda_module_v1() {
  return &cosmos::kModule;
}
