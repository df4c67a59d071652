// cosmos-cli generate: streams a reply to stdout; --json prints one object at the end.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cosmos/quant_cache.h"
#include "cosmos/chat_format.h"
#include "cosmos/model_loader.h"
#include "cosmos/reasoning_parser.h"
#include "cosmos/session.h"
#include "cosmos/tune_cache.h"

namespace cosmos::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model;
  std::string device = "auto";
  std::string precision = "bf16";
  KvFormat kv_cache = KvFormat::full;
  std::optional<std::string> prompt;
  std::optional<std::string> messages;
  std::optional<std::string> system;
  bool no_system = false;
  bool raw = false;
  SamplingArgs sampling;
  std::vector<std::string> stop;
  int context = 8192;
  int threads = 0;
  std::optional<std::string> quant_cache;
  bool json = false;
  bool quiet = false;
};

Result<std::vector<ChatMessage>> build_messages(const GenerateArgs& a) {
  std::vector<ChatMessage> msgs;
  if (a.messages) {
    auto text = read_text(*a.messages);
    if (!text) return text.error();
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded())
      return make_error(ErrorCategory::bad_input, "chat.messages", *a.messages + ": not valid JSON");
    auto parsed = parse_chat_messages(j, *a.messages);
    if (!parsed) return parsed.error();
    msgs = std::move(*parsed);
  } else {
    msgs.push_back(ChatMessage::text("user", *a.prompt));
  }
  const bool has_system = !msgs.empty() && msgs.front().role == "system";
  if (a.system) {
    if (has_system) msgs.front() = ChatMessage::text("system", *a.system);
    else msgs.insert(msgs.begin(), ChatMessage::text("system", *a.system));
  } else if (!has_system && !a.no_system) {
    msgs.insert(msgs.begin(), ChatMessage::text("system", kReasoningSystemPrompt));
  }
  return msgs;
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt.has_value() == a.messages.has_value())
    return report(make_error(ErrorCategory::bad_input, "cli.usage", "give exactly one of --prompt TEXT or --messages FILE"));
  auto precision = precision_option(a.precision, a.model, a.device, a.context, a.quiet, a.kv_cache);
  if (!precision) return report(precision.error());
  GenerateOptions g;
  a.sampling.apply(g);
  g.stop_strings = a.stop;
  if (auto st = validate(g.sampling); !st) return report(st.error());

  BackendOptions o;
  o.context_tokens = a.context;
  o.threads = a.threads;
  o.precision = *precision;
  o.kv_format = a.kv_cache;
  if (a.quant_cache) o.quant_cache_dir = a.quant_cache->empty() ? default_quant_cache_dir() : fs::path(*a.quant_cache);
  o.tune_cache_dir = default_tune_cache_dir();  // the GEMM tuner's choices for this GPU (cosmos/tune_cache.h)
  auto model = load_model(a.model, *device_from_string(a.device), o);
  if (!model) return report(model.error());
  if (!model->device_note.empty() && !a.quiet) std::cerr << model->device_note << "\n";

  std::vector<TokenId> prompt;
  if (a.raw && a.prompt) {
    prompt = model->tokenizer->encode(*a.prompt, true);
  } else {
    auto msgs = build_messages(a);
    if (!msgs) return report(msgs.error());
    prompt = chat_token_ids(*model->tokenizer, *msgs);
  }

  Session session(*model->backend, *model->tokenizer);
  ReasoningParser parser;
  auto result = session.generate(prompt, g, [&](std::string_view piece, const GenerationStats&) {
    parser.push(piece);
    if (!a.json && !piece.empty()) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!result) return report(result.error());
  parser.finish();
  const GenerationStats& s = result->stats;
  const nlohmann::json stats = {{"prompt_tokens", s.prompt_tokens},
                                {"reused_tokens", s.reused_tokens},
                                {"generated_tokens", s.generated_tokens},
                                {"ttft_s", s.ttft_s},
                                {"prefill_tok_per_s", s.prefill_tok_per_s},
                                {"decode_tok_per_s", s.decode_tok_per_s},
                                {"stop_reason", to_string(s.stop)},
                                {"device", model->backend->device_name()},
                                {"precision", to_string(model->backend->precision())},
                                {"kv_cache", to_string(model->backend->kv_format())}};
  const BackendMemory mem = model->backend->memory();
  const nlohmann::json memory = {{"weights", mem.weights},     {"kv_cache", mem.kv_cache}, {"workspace", mem.workspace},
                                 {"host", mem.host},           {"on_gpu", mem.on_gpu}};
  if (a.json) {
    const nlohmann::json out = {{"text", result->text},         {"reasoning", parser.reasoning()},
                                {"answer", parser.answer()},      {"token_ids", result->token_ids},
                                {"prompt_ids", prompt},           {"stats", stats},
                                {"memory", memory}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n";
    if (!a.quiet)
      std::fprintf(stderr, "[%d prompt tokens (%d reused), %d generated, first token %.2f s, prefill %.1f tok/s, "
                   "decode %.1f tok/s, stop: %s]\n", s.prompt_tokens, s.reused_tokens, s.generated_tokens, s.ttft_s,
                   s.prefill_tok_per_s, s.decode_tok_per_s, to_string(s.stop));
  }
  return kExitOk;
}

}  // namespace

void register_generate(CLI::App& app, RunFn& run) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate a reply, streamed to stdout");
  cmd->add_option("--model", a->model, "model folder")->required();
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "bf16 | fp16 | fp8 | int8 | int4 | auto (the most accurate that fits the device's free memory)")
      ->capture_default_str();
  cmd->add_option("--prompt", a->prompt, "the user message");
  cmd->add_option("--messages", a->messages, "JSON file of [{\"role\", \"content\"}] (- for stdin)");
  cmd->add_option("--system", a->system, "system prompt (default: Cosmos-Reason1's reasoning prompt)");
  cmd->add_flag("--no-system", a->no_system, "no system prompt of ours (the template's default applies)");
  cmd->add_flag("--raw", a->raw, "--prompt is the exact model input (no chat format)");
  a->sampling.add_to(*cmd);
  cmd->add_option("--stop", a->stop, "stop string (repeatable)");
  add_kv_cache_option(*cmd, a->kv_cache);
  cmd->add_option("--context", a->context, "context length in tokens")->check(CLI::Range(16, 1 << 22))->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0: all cores)");
  cmd->add_option("--quant-cache", a->quant_cache,
                  "keep the quantized weights (int8, fp8, int4) in DIR for the next load; without DIR: " +
                      default_quant_cache_dir().string())
      ->expected(0, 1);
  cmd->add_flag("--json", a->json, "print one JSON object at the end: text, reasoning, answer, token_ids, stats");
  cmd->add_flag("-q,--quiet", a->quiet, "no statistics on stderr");
  cmd->callback([&run, a] { run = [a] { return run_generate(*a); }; });
}

}  // namespace cosmos::cli
