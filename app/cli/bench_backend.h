// The backend bench and tune time: a model folder, or a random model of a preset's shape (on the
// GPU the weights are generated there; on the CPU a random checkpoint is written to a scratch
// folder, removed again when the loaded backend is dropped).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "cosmos/backend.h"
#include "cosmos/error.h"
#include "cosmos/model_loader.h"

namespace cosmos::cli {

struct BenchBackend {
  std::unique_ptr<Backend> backend;
  std::string device_note;  // why the CPU runs it, or the loader's note; empty if none
  std::filesystem::path scratch;
  BenchBackend() = default;
  BenchBackend(const BenchBackend&) = delete;
  BenchBackend& operator=(const BenchBackend&) = delete;
  ~BenchBackend();
};

// `tag` names the scratch folder (cosmos-<tag>-<preset>-<pid>). Exactly one of model / random.
Result<std::unique_ptr<BenchBackend>> load_bench_backend(const std::string& model, const std::string& random,
                                                         Device device, BackendOptions options, const std::string& tag);

}  // namespace cosmos::cli
