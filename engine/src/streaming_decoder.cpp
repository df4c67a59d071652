#include "cosmos/streaming_decoder.h"

#include "byte_level.h"

namespace cosmos {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

// Emits every complete character of pending_, and U+FFFD for each maximal invalid subpart (it can
// never become valid, so waiting would not help). Holds only a tail that is a valid prefix of a
// character (at most 3 bytes). The output therefore equals decode() of the whole stream: the lossy
// conversion reads left to right and decides each subpart from the bytes that follow it.
std::string StreamingDecoder::push(TokenId id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    const utf8::Step st = utf8::step(pending_, i);
    if (st.status == utf8::Step::truncated) break;
    if (st.status == utf8::Step::ok) {
      out.append(pending_, i, st.length);
    } else {
      out += utf8::kReplacement;
    }
    i += st.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = utf8::lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace cosmos
