// SentencePiece (libsentencepiece) behind the Tokenizer interface, for models shipping tokenizer.model.
#pragma once

#include "cosmos/tokenizer.h"

namespace cosmos {

Result<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(const std::filesystem::path& model_file);

}  // namespace cosmos
