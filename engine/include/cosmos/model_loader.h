// Opens a model folder on a device: the backend (weights + KV cache) and the tokenizer.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cosmos/backend.h"
#include "cosmos/model_config.h"
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

// Precision "auto": the most accurate precision the device that will run the model runs, whose
// memory estimate (cosmos/memory_estimate.h) for `context_tokens` fits its free memory: on a usable
// GPU (device auto or cuda) bf16 or fp16 in the GPU's free memory; on the CPU bf16, int8, fp8 or
// int4 in the available host memory, with a KV cache of `kv` for the context. `note` gets one
// sentence saying what was picked and why.
// Errors: the model's config.json; "backend.memory" (out_of_memory) when nothing fits, with the
// smallest need and the free bytes.
Result<Precision> resolve_auto_precision(const std::filesystem::path& model_dir, Device device, int context_tokens,
                                         std::string& note, KvFormat kv = KvFormat::full);
Result<Precision> resolve_auto_precision(const ModelConfig& config, Device device, int context_tokens, std::string& note,
                                         KvFormat kv = KvFormat::full);

}  // namespace cosmos
