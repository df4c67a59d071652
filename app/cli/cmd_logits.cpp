// cosmos-cli logits: float32 logits of every position of a token sequence, as .npy.
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "cosmos/model_loader.h"
#include "npy_writer.h"

namespace cosmos::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string ids;
  std::string out;
  std::string device = "auto";
  int threads = 0;
};

Result<std::vector<TokenId>> parse_ids(const std::string& s) {
  std::vector<TokenId> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > 0x7fffffff) throw std::invalid_argument(item);
      ids.push_back(static_cast<TokenId>(v));
    } catch (const std::exception&) {
      return make_error(ErrorCategory::bad_input, "cli.ids", "--ids: \"" + item + "\" is not a token id");
    }
  }
  if (ids.empty()) return make_error(ErrorCategory::bad_input, "cli.ids", "--ids is empty");
  return ids;
}

int run_logits(const LogitsArgs& a) {
  auto ids = parse_ids(a.ids);
  if (!ids) return report(ids.error());
  BackendOptions o;
  o.context_tokens = static_cast<int>(ids->size()) + 16;
  o.threads = a.threads;
  auto model = load_model(a.model, *device_from_string(a.device), o);
  if (!model) return report(model.error());
  Backend& b = *model->backend;
  SequenceInput in;
  in.seq = b.kv_cache().create_sequence();
  in.tokens = *ids;
  in.all_logits = true;
  ForwardOutput out;
  if (auto st = b.forward(std::span<const SequenceInput>(&in, 1), out); !st) return report(st.error());
  if (auto st = write_npy_f32(a.out, out.logits, {ids->size(), static_cast<std::size_t>(out.vocab)}); !st)
    return report(st.error());
  std::cerr << "wrote logits [" << ids->size() << ", " << out.vocab << "] to " << a.out << "\n";
  return kExitOk;
}

}  // namespace

void register_logits(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "float32 logits of every position of a token sequence (.npy)");
  cmd->add_option("--model", args->model, "model folder")->required();
  cmd->add_option("--ids", args->ids, "comma-separated token ids, e.g. 151644,872,198")->required();
  cmd->add_option("--out", args->out, "output .npy file")->required();
  cmd->add_option("--device", args->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");
  cmd->callback([&run, args] { run = [args] { return run_logits(*args); }; });
}

}  // namespace cosmos::cli
