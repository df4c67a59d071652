// cosmos-cli tokenize: text -> ids (one JSON array), or --decode: ids -> text.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace cosmos::cli {
namespace {

struct TokenizeArgs {
  TokenizerSource source;
  std::optional<std::string> text;
  bool decode = false;
  bool no_special = false;
  bool skip_special = false;
};

int run_tokenize(const TokenizeArgs& a) {
  auto tok = a.source.load();
  if (!tok) return report(tok.error());
  std::string input;
  if (a.text) {
    input = *a.text;
  } else {
    auto in = read_text("-");
    if (!in) return report(in.error());
    input = std::move(*in);
  }
  if (!a.decode) {
    const auto ids = (*tok)->encode(input, !a.no_special);
    std::cout << nlohmann::json(ids).dump() << "\n";
    return kExitOk;
  }
  auto j = nlohmann::json::parse(input, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return report(make_error(ErrorCategory::bad_input, "cli.ids", "--decode expects a JSON array of token ids"));
  std::vector<TokenId> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<long long>() < 0 ||
        v.get<long long>() >= static_cast<long long>((*tok)->vocab_size()))
      return report(make_error(ErrorCategory::bad_input, "cli.ids",
                               "--decode: " + v.dump() + " is not a token id (0.." +
                                   std::to_string((*tok)->vocab_size() - 1) + ")"));
    ids.push_back(v.get<TokenId>());
  }
  std::cout << (*tok)->decode(ids, a.skip_special);
  return kExitOk;
}

}  // namespace

void register_tokenize(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids (JSON array); --decode for ids to text");
  args->source.add_to(*cmd);
  cmd->add_option("--text", args->text, "text to encode (default: standard input)");
  cmd->add_flag("--decode", args->decode, "read a JSON array of ids and print the text");
  cmd->add_flag("--no-special", args->no_special, "treat special-token text like <|im_end|> as plain text");
  cmd->add_flag("--skip-special", args->skip_special, "with --decode: leave special tokens out");
  cmd->callback([&run, args] { run = [args] { return run_tokenize(*args); }; });
}

}  // namespace cosmos::cli
