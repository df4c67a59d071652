#include "cli_common.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>

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
