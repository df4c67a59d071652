#include "cosmos/model_loader.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include <spdlog/spdlog.h>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/model_config.h"

namespace cosmos {

std::optional<Device> device_from_string(std::string_view name) {
  if (name == "auto") return Device::auto_select;
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  return std::nullopt;
}

Result<LoadedModel> load_model(const std::filesystem::path& model_dir, Device device, const BackendOptions& options) {
  LoadedModel m;
  auto tok = load_tokenizer(model_dir);
  if (!tok) return tok.error();
  m.tokenizer = std::move(*tok);
  if (device != Device::cpu) {
    auto gpu = create_cuda_backend(model_dir, options);
    if (gpu) {
      m.backend = std::move(*gpu);
      return m;
    }
    // --device cuda: the reason is the error. auto: fall back to the CPU for reasons of the GPU
    // side (no GPU, out of GPU memory, a precision the GPU path lacks), saying why; errors in the
    // model folder itself are reported as they are.
    const Error& e = gpu.error();
    const bool gpu_side = e.code.rfind("backend.", 0) == 0;
    if (device == Device::cuda || !gpu_side) {
      if (device == Device::cuda && e.code == "backend.no_gpu")
        return make_error(e.category, "backend.cuda_unavailable", e.message + "; use --device cpu");
      return e;
    }
    m.device_note = "using the CPU: " + e.message;
    spdlog::info("{}", m.device_note);
  }
  auto backend = create_cpu_backend(model_dir, options);
  if (!backend) return backend.error();
  m.backend = std::move(*backend);
  return m;
}

Result<Precision> resolve_auto_precision(const std::filesystem::path& model_dir, Device device, int context_tokens,
                                         std::string& note, KvFormat kv) {
  auto config = load_model_config(model_dir / "config.json");
  if (!config) return config.error();
  return resolve_auto_precision(*config, device, context_tokens, note, kv);
}

Result<Precision> resolve_auto_precision(const ModelConfig& config, Device device, int context_tokens, std::string& note,
                                         KvFormat kv) {
  EstimateOptions o;
  o.context_tokens = context_tokens;
  o.kv_format = kv;
  const std::optional<DeviceMemoryInfo> gpu = device == Device::cpu ? std::nullopt : gpu_memory_info();
  const bool on_gpu = gpu.has_value();
  o.gpu = on_gpu;
  // The GPU runs every format (fp16 is never chosen over bf16: the same size); the CPU all but fp16.
  static constexpr std::span<const Precision> kGpu = kPrecisionsByAccuracy;
  static constexpr Precision kCpu[] = {Precision::bf16, Precision::int8, Precision::fp8, Precision::int4};
  const std::uint64_t budget = on_gpu ? gpu->total - std::min(gpu->used, gpu->total) : available_host_memory();
  const std::span<const Precision> candidates = on_gpu ? kGpu : std::span<const Precision>(kCpu);
  const std::string where = on_gpu ? "free on the GPU" : "available on the host";
  auto gib = [](std::uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
    return std::string(buf);
  };
  if (budget == 0) {  // unknown: the most accurate, and say so
    note = "precision auto: " + std::string(to_string(candidates.front())) + " (free memory unknown)";
    return candidates.front();
  }
  if (auto p = most_accurate_that_fits(config, o, budget, candidates)) {
    note = "precision auto: " + std::string(to_string(*p)) + " (needs about " +
           gib(estimate_memory(config, *p, o).total()) + " for " + std::to_string(context_tokens) +
           " tokens of context; " + gib(budget) + " " + where + ")";
    return *p;
  }
  const Precision smallest = candidates.back();
  return make_error(ErrorCategory::out_of_memory, "backend.memory",
                    "no precision fits: " + std::string(to_string(smallest)) + " needs about " +
                        gib(estimate_memory(config, smallest, o).total()) + " for " + std::to_string(context_tokens) +
                        " tokens of context, " + gib(budget) + " " + where + "; try a shorter --context");
}

}  // namespace cosmos
