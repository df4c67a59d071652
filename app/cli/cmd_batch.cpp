// cosmos-cli batch: many requests from a JSONL file, run together with continuous batching
// (cosmos/batch_scheduler.h), one result per input line, in input order, to a JSONL file.
//   input line:  {"id": ..., "prompt": "..."} or {"id": ..., "messages": [...]}, optionally with
//                "system", "max_tokens", "temperature", "top_p", "top_k", "min_p",
//                "repetition_penalty", "seed", "stop" (the command's options are the defaults)
//   output line: {"id", "line", "text", "reasoning", "answer", "token_ids", "stats"} or, for a line
//                that could not run, {"id", "line", "error": {"code", "message"}}
// A bad line is reported on stderr with its line number; the others still run. Blank lines are
// skipped. The output is written to a temporary file next to it and renamed at the end, so a
// failure (a full disk) leaves no half-written file. Exit code 1 when any line failed.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cosmos/batch_scheduler.h"
#include "cosmos/chat_format.h"
#include "cosmos/model_loader.h"
#include "cosmos/quant_cache.h"
#include "cosmos/reasoning_parser.h"
#include "cosmos/tune_cache.h"

namespace cosmos::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct BatchArgs {
  std::string model, input, output;
  std::string device = "auto";
  std::string precision = "bf16";
  KvFormat kv_cache = KvFormat::full;
  int max_batch = 16;
  int step_tokens = 512;
  SamplingArgs sampling;  // the defaults of every line
  int context = 8192;
  int threads = 0;
  bool quiet = false;
};

struct Line {
  int number = 0;  // 1-based line of the input file
  json id;
  std::vector<TokenId> prompt;
  GenerateOptions options;
  std::optional<Error> error;  // could not run
  int request = -1;            // the scheduler's index
};

template <typename T>
std::optional<std::string> read_field(const json& j, const char* key, T& out) {
  if (!j.contains(key)) return std::nullopt;
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, float>) {
    if (!v.is_number()) return std::string("\"") + key + "\" must be a number";
    out = v.get<float>();
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (!v.is_number_unsigned()) return std::string("\"") + key + "\" must be a non-negative integer";
    out = v.get<std::uint64_t>();
  } else {
    if (!v.is_number_integer()) return std::string("\"") + key + "\" must be an integer";
    out = v.get<int>();
  }
  return std::nullopt;
}

// One input line into a request; errors name the line.
void parse_line(const std::string& text, const BatchArgs& a, const Tokenizer& tok, Line& l) {
  auto bad = [&](const std::string& why) {
    l.error = make_error(ErrorCategory::bad_input, "batch.line", "line " + std::to_string(l.number) + ": " + why);
  };
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  l.id = j.contains("id") ? j.at("id") : json(l.number);
  const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
  if (has_prompt == has_messages) return bad("give exactly one of \"prompt\" or \"messages\"");
  std::vector<ChatMessage> msgs;
  if (has_prompt) {
    if (!j.at("prompt").is_string()) return bad("\"prompt\" must be a string");
    msgs.push_back(ChatMessage::text("user", j.at("prompt").get<std::string>()));
  } else {
    auto parsed = parse_chat_messages(j.at("messages"), "line " + std::to_string(l.number));
    if (!parsed) return bad(parsed.error().message);
    msgs = std::move(*parsed);
  }
  std::string system = kReasoningSystemPrompt;
  if (j.contains("system")) {
    if (!j.at("system").is_string()) return bad("\"system\" must be a string");
    system = j.at("system").get<std::string>();
  }
  if (msgs.empty() || msgs.front().role != "system") msgs.insert(msgs.begin(), ChatMessage::text("system", system));
  GenerateOptions& g = l.options;
  a.sampling.apply(g);
  for (auto err : {read_field(j, "max_tokens", g.max_new_tokens), read_field(j, "temperature", g.sampling.temperature),
                   read_field(j, "top_p", g.sampling.top_p), read_field(j, "top_k", g.sampling.top_k),
                   read_field(j, "min_p", g.sampling.min_p),
                   read_field(j, "repetition_penalty", g.sampling.repetition_penalty),
                   read_field(j, "seed", g.sampling.seed)})
    if (err) return bad(*err);
  if (g.max_new_tokens < 1) return bad("\"max_tokens\" must be at least 1");
  if (j.contains("stop")) {
    const json& s = j.at("stop");
    if (!s.is_array()) return bad("\"stop\" must be an array of strings");
    for (const json& x : s) {
      if (!x.is_string()) return bad("\"stop\" must be an array of strings");
      g.stop_strings.push_back(x.get<std::string>());
    }
  }
  if (auto st = validate(g.sampling); !st) return bad(st.error().message);
  l.prompt = chat_token_ids(tok, msgs);
}

json error_json(const Error& e) { return {{"code", e.code}, {"message", e.message}}; }

void draw_progress(const BatchProgress& p, double elapsed) {
  constexpr int kWidth = 30;
  const int filled = p.total ? kWidth * p.finished / p.total : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %d/%d done, %d running, %d waiting, %lld tokens, %.1f tok/s ", bar.c_str(), p.finished,
               p.total, p.running, p.waiting, p.generated_tokens, p.generated_tokens / std::max(elapsed, 1e-9));
  std::fflush(stderr);
}

int run_batch(const BatchArgs& a) {
  auto text = read_text(a.input);
  if (!text) return report(text.error());
  auto precision = precision_option(a.precision, a.model, a.device, a.context, a.quiet, a.kv_cache);
  if (!precision) return report(precision.error());
  BackendOptions o;
  o.context_tokens = a.context;
  o.threads = a.threads;
  o.precision = *precision;
  o.kv_format = a.kv_cache;
  o.tune_cache_dir = default_tune_cache_dir();
  auto model = load_model(a.model, *device_from_string(a.device), o);
  if (!model) return report(model.error());
  if (!model->device_note.empty() && !a.quiet) std::cerr << model->device_note << "\n";

  std::vector<Line> lines;
  std::istringstream in(*text);
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    if (raw.find_first_not_of(" \t\r") == std::string::npos) continue;
    Line l;
    l.number = number;
    parse_line(raw, a, *model->tokenizer, l);
    if (l.error) std::cerr << "error: " << l.error->message << " (the other lines still run)\n";
    lines.push_back(std::move(l));
  }

  BatchSchedulerOptions so;
  so.max_batch = a.max_batch;
  so.step_tokens = a.step_tokens;
  BatchScheduler sched(*model->backend, *model->tokenizer, so);
  for (Line& l : lines)
    if (!l.error) l.request = sched.submit(l.prompt, l.options);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (auto st = sched.run([&](const BatchProgress& p) {
        if (!a.quiet) draw_progress(p, elapsed());
      });
      !st)
    return report(st.error());
  if (!a.quiet) std::cerr << "\n";

  const fs::path out_path(a.output), tmp = out_path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  int failed = 0;
  long long generated = 0;
  for (const Line& l : lines) {
    json j = {{"id", l.id}, {"line", l.number}};
    if (l.error) {
      j["error"] = error_json(*l.error);
      ++failed;
    } else if (const auto& r = sched.result(l.request); !r) {
      std::cerr << "error: line " << l.number << ": " << r.error().message << "\n";
      j["error"] = error_json(r.error());
      ++failed;
    } else {
      ReasoningParser parser;
      parser.push(r->text);
      parser.finish();
      const GenerationStats& s = r->stats;
      generated += s.generated_tokens;
      j["text"] = r->text;
      j["reasoning"] = parser.reasoning();
      j["answer"] = parser.answer();
      j["token_ids"] = r->token_ids;
      j["stats"] = {{"prompt_tokens", s.prompt_tokens},       {"generated_tokens", s.generated_tokens},
                    {"ttft_s", s.ttft_s},                     {"prefill_tok_per_s", s.prefill_tok_per_s},
                    {"decode_tok_per_s", s.decode_tok_per_s}, {"stop_reason", to_string(s.stop)}};
    }
    out << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.close();
  std::error_code ec;
  if (!out) {
    fs::remove(tmp, ec);
    return report(make_error(ErrorCategory::io, "file.write", tmp.string() + ": could not write (disk full?)"));
  }
  fs::rename(tmp, out_path, ec);
  if (ec) return report(make_error(ErrorCategory::io, "file.write", out_path.string() + ": " + ec.message()));
  const double wall = elapsed();
  if (!a.quiet)
    std::fprintf(stderr, "%zu requests (%d failed), %lld tokens generated in %.2f s: %.1f tok/s, %d restarts (%s, %s)\n",
                 lines.size(), failed, generated, wall, generated / std::max(wall, 1e-9), sched.progress().preempted,
                 model->backend->device_name().c_str(), std::string(to_string(model->backend->precision())).c_str());
  return failed ? kExitError : kExitOk;
}

}  // namespace

void register_batch(CLI::App& app, RunFn& run) {
  auto a = std::make_shared<BatchArgs>();
  auto* cmd = app.add_subcommand("batch", "Run many requests from a JSONL file together (continuous batching)");
  cmd->add_option("--model", a->model, "model folder")->required();
  cmd->add_option("--input", a->input, "JSONL: one {\"id\", \"prompt\" | \"messages\", ...} per line (- for stdin)")
      ->required();
  cmd->add_option("--output", a->output, "JSONL results, one per input line, in input order")->required();
  cmd->add_option("--max-batch", a->max_batch, "requests running at once")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--step-tokens", a->step_tokens, "tokens per forward pass (decodes first, then prompt chunks)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--precision", a->precision, "bf16 | fp16 | fp8 | int8 | int4 | auto")->capture_default_str();
  add_kv_cache_option(*cmd, a->kv_cache);
  a->sampling.add_to(*cmd);  // each line's defaults
  cmd->add_option("--context", a->context, "KV-cache tokens shared by the running requests")
      ->check(CLI::Range(16, 1 << 22))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0: all cores)");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress bar or summary on stderr");
  cmd->callback([&run, a] { run = [a] { return run_batch(*a); }; });
}

}  // namespace cosmos::cli
