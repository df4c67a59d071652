#include "bench_backend.h"

#include <unistd.h>

#include <iostream>

#include "cosmos/cuda_backend.h"
#include "cosmos/test_model.h"

namespace cosmos::cli {

namespace fs = std::filesystem;

BenchBackend::~BenchBackend() {
  backend.reset();  // before its folder goes
  std::error_code ec;
  if (!scratch.empty()) fs::remove_all(scratch, ec);
}

Result<std::unique_ptr<BenchBackend>> load_bench_backend(const std::string& model, const std::string& random,
                                                         Device device, BackendOptions bo, const std::string& tag) {
  auto out = std::make_unique<BenchBackend>();
  const fs::path scratch = fs::temp_directory_path() / ("cosmos-" + tag + "-" + random + "-" + std::to_string(::getpid()));
  if (!random.empty() && device != Device::cpu) {
    out->scratch = scratch;
    if (auto st = write_test_config(random, scratch); !st) return st.error();
    bo.random_weights = 1;
    auto gpu = create_cuda_backend(scratch, bo);
    bo.random_weights.reset();
    if (gpu) {
      out->backend = std::move(*gpu);
      return out;
    }
    if (device == Device::cuda) return gpu.error();
    out->device_note = "using the CPU: " + gpu.error().message;
  }
  fs::path dir = model;
  if (!random.empty()) {
    out->scratch = scratch;
    TestModelOptions o;
    o.preset = random;
    o.seed = 1;
    o.shards = 4;
    o.tokenizer_json = COSMOS_DEFAULT_TEST_TOKENIZER;
    o.out_dir = scratch;
    std::cerr << tag << ": writing a random " << random << " model to " << scratch.string() << "\n";
    if (auto st = make_test_model(o); !st) return st.error();
    dir = scratch;
  }
  auto loaded = load_model(dir, out->device_note.empty() ? device : Device::cpu, bo);
  if (!loaded) return loaded.error();
  out->backend = std::move(loaded->backend);
  if (out->device_note.empty()) out->device_note = loaded->device_note;
  return out;
}

}  // namespace cosmos::cli
