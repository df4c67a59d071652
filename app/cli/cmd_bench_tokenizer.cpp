// cosmos-cli bench-tokenizer: encode and decode speed on mixed text (one core). Reports, never fails.
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace cosmos::cli {
namespace {

struct BenchTokenizerArgs {
  TokenizerSource source;
  std::string input;
  double megabytes = 1.0;
  int reps = 3;
  bool json = false;
};

// Mixed text: prose, code, CJK, numbers, emoji, whitespace runs. Varied by a counter so the BPE
// cache sees realistic reuse rather than one repeated string.
std::string mixed_text(std::size_t bytes) {
  static const char* kSamples[] = {
      "The quick brown fox jumps over the lazy dog, and then it ran %d miles without stopping. ",
      "Robots in warehouse #%d moved 1,234 boxes; what's the average per hour? Let's think step by step.\n",
      "def step_%d(x):\n    return [i * i for i in range(x) if i %% 2 == 0]\n\n",
      "\xe6\x9c\xba\xe5\x99\xa8\xe4\xba\xba\xe7\xac\xac%d\xe6\xac\xa1\xe6\x8a\x93\xe5\x8f\x96\xe7\x89\xa9\xe4\xbd\x93\xe3\x80\x82 ",
      "\xe3\x83\xad\xe3\x83\x9c\xe3\x83\x83\xe3\x83\x88\xe3\x81\xaf%d\xe5\x80\x8b\xe3\x81\xae\xe7\xae\xb1\xe3\x82\x92\xe9\x81\x8b\xe3\x81\xb3\xe3\x81\xbe\xe3\x81\x99\xe3\x80\x82 ",
      "<think>\nThe car at frame %d is turning left.\n</think>\n\n<answer>\nB\n</answer>\n",
      "    {\"id\": %d, \"label\": \"cup\", \"bbox\": [12.5, 40.0, 88.25, 120.0]},\n",
      "Emoji test %d: \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 \xf0\x9f\x9a\x97\n",
  };
  std::string out;
  out.reserve(bytes + 256);
  char buf[512];
  for (int i = 0; out.size() < bytes; ++i) {
    std::snprintf(buf, sizeof buf, kSamples[i % 8], i);
    out += buf;
  }
  return out;
}

int run_bench(const BenchTokenizerArgs& a) {
  auto tok = a.source.load();
  if (!tok) return report(tok.error());
  std::string text;
  if (!a.input.empty()) {
    auto t = read_text(a.input);
    if (!t) return report(t.error());
    text = std::move(*t);
  } else {
    text = mixed_text(static_cast<std::size_t>(a.megabytes * 1e6));
  }
  using clock = std::chrono::steady_clock;
  double best_encode = 1e30, best_decode = 1e30, cold_encode = 0;
  std::size_t n_tokens = 0;
  for (int r = 0; r < a.reps; ++r) {
    auto t0 = clock::now();
    auto ids = (*tok)->encode(text, true);
    auto t1 = clock::now();
    auto back = (*tok)->decode(ids);
    auto t2 = clock::now();
    n_tokens = ids.size();
    if (r == 0) cold_encode = std::chrono::duration<double>(t1 - t0).count();
    best_encode = std::min(best_encode, std::chrono::duration<double>(t1 - t0).count());
    best_decode = std::min(best_decode, std::chrono::duration<double>(t2 - t1).count());
    if (back.size() < text.size() / 2) std::cerr << "warning: decode lost text\n";
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  nlohmann::json out = {{"bytes", text.size()},
                        {"tokens", n_tokens},
                        {"encode_mb_per_s", mb / best_encode},
                        {"encode_cold_mb_per_s", mb / cold_encode},
                        {"encode_tokens_per_s", static_cast<double>(n_tokens) / best_encode},
                        {"decode_mb_per_s", mb / best_decode},
                        {"reps", a.reps},
                        {"note", "one thread; cold = first pass with an empty BPE cache, encode = best of reps"}};
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("text %.2f MB -> %zu tokens\nencode %.1f MB/s (%.0f tokens/s), first pass (empty cache) %.1f MB/s\n"
                "decode %.1f MB/s\n", mb, n_tokens, mb / best_encode, static_cast<double>(n_tokens) / best_encode,
                mb / cold_encode, mb / best_decode);
  }
  return kExitOk;
}

}  // namespace

void register_bench_tokenizer(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<BenchTokenizerArgs>();
  auto* cmd = app.add_subcommand("bench-tokenizer", "Measure tokenizer encode/decode speed (one core)");
  args->source.add_to(*cmd);
  cmd->add_option("--input", args->input, "text file to encode (default: generated mixed text)");
  cmd->add_option("--mb", args->megabytes, "size of generated text in MB")->capture_default_str();
  cmd->add_option("--reps", args->reps, "repetitions (best is reported)")->check(CLI::Range(1, 100));
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&run, args] { run = [args] { return run_bench(*args); }; });
}

}  // namespace cosmos::cli
