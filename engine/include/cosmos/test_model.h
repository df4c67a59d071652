// make-test-model: writes a complete Qwen2.5-VL model folder with deterministic weights, so every
// test and benchmark can run without downloading 16 GB.
//
// Weight generator (reproducible from this description alone):
//   key      = seed XOR fnv1a64(canonical tensor name)
//   bits(i)  = splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15)   for element i in row-major order
//   u(i)     = (bits(i) >> 40) / 2^23 - 1                        uniform in [-1, 1)
//   value    = norms: 1 + 0.1 u;  biases: 0.1 u;  embedding: u;
//              other matrices [out, in]: u * sqrt(3 / in)   (unit-variance outputs)
//   stored   = bf16 of value, rounded to nearest even
// where splitmix64(z): z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
// z ^= z >> 31.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "cosmos/checkpoint.h"
#include "cosmos/error.h"
#include "cosmos/model_config.h"
#include "cosmos/model_tensors.h"

namespace cosmos {

struct TestModelOptions {
  std::string preset = "tiny";  // tiny | cosmos-reason1-7b
  std::uint64_t seed = 0;
  TensorLayout layout = TensorLayout::original;
  int shards = 2;               // 1 writes model.safetensors without an index
  std::filesystem::path tokenizer_json;  // copied into the folder
  std::filesystem::path out_dir;
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;  // bytes
};

Result<ModelConfig> preset_config(const std::string& preset);

// The value the generator gives element i of the named tensor (fp32, before bf16 rounding).
float test_weight_value(std::uint64_t seed, const std::string& canonical_name, int role_kind,
                        std::uint64_t i, std::uint64_t in_features);

// The generator's per-tensor key (seed XOR fnv1a64(name)) and role kind (0 norm, 1 bias,
// 2 embedding, 3 matrix) with its fan-in, for generating the same values elsewhere (the GPU).
struct TestWeightSpec {
  std::uint64_t key = 0;
  int kind = 3;
  std::uint64_t fan_in = 1;
};
TestWeightSpec test_weight_spec(std::uint64_t seed, const ExpectedTensor& tensor);

// Writes config.json only (no weights, no tokenizer): for backends that generate the weights.
Status write_test_config(const std::string& preset, const std::filesystem::path& out_dir);

Status make_test_model(const TestModelOptions& options);

}  // namespace cosmos
