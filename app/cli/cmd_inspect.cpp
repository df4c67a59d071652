// cosmos-cli inspect: what a model folder holds and what it needs in GPU memory per precision.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cosmos/checkpoint.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/model_tensors.h"

namespace cosmos::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  int context = 8192;
  KvFormat kv_cache = KvFormat::full;
};

std::string human_bytes(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  if (b < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  return buf;
}

int run_inspect(const InspectArgs& a) {
  namespace fs = std::filesystem;
  const fs::path dir = a.model;
  if (!fs::is_directory(dir))
    return report(make_error(ErrorCategory::bad_input, "model.folder", a.model + ": not a folder"));
  auto config = load_model_config(dir / "config.json");
  if (!config) return report(config.error());
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt) return report(ckpt.error());
  if (auto st = ckpt->validate_text_model(*config); !st) return report(st.error());

  std::uint64_t text_bytes = 0, vision_bytes = 0;
  std::map<std::string, int> dtypes;
  for (const auto& t : ckpt->tensors()) {
    (t.name.rfind("visual.", 0) == 0 ? vision_bytes : text_bytes) += t.info.nbytes;
    dtypes[std::string(dtype_name(t.info.dtype))]++;
  }
  nlohmann::json tokenizer = nullptr;
  if (auto tok = load_tokenizer(dir); tok) {
    tokenizer = {{"kind", (*tok)->kind()}, {"vocab_size", (*tok)->vocab_size()}};
  } else {
    tokenizer = {{"error", tok.error().message}};
  }
  const ModelConfig& c = *config;
  nlohmann::json estimates = nlohmann::json::object();
  EstimateOptions eo;
  eo.context_tokens = a.context;
  eo.kv_format = a.kv_cache;
  for (Precision p : kAllPrecisions) {
    const MemoryEstimate e = estimate_memory(c, p, eo);
    estimates[std::string(to_string(p))] = {
        {"weights", e.weights()}, {"kv_cache", e.kv_cache}, {"workspace", e.workspace}, {"total", e.total()},
        {"host", e.host}};
  }
  nlohmann::json out = {
      {"model_dir", fs::absolute(dir).string()},
      {"architecture", c.architecture},
      {"model_type", c.model_type},
      {"config_form", c.form == ConfigForm::text_config ? "text_config" : "top_level"},
      {"rope_form", c.rope_parameters_form ? "rope_parameters" : "rope_scaling"},
      {"text", {{"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
                {"layers", c.num_layers}, {"heads", c.num_heads}, {"kv_heads", c.num_kv_heads},
                {"head_dim", c.head_dim}, {"vocab_size", c.vocab_size}, {"rope_theta", c.rope_theta},
                {"rms_norm_eps", c.rms_norm_eps}, {"mrope_section", c.mrope_section},
                {"tie_word_embeddings", c.tie_word_embeddings}, {"dtype", c.torch_dtype}}},
      {"vision", c.vision ? nlohmann::json{{"depth", c.vision->depth}, {"hidden_size", c.vision->hidden_size},
                                           {"heads", c.vision->num_heads}, {"patch_size", c.vision->patch_size}}
                          : nlohmann::json(nullptr)},
      {"layout", to_string(ckpt->layout())},
      {"shards", ckpt->shard_count()},
      {"tensor_count", ckpt->tensors().size()},
      {"tensor_bytes", ckpt->total_bytes()},
      {"text_tensor_bytes", text_bytes},
      {"vision_tensor_bytes", vision_bytes},
      {"dtypes", dtypes},
      {"tokenizer", tokenizer},
      {"context", a.context},
      {"kv_cache_format", to_string(a.kv_cache)},
      {"estimates", estimates},
  };
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "model        " << out["model_dir"].get<std::string>() << "\n"
            << "architecture " << c.architecture << " (" << c.model_type << ", config "
            << out["config_form"].get<std::string>() << ", " << out["rope_form"].get<std::string>() << ")\n"
            << "text model   " << c.num_layers << " layers, hidden " << c.hidden_size << ", MLP "
            << c.intermediate_size << ", heads " << c.num_heads << "/" << c.num_kv_heads << " (q/kv) x "
            << c.head_dim << ", vocab " << c.vocab_size << ", rope theta " << c.rope_theta << "\n";
  if (c.vision)
    std::cout << "vision tower " << c.vision->depth << " blocks, hidden " << c.vision->hidden_size << "\n";
  std::cout << "weights      " << ckpt->tensors().size() << " tensors in " << ckpt->shard_count() << " shard(s), "
            << to_string(ckpt->layout()) << " layout, " << human_bytes(ckpt->total_bytes()) << " (text "
            << human_bytes(text_bytes) << ", vision " << human_bytes(vision_bytes) << ")\n"
            << "tokenizer    "
            << (tokenizer.contains("kind") ? tokenizer["kind"].get<std::string>() + ", " +
                                                 std::to_string(tokenizer["vocab_size"].get<std::size_t>()) + " ids"
                                           : tokenizer["error"].get<std::string>())
            << "\n\nGPU memory estimate at " << a.context << " tokens of context (text model, "
            << (a.kv_cache == KvFormat::int8 ? "int8" : "bf16") << " KV cache):\n"
            << "  precision   weights      KV cache     workspace    total\n";
  for (Precision p : kAllPrecisions) {
    const auto& e = estimates[std::string(to_string(p))];
    const std::uint64_t host = e["host"];
    std::printf("  %-10s  %-11s  %-11s  %-11s  %s%s\n", std::string(to_string(p)).c_str(),
                human_bytes(e["weights"]).c_str(), human_bytes(e["kv_cache"]).c_str(),
                human_bytes(e["workspace"]).c_str(), human_bytes(e["total"]).c_str(),
                host ? ("  (+ " + human_bytes(host) + " embedding in host memory)").c_str() : "");
  }
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

void register_inspect(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Summarize a model folder and estimate GPU memory per precision");
  cmd->add_option("--model", args->model, "model folder")->required();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_option("--context", args->context, "context length for the KV-cache estimate")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  add_kv_cache_option(*cmd, args->kv_cache);
  cmd->callback([&run, args] { run = [args] { return run_inspect(*args); }; });
}

}  // namespace cosmos::cli
