// cosmos-cli make-test-model: a complete model folder with deterministic weights.
#include <iostream>

#include "cli_common.h"
#include "cosmos/test_model.h"

namespace cosmos::cli {
namespace {

struct MakeTestModelArgs {
  std::string preset = "tiny";
  std::uint64_t seed = 0;
  std::string layout = "original";
  int shards = 2;
  std::string tokenizer = COSMOS_DEFAULT_TEST_TOKENIZER;
  std::string out;
  bool quiet = false;
};

int run_make_test_model(const MakeTestModelArgs& a) {
  TestModelOptions o;
  o.preset = a.preset;
  o.seed = a.seed;
  o.layout = a.layout == "language_model" ? TensorLayout::language_model : TensorLayout::original;
  o.shards = a.shards;
  o.tokenizer_json = a.tokenizer;
  o.out_dir = a.out;
  int last_percent = -1;
  if (!a.quiet)
    o.progress = [&](std::uint64_t done, std::uint64_t total) {
      const int pct = static_cast<int>(100 * done / std::max<std::uint64_t>(1, total));
      if (pct / 10 != last_percent / 10) std::cerr << "\rwriting weights: " << pct << "%" << std::flush;
      last_percent = pct;
    };
  auto st = make_test_model(o);
  if (!a.quiet) std::cerr << "\n";
  if (!st) return report(st.error());
  std::cout << "wrote " << a.preset << " test model (seed " << a.seed << ", " << a.layout << " layout, "
            << a.shards << " shard" << (a.shards == 1 ? "" : "s") << ") to " << a.out << "\n";
  return kExitOk;
}

}  // namespace

void register_make_test_model(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<MakeTestModelArgs>();
  auto* cmd = app.add_subcommand("make-test-model", "Write a model folder with deterministic random weights");
  cmd->add_option("--preset", args->preset, "tiny | tiny-hd128 | cosmos-reason1-7b")
      ->check(CLI::IsMember({"tiny", "tiny-hd128", "cosmos-reason1-7b"}));
  cmd->add_option("--seed", args->seed, "weight generator seed")->required();
  cmd->add_option("--layout", args->layout, "tensor names: original | language_model")
      ->check(CLI::IsMember({"original", "language_model"}));
  cmd->add_option("--shards", args->shards, "number of safetensors shards (1: model.safetensors)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json to copy in")->capture_default_str();
  cmd->add_option("--out", args->out, "output folder")->required();
  cmd->add_flag("-q,--quiet", args->quiet, "no progress");
  cmd->callback([&run, args] { run = [args] { return run_make_test_model(*args); }; });
}

}  // namespace cosmos::cli
