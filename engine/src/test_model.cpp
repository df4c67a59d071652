#include "cosmos/test_model.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cosmos/chat_format.h"
#include "cosmos/model_tensors.h"
#include "cosmos/safetensors.h"

namespace cosmos {
namespace {

enum RoleKind { kNorm = 0, kBias = 1, kEmbedding = 2, kMatrix = 3 };

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t splitmix64(std::uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

int role_kind(const ExpectedTensor& t) {
  if (t.role == TensorRole::embedding) return kEmbedding;
  const bool is_norm = t.name.find("norm") != std::string::npos || t.name.find("ln_q") != std::string::npos;
  if (is_norm) return kNorm;
  if (t.shape.size() == 1) return kBias;
  return kMatrix;
}

std::uint64_t in_features(const ExpectedTensor& t) {
  std::uint64_t n = 1;
  for (std::size_t d = 1; d < t.shape.size(); ++d) n *= static_cast<std::uint64_t>(t.shape[d]);
  return n;
}

// Fills `out` (bf16) with the generator's values, split over threads for the 7B preset.
void fill_tensor(std::uint64_t seed, const ExpectedTensor& t, std::vector<std::uint16_t>& out) {
  const std::uint64_t n = t.numel();
  out.resize(n);
  const int kind = role_kind(t);
  const std::uint64_t fan_in = in_features(t);
  const unsigned threads = n > (1u << 22) ? std::max(1u, std::thread::hardware_concurrency()) : 1u;
  auto work = [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i)
      out[i] = to_bf16(test_weight_value(seed, t.name, kind, i, fan_in));
  };
  if (threads == 1) {
    work(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::uint64_t step = (n + threads - 1) / threads;
  for (unsigned k = 0; k < threads; ++k)
    pool.emplace_back(work, std::min(n, k * step), std::min(n, (k + 1) * step));
  for (auto& th : pool) th.join();
}

std::string stored_name(const std::string& canonical, TensorLayout layout) {
  if (layout == TensorLayout::original) return canonical;
  if (canonical.rfind("model.", 0) == 0) return "model.language_model." + canonical.substr(6);
  if (canonical.rfind("visual.", 0) == 0) return "model." + canonical;
  return canonical;
}

Status write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return make_error(ErrorCategory::io, "file.write", path.string() + ": cannot write");
  return ok_status();
}

}  // namespace

float test_weight_value(std::uint64_t seed, const std::string& canonical_name, int kind, std::uint64_t i,
                        std::uint64_t fan_in) {
  const std::uint64_t key = seed ^ fnv1a64(canonical_name);
  const std::uint64_t bits = splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15ull);
  const float u = static_cast<float>(bits >> 40) / 8388608.0f - 1.0f;
  switch (kind) {
    case kNorm: return 1.0f + 0.1f * u;
    case kBias: return 0.1f * u;
    case kEmbedding: return u;
    default: return u * std::sqrt(3.0f / static_cast<float>(fan_in));
  }
}

TestWeightSpec test_weight_spec(std::uint64_t seed, const ExpectedTensor& t) {
  return TestWeightSpec{seed ^ fnv1a64(t.name), role_kind(t), in_features(t)};
}

Status write_test_config(const std::string& preset, const std::filesystem::path& out_dir) {
  auto config = preset_config(preset);
  if (!config) return config.error();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", out_dir.string() + ": " + ec.message());
  return write_text(out_dir / "config.json", config->to_json().dump(2) + "\n");
}

Result<ModelConfig> preset_config(const std::string& preset) {
  if (preset == "tiny") return tiny_test_config();
  if (preset == "tiny-hd128") {
    // The real head size (128) and grouped-query layout with few, narrow layers: for GPU kernels
    // that only take the 7B attention shape.
    ModelConfig c = tiny_test_config();
    c.hidden_size = 512;
    c.intermediate_size = 256;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.mrope_section = {16, 24, 24};
    c.vision->out_hidden_size = 512;
    return c;
  }
  if (preset == "cosmos-reason1-7b") return cosmos_reason1_7b_config();
  return make_error(ErrorCategory::bad_input, "test_model.preset",
                    "unknown preset \"" + preset + "\" (expected tiny, tiny-hd128 or cosmos-reason1-7b)");
}

Status make_test_model(const TestModelOptions& o) {
  namespace fs = std::filesystem;
  auto config = preset_config(o.preset);
  if (!config) return config.error();
  if (o.shards < 1 || o.shards > 64)
    return make_error(ErrorCategory::bad_input, "test_model.shards", "--shards must be 1..64");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", o.out_dir.string() + ": " + ec.message());
  if (!o.tokenizer_json.empty()) {
    if (!fs::exists(o.tokenizer_json))
      return make_error(ErrorCategory::bad_input, "file.missing",
                        o.tokenizer_json.string() + ": tokenizer.json not found (run packaging/setup.sh)");
    fs::copy_file(o.tokenizer_json, o.out_dir / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error(ErrorCategory::io, "file.write", (o.out_dir / "tokenizer.json").string() + ": " + ec.message());
  }

  std::vector<ExpectedTensor> all = text_model_tensors(*config);
  for (auto& t : vision_tensors(*config)) all.push_back(std::move(t));
  std::uint64_t total = 0;
  for (const auto& t : all) total += t.numel() * 2;

  // Shards of about equal size, tensors in canonical order.
  const std::uint64_t per_shard = (total + o.shards - 1) / o.shards;
  std::vector<std::vector<const ExpectedTensor*>> groups(o.shards);
  std::uint64_t acc = 0;
  for (const auto& t : all) {
    std::size_t g = std::min<std::size_t>(o.shards - 1, per_shard ? acc / per_shard : 0);
    groups[g].push_back(&t);
    acc += t.numel() * 2;
  }

  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t done = 0;
  for (int s = 0; s < o.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, o.shards);
    const std::string file = o.shards == 1 ? "model.safetensors" : name;
    std::vector<std::vector<std::uint16_t>> buffers(groups[s].size());
    std::vector<TensorToWrite> tensors;
    for (std::size_t k = 0; k < groups[s].size(); ++k) {
      const ExpectedTensor& t = *groups[s][k];
      fill_tensor(o.seed, t, buffers[k]);
      const std::string stored = stored_name(t.name, o.layout);
      tensors.push_back({stored, DType::bf16, t.shape,
                         std::as_bytes(std::span<const std::uint16_t>(buffers[k]))});
      weight_map[stored] = file;
      done += t.numel() * 2;
      if (o.progress) o.progress(done, total);
    }
    if (auto st = write_safetensors(o.out_dir / file, tensors, {{"format", "pt"}}); !st) return st.error();
  }
  if (o.shards > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    if (auto st = write_text(o.out_dir / "model.safetensors.index.json", index.dump(2) + "\n"); !st) return st;
  }

  if (auto st = write_text(o.out_dir / "config.json", config->to_json().dump(2) + "\n"); !st) return st;
  nlohmann::json gen = {{"bos_token_id", 151643},       {"pad_token_id", 151643},
                        {"eos_token_id", {151645, 151643}}, {"do_sample", true},
                        {"temperature", 0.6},           {"top_p", 0.95},
                        {"repetition_penalty", 1.05},   {"max_new_tokens", 4096},
                        {"transformers_version", "4.51.3"}};
  if (auto st = write_text(o.out_dir / "generation_config.json", gen.dump(2) + "\n"); !st) return st;
  nlohmann::json tok_config = {{"model_max_length", config->max_position_embeddings},
                               {"tokenizer_class", "Qwen2Tokenizer"},
                               {"bos_token", nullptr},
                               {"eos_token", "<|im_end|>"},
                               {"pad_token", "<|endoftext|>"},
                               {"add_bos_token", false},
                               {"clean_up_tokenization_spaces", false},
                               {"split_special_tokens", false},
                               {"chat_template", qwen25vl_chat_template()}};
  if (auto st = write_text(o.out_dir / "tokenizer_config.json", tok_config.dump(2) + "\n"); !st) return st;
  return ok_status();
}

}  // namespace cosmos
