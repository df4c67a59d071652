// Helpers shared by cosmos-cli subcommands.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cosmos/error.h"
#include "cosmos/kv_format.h"
#include "cosmos/precision.h"
#include "cosmos/session.h"
#include "cosmos/tokenizer.h"

namespace cosmos::cli {

// Each subcommand registers itself and returns the exit code when it runs.
using RunFn = std::function<int()>;
void register_tokenize(CLI::App& app, RunFn& run);
void register_chat_prompt(CLI::App& app, RunFn& run);
void register_inspect(CLI::App& app, RunFn& run);
void register_make_test_model(CLI::App& app, RunFn& run);
void register_bench_tokenizer(CLI::App& app, RunFn& run);
void register_generate(CLI::App& app, RunFn& run);
void register_logits(CLI::App& app, RunFn& run);
void register_bench(CLI::App& app, RunFn& run);
void register_tune(CLI::App& app, RunFn& run);
void register_batch(CLI::App& app, RunFn& run);
#ifdef COSMOS_CLI_HAS_CONVERSATIONS
void register_conversations(CLI::App& app, RunFn& run);  // needs Qt: built with COSMOS_WITH_UI
void register_import(CLI::App& app, RunFn& run);         // needs Qt: built with COSMOS_WITH_UI
void register_export(CLI::App& app, RunFn& run);         // needs Qt: built with COSMOS_WITH_UI
void register_download(CLI::App& app, RunFn& run);       // needs Qt: built with COSMOS_WITH_UI
#endif

// Exit codes (all below 128).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // bad input, unsupported model, I/O
inline constexpr int kExitInternal = 3;  // bug or unexpected library failure

// Prints "error: <message>" to stderr (and the log) and returns the exit code for it.
int report(const Error& error);

// Options --tokenizer FILE | --model DIR, shared by several subcommands.
struct TokenizerSource {
  std::string tokenizer;
  std::string model;
  void add_to(CLI::App& cmd);
  Result<std::unique_ptr<Tokenizer>> load() const;
};

// --precision NAME for a model folder: a named precision, or "auto" (the most accurate that fits the
// device at `context` tokens; what it picked is said on stderr unless quiet). Errors: an unknown name,
// or resolve_auto_precision's.
Result<Precision> precision_option(const std::string& name, const std::string& model_dir, const std::string& device,
                                   int context, bool quiet, KvFormat kv = KvFormat::full);

// --kv-cache full | int8 (cosmos/kv_format.h) into `kv`.
void add_kv_cache_option(CLI::App& cmd, KvFormat& kv);

// The sampling and length options of generate and batch (--max-tokens, --temperature, --top-p,
// --top-k, --min-p, --repetition-penalty, --seed), with the app's defaults.
struct SamplingArgs {
  int max_tokens = 4096;
  float temperature = 0.6f;
  float top_p = 0.95f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.05f;
  std::uint64_t seed = 0;
  void add_to(CLI::App& cmd);
  void apply(GenerateOptions& g) const;  // sets g.sampling and g.max_new_tokens
};

// Whole file ("-" is standard input).
Result<std::string> read_text(const std::string& path);

}  // namespace cosmos::cli
