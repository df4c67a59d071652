// cosmos-cli tune: times the quantized one-token products' launch variants on this GPU
// (cosmos/decode_tuner.h) and saves what won, so that every later load of this precision on this GPU
// (the app, generate, bench) decodes with it (cosmos/tune_cache.h; the log says what was applied).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_backend.h"
#include "cli_common.h"
#include "cosmos/decode_tuner.h"
#include "cosmos/model_loader.h"
#include "cosmos/tune_cache.h"

namespace cosmos::cli {
namespace {

struct TuneArgs {
  std::string model;
  std::string random;
  std::string device = "auto";
  std::string precision = "int4";
  KvFormat kv_cache = KvFormat::full;
  std::string depths = "0,4096";
  int steps = 64;
  int rounds = 3;
  double margin_pct = 1.0;
  double budget_s = 0;
  bool dry_run = false;
  bool forget = false;
  bool json = false;
};

Result<std::vector<int>> parse_depths(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0)
      return make_error(ErrorCategory::bad_input, "cli.usage", "--depth: \"" + item + "\" is not a context length");
    out.push_back(v);
  }
  if (out.empty()) return make_error(ErrorCategory::bad_input, "cli.usage", "--depth: give at least one context length");
  return out;
}

int run_tune(const TuneArgs& a) {
  if (a.model.empty() == a.random.empty())
    return report(make_error(ErrorCategory::bad_input, "cli.usage", "give exactly one of --model DIR or --random PRESET"));
  auto depths = parse_depths(a.depths);
  if (!depths) return report(depths.error());
  auto precision = precision_from_string(a.precision);
  if (!precision) return report(make_error(ErrorCategory::bad_input, "cli.usage", "unknown precision " + a.precision));
  constexpr int kWarmup = 8;
  int context = 0;
  for (int d : *depths) context = std::max(context, std::max(d, 1) + kWarmup + a.steps + 16);

  BackendOptions bo;
  bo.context_tokens = context;
  bo.precision = *precision;
  bo.kv_format = a.kv_cache;
  bo.tune_cache_dir = default_tune_cache_dir();
  auto loaded = load_bench_backend(a.model, a.random, *device_from_string(a.device), bo, "tune");
  if (!loaded) return report(loaded.error());
  Backend& b = *(*loaded)->backend;
  if (!(*loaded)->device_note.empty()) std::cerr << (*loaded)->device_note << "\n";
  const std::filesystem::path file = b.decode_tuning_file();
  const std::vector<std::string> candidates = b.decode_tuning_candidates();
  if (candidates.empty() || file.empty())
    return report(make_error(ErrorCategory::bad_input, "tuning.unsupported",
                             "the " + std::string(b.name()) + " backend at " + std::string(to_string(b.precision())) +
                                 " has no decode launch variants to time (tuning is for int8, fp8 and int4 on the GPU)"));
  if (a.forget) {
    std::error_code ec;
    const bool removed = std::filesystem::remove(file, ec);
    if (ec) return report(make_error(ErrorCategory::io, "file.write", file.string() + ": " + ec.message()));
    std::printf("%s\n", removed ? ("removed " + file.string()).c_str() : ("nothing saved at " + file.string()).c_str());
    return kExitOk;
  }

  DecodeTuneOptions o;
  o.depths = *depths;
  o.rounds = a.rounds;
  o.margin = a.margin_pct / 100.0;
  o.budget_s = a.budget_s;
  o.progress = [&](const std::string& line) {
    std::cerr << "tune: " << line << "\n";  // stderr, also with --json
    return true;
  };
  const auto measure = [&](const std::string& spec, int depth) { return measure_decode(b, spec, depth, a.steps, kWarmup); };
  std::cerr << "tune: " << candidates.size() << " variants on " << b.device_name() << " ("
              << to_string(b.precision()) << "), " << a.steps << " steps a timing\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto result = tune_decode(candidates, measure, o);
  if (!result) return report(result.error());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The process keeps the winner set (or puts the automatic plan back) either way.
  if (auto st = b.set_decode_tuning(result->spec); !st) return report(st.error());

  DecodeTuneRecord record;
  record.spec = result->spec;
  for (std::size_t i = 0; i < depths->size(); ++i)
    record.depths.push_back({(*depths)[i], result->base_us[i], result->tuned_us[i]});
  std::string saved = "not saved (--dry-run)";
  if (!a.dry_run) {
    if (auto st = write_decode_tune(file, b.decode_tuning_identity(), record); !st) return report(st.error());
    saved = file.string();
  }
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const DecodeTuneRow& r : result->rows)
      rows.push_back({{"spec", r.spec}, {"stage", r.stage}, {"depth", r.depth}, {"us", r.us}, {"base_us", r.base_us}, {"kept", r.kept}});
    nlohmann::json per_depth = nlohmann::json::array();
    for (const DecodeTuneDepth& d : record.depths)
      per_depth.push_back({{"depth", d.depth}, {"base_us", d.base_us}, {"tuned_us", d.tuned_us}});
    const nlohmann::json out = {{"device", b.device_name()},  {"precision", to_string(b.precision())},
                                {"spec", result->spec},        {"candidates", candidates.size()},
                                {"measurements", result->measurements}, {"budget_hit", result->budget_hit},
                                {"seconds", seconds},          {"depths", per_depth},
                                {"rows", rows},                {"saved", a.dry_run ? std::string() : saved}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("decode tuning on %s (%s): %zu variants, %d timings in %.0f s%s\n", b.device_name().c_str(),
              std::string(to_string(b.precision())).c_str(), candidates.size(), result->measurements, seconds,
              result->budget_hit ? " (the screen stopped at --budget)" : "");
  std::printf("chosen: %s\n", result->spec.empty() ? "the automatic plan (no variant won again in confirmation)"
                                                   : result->spec.c_str());
  for (const DecodeTuneDepth& d : record.depths)
    std::printf("depth %5d: %8.1f us a step (%.1f tok/s) against %8.1f us (%.1f tok/s) automatic, %+.1f%%\n", d.depth,
                d.tuned_us, 1e6 / d.tuned_us, d.base_us, 1e6 / d.base_us, 100.0 * (d.base_us / d.tuned_us - 1.0));
  std::printf("saved: %s\n", saved.c_str());
  return kExitOk;
}

}  // namespace

void register_tune(CLI::App& app, RunFn& run) {
  auto a = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand(
      "tune", "Time the decode launch variants on this GPU and save the fastest for later loads (int8, fp8, int4)");
  cmd->add_option("--model", a->model, "model folder");
  cmd->add_option("--random", a->random, "a random model of this shape: cosmos-reason1-7b | tiny")
      ->check(CLI::IsMember({"cosmos-reason1-7b", "tiny"}));
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--precision", a->precision, "int8 | fp8 | int4")
      ->check(CLI::IsMember({"int8", "fp8", "int4"}))
      ->capture_default_str();
  add_kv_cache_option(*cmd, a->kv_cache);
  cmd->add_option("--depth", a->depths,
                  "context lengths the steps are timed at, comma-separated; the first screens, a winner must not "
                  "lose at the others")
      ->capture_default_str();
  cmd->add_option("--steps", a->steps, "decode steps per timing")->check(CLI::Range(8, 4096))->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "confirmation A/B pairs per depth")->check(CLI::Range(1, 20))->capture_default_str();
  cmd->add_option("--margin", a->margin_pct, "percent a variant must win by")->check(CLI::Range(0.0, 50.0))->capture_default_str();
  cmd->add_option("--budget", a->budget_s, "seconds for the screen (0: every variant)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "time and report, save nothing");
  cmd->add_flag("--forget", a->forget, "remove the tuning saved for this GPU and precision (later loads take the automatic plan)");
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->callback([&run, a] { run = [a] { return run_tune(*a); }; });
}

}  // namespace cosmos::cli
