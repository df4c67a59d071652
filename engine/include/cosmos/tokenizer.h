// The tokenizer interface shared by the byte-level BPE (tokenizer.json) and SentencePiece
// (tokenizer.model) implementations.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cosmos/error.h"

namespace cosmos {

using TokenId = std::int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. With parse_special, added tokens (e.g. "<|im_start|>") written in the text are
  // matched whole before anything else; without it they are ordinary text.
  virtual std::vector<TokenId> encode(std::string_view text, bool parse_special = true) const = 0;

  // Ids to text. Invalid UTF-8 produced by a partial sequence becomes U+FFFD, as in HF.
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special = false) const = 0;

  // The raw bytes one token stands for (byte-level decoded; a special token's text). May be an
  // incomplete UTF-8 sequence: StreamingDecoder joins them.
  virtual std::string token_bytes(TokenId id) const = 0;

  // Number of ids, added tokens included (the largest id + 1).
  virtual std::size_t vocab_size() const = 0;

  // The id of a token given by its exact string (vocabulary entry or added token).
  virtual std::optional<TokenId> token_id(std::string_view token) const = 0;

  // True for added tokens marked special (e.g. <|im_end|>).
  virtual bool is_special(TokenId id) const = 0;

  // "bpe" or "sentencepiece".
  virtual std::string_view kind() const = 0;
};

// Loads a tokenizer from a file (tokenizer.json or tokenizer.model) or from a model folder
// (tokenizer.json preferred, then tokenizer.model).
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::filesystem::path& path);

}  // namespace cosmos
