// SentencePiece behind the Tokenizer interface. The test trains a tiny model (byte fallback on) on
// a generated corpus, then checks the wrapper against libsentencepiece itself.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cosmos/sentencepiece_tokenizer.h"
#include "cosmos/streaming_decoder.h"
#include "cosmos/tokenizer.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<TokenId>;

class SentencePiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::random_device rd;
    const std::string name = "cosmos-spm-" + std::to_string(rd()) + std::to_string(rd());
    dir_ = new fs::path(fs::temp_directory_path() / name);
    fs::create_directories(*dir_);
    // A corpus of made-up sentences: enough variety for a few hundred pieces.
    const char* words[] = {"the", "model", "reads", "a", "video", "and", "answers", "questions", "about",
                           "physics", "robots", "move", "boxes", "on", "tables", "cars", "drive", "slowly",
                           "why", "does", "it", "fall", "because", "gravity", "pulls", "down", "left",
                           "right", "camera", "frame", "time", "speed", "red", "blue", "ball", "rolls"};
    std::mt19937 rng(7);
    std::ofstream corpus(*dir_ / "corpus.txt");
    for (int line = 0; line < 3000; ++line) {
      const int n = 3 + static_cast<int>(rng() % 10);
      for (int w = 0; w < n; ++w) corpus << (w ? " " : "") << words[rng() % std::size(words)];
      corpus << (line % 5 == 0 ? " 12 34." : ".") << "\n";
    }
    corpus.close();
    const std::string args = "--input=" + (*dir_ / "corpus.txt").string() + " --model_prefix=" +
                             (*dir_ / "tokenizer").string() +
                             " --vocab_size=320 --model_type=bpe --byte_fallback=true"
                             " --character_coverage=1.0 --minloglevel=2";
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    train_error_ = new std::string(status.ok() ? "" : status.ToString());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete train_error_;
  }
  void SetUp() override {
    ASSERT_EQ(*train_error_, "") << "training the test model failed";
    ASSERT_TRUE(sp_.Load(model().string()).ok());
  }
  static fs::path model() { return *dir_ / "tokenizer.model"; }

  static fs::path* dir_;
  static std::string* train_error_;
  sentencepiece::SentencePieceProcessor sp_;
};
fs::path* SentencePiece::dir_ = nullptr;
std::string* SentencePiece::train_error_ = nullptr;

const std::string kTexts[] = {
    "the model reads a video",
    "why does the red ball fall down",
    "robots move 12 boxes.",
    "unseen words: zebra quixotic",
    "\xE6\xBC\xA2\xE5\xAD\x97 and \xE2\x98\x83 via byte fallback",  // 漢字, ☃: not in the corpus
    "\xF0\x9F\x98\x80",
};

TEST_F(SentencePiece, LoadsAndAgreesWithTheProcessor) {
  auto tok = load_sentencepiece_tokenizer(model());
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), "sentencepiece");
  EXPECT_EQ((*tok)->vocab_size(), static_cast<std::size_t>(sp_.GetPieceSize()));
  for (const std::string& text : kTexts) {
    const std::vector<int> want = sp_.EncodeAsIds(text);
    EXPECT_EQ((*tok)->encode(text), Ids(want.begin(), want.end())) << text;
    EXPECT_EQ((*tok)->decode((*tok)->encode(text)), text) << text;
  }
}

TEST_F(SentencePiece, ByteFallbackPieces) {
  auto tok = load_sentencepiece_tokenizer(model());
  ASSERT_TRUE(tok);
  const auto id = (*tok)->token_id("<0xE6>");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ((*tok)->token_bytes(*id), "\xE6");
  // "漢" is not in the corpus: it becomes its three byte pieces.
  const Ids ids = (*tok)->encode("\xE6\xBC\xA2");
  std::string bytes;
  for (const TokenId i : ids) bytes += (*tok)->token_bytes(i);
  EXPECT_EQ(bytes, " \xE6\xBC\xA2");  // SentencePiece's dummy prefix becomes a space
}

TEST_F(SentencePiece, TokenBytesJoinToText) {
  auto tok = load_sentencepiece_tokenizer(model());
  ASSERT_TRUE(tok);
  for (const std::string& text : kTexts) {
    std::string bytes;
    for (const TokenId i : (*tok)->encode(text)) bytes += (*tok)->token_bytes(i);
    EXPECT_EQ(bytes, " " + text);
    // The streaming decoder gives the same text, held-back bytes and all.
    StreamingDecoder dec(**tok);
    std::string streamed;
    for (const TokenId i : (*tok)->encode(text)) streamed += dec.push(i);
    EXPECT_EQ(streamed + dec.flush(), " " + text);
  }
}

TEST_F(SentencePiece, TokenIdsAndSpecials) {
  auto tok = load_sentencepiece_tokenizer(model());
  ASSERT_TRUE(tok);
  EXPECT_EQ((*tok)->token_id("<unk>"), sp_.unk_id());
  EXPECT_EQ((*tok)->token_id("<s>"), sp_.bos_id());
  EXPECT_EQ((*tok)->token_id("no-such-piece-xyz"), std::nullopt);
  const std::string piece = sp_.IdToPiece(sp_.GetPieceSize() - 1);
  EXPECT_EQ((*tok)->token_id(piece), sp_.GetPieceSize() - 1);
  EXPECT_TRUE((*tok)->is_special(sp_.bos_id()));
  EXPECT_TRUE((*tok)->is_special(sp_.eos_id()));
  EXPECT_FALSE((*tok)->is_special(sp_.unk_id()));
  EXPECT_FALSE((*tok)->is_special(-1));
  EXPECT_FALSE((*tok)->is_special(100000));
  EXPECT_EQ((*tok)->token_bytes(sp_.bos_id()), "<s>");
  EXPECT_EQ((*tok)->token_bytes(-1), "");
  EXPECT_EQ((*tok)->token_bytes(100000), "");

  Ids ids = (*tok)->encode("the ball");
  ids.insert(ids.begin(), sp_.bos_id());
  ids.push_back(sp_.eos_id());
  ids.push_back(-5);      // out of range: ignored
  ids.push_back(100000);  // likewise
  EXPECT_EQ((*tok)->decode(ids, /*skip_special=*/true), "the ball");
}

TEST_F(SentencePiece, LoadTokenizerFindsModelInFolder) {
  auto tok = load_tokenizer(*dir_);  // holds tokenizer.model (and no tokenizer.json)
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), "sentencepiece");
  auto by_file = load_tokenizer(model());
  ASSERT_TRUE(by_file) << by_file.error().message;
  EXPECT_EQ((*by_file)->encode("the model"), (*tok)->encode("the model"));
}

TEST(SentencePieceErrors, BadModelFiles) {
  const std::string dir_name = "cosmos-spm-bad-" + std::to_string(std::random_device{}());
  const fs::path dir = fs::temp_directory_path() / dir_name;
  fs::create_directories(dir);
  const std::pair<std::string, std::string> files[] = {
      {"garbage.model", "this is not a protobuf \x01\x02\x03\xFF"},
      {"empty.model", ""},
  };
  for (const auto& [name, content] : files) {
    std::ofstream(dir / name, std::ios::binary) << content;
    auto tok = load_sentencepiece_tokenizer(dir / name);
    ASSERT_FALSE(tok) << name;
    EXPECT_EQ(tok.error().code, "tokenizer.sentencepiece");
    EXPECT_EQ(tok.error().category, ErrorCategory::bad_input);
    EXPECT_NE(tok.error().message.find((dir / name).string()), std::string::npos) << tok.error().message;
  }
  auto missing = load_sentencepiece_tokenizer(dir / "absent.model");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, "tokenizer.missing");
  EXPECT_NE(missing.error().message.find("absent.model"), std::string::npos);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace cosmos
