// Qwen2 byte-level BPE from a Hugging Face tokenizer.json: NFC normalizer, PCRE2 (JIT) split
// pre-tokenizer, byte-level mapping, merges by rank with a cache, added tokens matched whole.
//
// The pipeline follows Hugging Face `tokenizers`: (1) added tokens are cut out of the raw text
// (leftmost, longest; only with
// parse_special, else they are ordinary text); (2) each remaining segment is NFC
// normalized; (3) split with the pre_tokenizer's Split regex (behaviour "Isolated"); (4) each piece's
// bytes become byte-level symbols; (5) merges are applied lowest rank first; (6) results are cached
// per piece. encode() is const and safe to call from several threads at once.
#pragma once

#include <memory>

#include "cosmos/tokenizer.h"

namespace cosmos {

class BpeTokenizer final : public Tokenizer {
 public:
  struct Impl;  // defined in src/bpe_tokenizer_impl.h
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  ~BpeTokenizer() override;
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  std::vector<TokenId> encode(std::string_view text, bool parse_special = true) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const override;
  std::string token_bytes(TokenId id) const override;
  std::size_t vocab_size() const override;
  std::optional<TokenId> token_id(std::string_view token) const override;
  bool is_special(TokenId id) const override;
  std::string_view kind() const override { return "bpe"; }

  // Number of merge rules loaded (151387 for Qwen2).
  std::size_t merge_count() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Errors (category bad_input): "tokenizer.missing" (no such file), "tokenizer.read",
// "tokenizer.json" (not JSON or malformed), "tokenizer.model_type" (model is not BPE),
// "tokenizer.vocab", "tokenizer.merges", "tokenizer.added_tokens", "tokenizer.pre_tokenizer",
// "tokenizer.normalizer" (a configuration this implementation does not reproduce).
Result<std::unique_ptr<BpeTokenizer>> load_bpe_tokenizer(const std::filesystem::path& tokenizer_json);

}  // namespace cosmos
