// Opens a model folder on a device: the backend (weights + KV cache) and the tokenizer.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cosmos/backend.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

enum class Device { auto_select, cpu, cuda };
std::optional<Device> device_from_string(std::string_view name);  // "auto", "cpu", "cuda"

struct LoadedModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::string device_note;  // why this device was chosen (shown to the user with --device auto)
};

// Errors: the model folder's own (config, checkpoint, tokenizer) and "backend.cuda_unavailable"
// when --device cuda cannot be honored (the message says why).
Result<LoadedModel> load_model(const std::filesystem::path& model_dir, Device device, const BackendOptions& options);

}  // namespace cosmos
