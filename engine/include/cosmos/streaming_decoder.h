// Turns a stream of token ids into text pieces that are always valid UTF-8: bytes of a character
// that spans tokens are held back until the character is complete.
#pragma once

#include <string>

#include "cosmos/tokenizer.h"

namespace cosmos {

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Adds one token; returns the text that became complete (possibly empty).
  std::string push(TokenId id);
  // Ends the stream: whatever is held back is returned, invalid bytes as U+FFFD.
  std::string flush();
  // Bytes currently held back (0..3).
  std::size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace cosmos
