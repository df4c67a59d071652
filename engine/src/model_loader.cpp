#include "cosmos/model_loader.h"

#include <spdlog/spdlog.h>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"

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

}  // namespace cosmos
