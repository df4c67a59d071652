#include "cli_common.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>

#include "cosmos/model_loader.h"

namespace cosmos::cli {

int report(const Error& error) {
  spdlog::debug("failed ({}, {}): {}", to_string(error.category), error.code, error.message);
  std::cerr << "error: " << error.message << "\n";
  return error.category == ErrorCategory::internal ? kExitInternal : kExitError;
}

void TokenizerSource::add_to(CLI::App& cmd) {
  auto* t = cmd.add_option("--tokenizer", tokenizer, "tokenizer.json or tokenizer.model file");
  auto* m = cmd.add_option("--model", model, "model folder holding the tokenizer");
  t->excludes(m);
}

Result<std::unique_ptr<Tokenizer>> TokenizerSource::load() const {
  if (tokenizer.empty() && model.empty())
    return make_error(ErrorCategory::bad_input, "cli.usage", "give --tokenizer FILE or --model DIR");
  return load_tokenizer(tokenizer.empty() ? model : tokenizer);
}

Result<Precision> precision_option(const std::string& name, const std::string& model_dir, const std::string& device,
                                   int context, bool quiet, KvFormat kv) {
  if (name == "auto") {
    std::string note;
    auto picked = resolve_auto_precision(model_dir, *device_from_string(device), context, note, kv);
    if (!picked) return picked.error();
    if (!quiet) std::cerr << note << "\n";
    return *picked;
  }
  if (auto p = precision_from_string(name)) return *p;
  return make_error(ErrorCategory::bad_input, "cli.usage", "unknown precision \"" + name + "\"");
}

void add_kv_cache_option(CLI::App& cmd, KvFormat& kv) {
  cmd.add_option_function<std::string>(
         "--kv-cache", [&kv](const std::string& name) { kv = kv_format_from_string(name).value_or(KvFormat::full); },
         "how the KV cache stores K and V: full (bf16 on the GPU, fp32 on the CPU) or int8 (a scale per token and "
         "head; about half of bf16's bytes, on both backends)")
      ->check(CLI::IsMember({"full", "int8"}))
      ->default_str("full");
}

void SamplingArgs::add_to(CLI::App& cmd) {
  cmd.add_option("--max-tokens", max_tokens, "most new tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd.add_option("--temperature", temperature, "0: greedy")->capture_default_str();
  cmd.add_option("--top-p", top_p)->capture_default_str();
  cmd.add_option("--top-k", top_k, "0: off")->capture_default_str();
  cmd.add_option("--min-p", min_p, "0: off")->capture_default_str();
  cmd.add_option("--repetition-penalty", repetition_penalty)->capture_default_str();
  cmd.add_option("--seed", seed)->capture_default_str();
}

void SamplingArgs::apply(GenerateOptions& g) const {
  g.sampling.temperature = temperature;
  g.sampling.top_p = top_p;
  g.sampling.top_k = top_k;
  g.sampling.min_p = min_p;
  g.sampling.repetition_penalty = repetition_penalty;
  g.sampling.seed = seed;
  g.max_new_tokens = max_tokens;
}

Result<std::string> read_text(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(ErrorCategory::bad_input, "file.missing", path + ": cannot open file");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return make_error(ErrorCategory::io, "file.read", path + ": read error");
  return s;
}

}  // namespace cosmos::cli
