// SentencePiece behind the Tokenizer interface. libsentencepiece does the work; this file maps
// its status codes to Error and its pieces to raw bytes.
#include "cosmos/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <system_error>

#include "byte_level.h"

namespace cosmos {
namespace {

constexpr std::string_view kWordBoundary = "\xE2\x96\x81";  // U+2581, SentencePiece's space

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)) {}

  std::vector<TokenId> encode(std::string_view text, bool /*parse_special*/) const override {
    // SentencePiece has no added-token pass: control symbols written in the text stay text.
    std::vector<int> ids;
    try {
      ids = sp_->EncodeAsIds(text);
    } catch (const std::exception&) {  // nothing should throw; never let it cross the API
      ids.clear();
    }
    return std::vector<TokenId>(ids.begin(), ids.end());
  }

  std::string decode(std::span<const TokenId> ids, bool skip_special) const override {
    std::vector<int> keep;
    keep.reserve(ids.size());
    for (const TokenId id : ids) {
      if (!in_range(id) || (skip_special && is_special(id))) continue;
      keep.push_back(id);
    }
    try {
      return utf8::lossy(sp_->DecodeIds(keep));
    } catch (const std::exception&) {
      return {};
    }
  }

  std::string token_bytes(TokenId id) const override {
    if (!in_range(id)) return {};
    const std::string& piece = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) return byte_piece(piece);
    if (sp_->IsControl(id)) return piece;
    if (sp_->IsUnknown(id)) return sp_->DecodeIds({id});  // the unk surface, " ⁇ " by default
    std::string out;
    for (std::size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kWordBoundary.size(), kWordBoundary) == 0) {
        out += ' ';
        i += kWordBoundary.size();
      } else {
        out += piece[i++];
      }
    }
    return out;
  }

  std::size_t vocab_size() const override { return static_cast<std::size_t>(sp_->GetPieceSize()); }

  std::optional<TokenId> token_id(std::string_view token) const override {
    const int id = sp_->PieceToId(token);
    if (!in_range(id)) return std::nullopt;
    // PieceToId answers unk_id for anything it does not know.
    if (sp_->IsUnknown(id) && sp_->IdToPiece(id) != token) return std::nullopt;
    return id;
  }

  bool is_special(TokenId id) const override { return in_range(id) && sp_->IsControl(id); }

  std::string_view kind() const override { return "sentencepiece"; }

 private:
  bool in_range(TokenId id) const { return id >= 0 && id < sp_->GetPieceSize(); }

  // "<0xAB>" -> the byte 0xAB.
  static std::string byte_piece(const std::string& piece) {
    if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
      try {
        return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
      } catch (const std::exception&) {
      }
    }
    return piece;
  }

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(
    const std::filesystem::path& model_file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_file, ec)) {
    return make_error(ErrorCategory::bad_input, "tokenizer.missing",
                      "tokenizer file not found: " + model_file.string());
  }
  try {
    auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = sp->Load(model_file.string());
    if (!status.ok()) {
      return make_error(ErrorCategory::bad_input, "tokenizer.sentencepiece",
                        model_file.string() + ": not a usable SentencePiece model: " +
                            status.ToString());
    }
    return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
  } catch (const std::exception& e) {
    return make_error(ErrorCategory::bad_input, "tokenizer.sentencepiece",
                      model_file.string() + ": cannot load SentencePiece model: " + e.what());
  }
}

}  // namespace cosmos
