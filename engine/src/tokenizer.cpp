// load_tokenizer: picks the implementation from a file name or a model folder.
#include "cosmos/tokenizer.h"

#include <system_error>

#include "cosmos/bpe_tokenizer.h"
#include "cosmos/sentencepiece_tokenizer.h"

namespace cosmos {
namespace {

Result<std::unique_ptr<Tokenizer>> load_bpe(const std::filesystem::path& file) {
  auto bpe = load_bpe_tokenizer(file);
  if (!bpe) return bpe.error();
  return std::unique_ptr<Tokenizer>(std::move(bpe).value());
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "tokenizer.json", ec)) return load_bpe(path / "tokenizer.json");
    if (fs::exists(path / "tokenizer.model", ec)) {
      return load_sentencepiece_tokenizer(path / "tokenizer.model");
    }
    return make_error(ErrorCategory::bad_input, "tokenizer.missing",
                      "no tokenizer.json or tokenizer.model in " + path.string());
  }
  if (!fs::exists(path, ec)) {
    return make_error(ErrorCategory::bad_input, "tokenizer.missing",
                      "tokenizer file not found: " + path.string());
  }
  // A file: .model is SentencePiece; .json (or anything else) is a Hugging Face tokenizer.json.
  if (path.extension() == ".model") return load_sentencepiece_tokenizer(path);
  return load_bpe(path);
}

}  // namespace cosmos
