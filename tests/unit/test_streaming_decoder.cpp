// StreamingDecoder: pieces are always valid UTF-8 and, joined with flush(), equal decode() of the
// whole sequence. Checked with a fake tokenizer whose tokens are arbitrary byte strings, and with the
// Qwen2 tokenizer on text whose characters split across byte tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "byte_level.h"
#include "cosmos/bpe_tokenizer.h"
#include "cosmos/streaming_decoder.h"

namespace cosmos {
namespace {

using Ids = std::vector<TokenId>;
constexpr const char* kFffd = "\xEF\xBF\xBD";

// Tokens are given byte strings; ids >= 1000 are special.
class FakeTokenizer final : public Tokenizer {
 public:
  explicit FakeTokenizer(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  std::vector<TokenId> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const TokenId> ids, bool skip_special) const override {
    std::string bytes;
    for (const TokenId id : ids) {
      if (!(skip_special && is_special(id))) bytes += token_bytes(id);
    }
    return utf8::lossy(bytes);
  }
  std::string token_bytes(TokenId id) const override {
    if (id >= 1000) return "<special>";
    return id >= 0 && static_cast<std::size_t>(id) < tokens_.size() ? tokens_[id] : std::string();
  }
  std::size_t vocab_size() const override { return tokens_.size(); }
  std::optional<TokenId> token_id(std::string_view) const override { return std::nullopt; }
  bool is_special(TokenId id) const override { return id >= 1000; }
  std::string_view kind() const override { return "fake"; }

 private:
  std::vector<std::string> tokens_;
};

std::string stream(const Tokenizer& tok, const Ids& ids, bool skip_special, bool check_pieces = true) {
  StreamingDecoder dec(tok, skip_special);
  std::string out;
  for (const TokenId id : ids) {
    const std::string piece = dec.push(id);
    if (check_pieces) {
      EXPECT_TRUE(utf8::is_valid(piece));
    }
    EXPECT_LE(dec.pending(), 3u);
    out += piece;
  }
  return out + dec.flush();
}

// Rust's String::from_utf8_lossy / Python's errors="replace" results (maximal subparts).
struct LossyCase {
  std::string in;
  std::string out;
};
const LossyCase kLossyCases[] = {
    {"a\xF1\x80\x80\xE1\x80\xC2" "b\x80" "c\x80\xBF" "d",
     std::string("a") + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d"},
    {"\xF0\x9F\x98", kFffd},
    {"\xED\xA0\x80", std::string(kFffd) + kFffd + kFffd},  // surrogates are invalid
    {"\xE0\x80", std::string(kFffd) + kFffd},
    {"\xC0\xAF", std::string(kFffd) + kFffd},
    {"\xF4\x90\x80\x80", std::string(kFffd) + kFffd + kFffd + kFffd},
    {"\xE2\x82", kFffd},
    {"\xE2\x82\xAC", "\xE2\x82\xAC"},
    {"\xF0\x9F\x98\x80\xF0", std::string("\xF0\x9F\x98\x80") + kFffd},
    {"\xFF\xFE", std::string(kFffd) + kFffd},
    {"\xC2\xC2\xA9", std::string(kFffd) + "\xC2\xA9"},
    {"plain ascii", "plain ascii"},
    {"", ""},
};

TEST(Utf8Lossy, MaximalSubparts) {
  for (const LossyCase& c : kLossyCases) EXPECT_EQ(utf8::lossy(c.in), c.out) << c.in;
}

TEST(StreamingDecoder, EmojiSplitOverByteTokens) {
  const FakeTokenizer tok({"\xF0", "\x9F", "\x98", "\x80", "a"});
  StreamingDecoder dec(tok);
  EXPECT_EQ(dec.push(0), "");
  EXPECT_EQ(dec.pending(), 1u);
  EXPECT_EQ(dec.push(1), "");
  EXPECT_EQ(dec.push(2), "");
  EXPECT_EQ(dec.pending(), 3u);
  EXPECT_EQ(dec.push(3), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamingDecoder, InvalidBytesAreReplacedAtOnce) {
  const FakeTokenizer tok({"\xFF", "\xE4\xBD", "a", "\xA0"});
  StreamingDecoder dec(tok);
  EXPECT_EQ(dec.push(0), kFffd);  // can never become valid
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(dec.push(1), "");     // the start of 你
  EXPECT_EQ(dec.push(2), std::string(kFffd) + "a");
  EXPECT_EQ(dec.push(1), "");
  EXPECT_EQ(dec.push(3), "\xE4\xBD\xA0");
  EXPECT_EQ(dec.push(1), "");
  EXPECT_EQ(dec.flush(), kFffd);  // an incomplete tail at the end
  EXPECT_EQ(dec.pending(), 0u);
}

TEST(StreamingDecoder, SkipSpecial) {
  const FakeTokenizer tok({"x", "\xC3", "\xA9"});
  EXPECT_EQ(stream(tok, {0, 1000, 0}, false), "x<special>x");
  EXPECT_EQ(stream(tok, {0, 1000, 0}, true), "xx");
  // A special token between the bytes of one character: skipping it joins them, as decode() does.
  EXPECT_EQ(stream(tok, {1, 1000, 2}, true), "\xC3\xA9");
  EXPECT_EQ(stream(tok, {1, 1000, 2}, false), tok.decode(Ids{1, 1000, 2}, false));
}

TEST(StreamingDecoder, UnknownIdsAddNothing) {
  const FakeTokenizer tok({"a"});
  EXPECT_EQ(stream(tok, {0, -3, 77, 0}, false), "aa");
}

// Random byte tokens, biased towards UTF-8 lead and continuation bytes so that characters are
// split every which way, valid or not.
TEST(StreamingDecoder, MatchesDecodeOnRandomBytes) {
  std::mt19937 rng(1234);
  std::vector<std::string> tokens;
  const std::uint8_t interesting[] = {0x00, 'a', ' ', 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                      0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += static_cast<char>(interesting[rng() % std::size(interesting)]);
    tokens.push_back(t);
  }
  tokens.push_back("\xE4\xBD\xA0");      // whole characters too
  tokens.push_back("\xF0\x9F\x98\x80");
  const FakeTokenizer tok(tokens);
  for (int round = 0; round < 3000; ++round) {
    Ids ids;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) {
      ids.push_back(rng() % 20 == 0 ? 1000 : static_cast<TokenId>(rng() % tokens.size()));
    }
    for (const bool skip : {false, true}) {
      ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << "round " << round;
    }
  }
}

// With the real tokenizer: text whose characters are cut across byte-level tokens.
TEST(StreamingDecoder, QwenMatchesDecode) {
  if (!std::filesystem::exists(COSMOS_TEST_TOKENIZER)) {
    FAIL() << "test tokenizer missing: " << COSMOS_TEST_TOKENIZER << " (run packaging/setup.sh)";
  }
  auto loaded = load_bpe_tokenizer(COSMOS_TEST_TOKENIZER);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const BpeTokenizer& tok = **loaded;
  const std::string texts[] = {
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 \xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
      "\xE9\xBE\x98\xE9\x9D\x90\xE7\xB1\xB2 \xF0\xA0\x80\x80\xF0\xA0\x80\x81",  // rare CJK, Ext B
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5",  // Thai
      "<|im_start|>assistant\n<think>\n\xE5\x97\xAF\xF0\x9F\xA4\x94\n</think>\n\n"
      "<answer>\n\xE2\x9C\x85\n</answer><|im_end|>",
      "\xF0\x9D\x95\xB3\xF0\x9D\x96\x8A\xF0\x9D\x96\x91 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
  };
  for (const std::string& t : texts) {
    const Ids ids = tok.encode(t);
    for (const bool skip : {false, true}) EXPECT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << t;
    EXPECT_EQ(stream(tok, ids, false), t);
  }
  // Random ids over the whole vocabulary, specials and bare byte tokens included.
  std::mt19937 rng(99);
  Ids byte_tokens;
  for (int b = 0x80; b < 0x100; ++b) {
    byte_tokens.push_back(*tok.token_id(byte_level::byte_to_utf8(static_cast<std::uint8_t>(b))));
  }
  for (int round = 0; round < 2000; ++round) {
    Ids ids;
    const int n = static_cast<int>(rng() % 16);
    for (int k = 0; k < n; ++k) {
      const auto r = rng() % 10;
      ids.push_back(r < 6 ? byte_tokens[rng() % byte_tokens.size()]
                          : static_cast<TokenId>(rng() % tok.vocab_size()));
    }
    for (const bool skip : {false, true}) {
      ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace cosmos
