// Qwen2 byte-level BPE from a Hugging Face tokenizer.json: NFC normalizer, PCRE2 (JIT) split
// pre-tokenizer, byte-level mapping, merges by rank with a cache, added tokens matched whole.
#pragma once

#include "cosmos/tokenizer.h"

namespace cosmos {

class BpeTokenizer;
Result<std::unique_ptr<BpeTokenizer>> load_bpe_tokenizer(const std::filesystem::path& tokenizer_json);

}  // namespace cosmos
