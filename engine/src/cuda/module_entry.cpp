// The CUDA backend's entry points (cosmos/cuda_backend.h): GPU checks, model folder checks, then
// load_cuda_backend().
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "cosmos/cuda_backend.h"
#include "cuda/cuda_backend_internal.h"
#include "kernels/attention.cuh"
#include "kernels/device_info.cuh"

namespace cosmos {

bool cuda_backend_built() { return true; }

std::optional<DeviceMemoryInfo> gpu_memory_info() {
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return DeviceMemoryInfo{total_b - free_b, total_b};
}

double gpu_copy_bandwidth_gbps() {
  if (kernels::query_gpus().gpus.empty()) return 0;
  return kernels::measure_copy_gbps();
}

Result<std::unique_ptr<Backend>> create_cuda_backend(const std::filesystem::path& model_dir,
                                                     const BackendOptions& options) {
  if (options.precision != Precision::bf16)
    return make_error(ErrorCategory::unsupported_model, "backend.precision",
                      std::string("the CUDA backend runs bf16 today; ") + std::string(to_string(options.precision)) +
                          " arrives with the quantization work");
  const kernels::GpuQuery q = kernels::query_gpus();
  if (q.gpus.empty()) return make_error(ErrorCategory::unsupported_model, "backend.no_gpu", q.why_none);
  auto config = load_model_config(model_dir / "config.json");
  if (!config) return config.error();
  auto ckpt = Checkpoint::open(model_dir);
  if (!ckpt) return ckpt.error();
  if (auto st = ckpt->validate_text_model(*config); !st) return st.error();
  if (cudaSetDevice(q.gpus[0].index) != cudaSuccess)
    return make_error(ErrorCategory::unsupported_model, "backend.no_gpu", "cannot use " + q.gpus[0].name);
  KvCacheShape shape;
  shape.n_layers = config->num_layers;
  shape.n_kv_heads = config->num_kv_heads;
  shape.head_dim = config->head_dim;
  shape.block_size = 16;
  const int context = std::min(options.context_tokens, kernels::attention_max_context());
  if (context < options.context_tokens)
    spdlog::warn("cuda backend: context limited to {} tokens by this attention kernel (asked {})", context,
                 options.context_tokens);
  shape.n_blocks = (context + shape.block_size - 1) / shape.block_size;
  auto backend = load_cuda_backend(std::move(*config), q.gpus[0], shape, *ckpt, options);
  if (!backend) return backend.error();
  const BackendMemory m = (*backend)->memory();
  spdlog::info("cuda backend: {} (sm_{}{}), weights {} MiB, KV cache {} MiB ({} tokens), from {}", q.gpus[0].name,
               q.gpus[0].sm_major, q.gpus[0].sm_minor, m.weights >> 20, m.kv_cache >> 20, shape.tokens(),
               model_dir.string());
  return std::move(*backend);
}

}  // namespace cosmos
