// Byte-level BPE: hand-checked ids for the Qwen2 tokenizer (checked against Hugging Face
// tokenizers and by reading the vocabulary), a tiny synthetic tokenizer.json for the rules that need
// no real vocabulary, load errors, load_tokenizer's choice of file, thread safety and the NFC helper.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "byte_level.h"
#include "cosmos/bpe_tokenizer.h"
#include "cosmos/tokenizer.h"
#include "temp_dir.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<TokenId>;

using testing::TempDir;

// ------------------------------------------------------------------------------------------------
// The Qwen2 tokenizer (packaging/setup.sh fetches it).

const BpeTokenizer* qwen() {
  static const std::unique_ptr<BpeTokenizer> tok = [] {
    auto r = load_bpe_tokenizer(COSMOS_TEST_TOKENIZER);
    return r ? std::move(r).value() : nullptr;
  }();
  return tok.get();
}

class Qwen : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(COSMOS_TEST_TOKENIZER)) {
      FAIL() << "test tokenizer missing: " << COSMOS_TEST_TOKENIZER << " (run packaging/setup.sh)";
    }
    ASSERT_NE(qwen(), nullptr) << "cannot load " << COSMOS_TEST_TOKENIZER;
  }
  const BpeTokenizer& tok() const { return *qwen(); }
};

struct EncodeCase {
  const char* name;
  std::string text;
  bool parse_special;
  Ids ids;
};

// Ids confirmed with Hugging Face tokenizers; the comments give the vocabulary entries.
const EncodeCase kEncodeCases[] = {
    {"hello_world", "Hello world", true, {9707, 1879}},  // Hello, Ġworld
    {"one_space", " ", true, {220}},                       // Ġ
    {"spaces_around", "  hi  ", true, {220, 15588, 256}},  // Ġ, Ġhi, ĠĠ
    {"whitespace_runs", "Hello   world\n\n\n  x", true, {9707, 256, 1879, 1406, 220, 856}},
    {"crlf", "\r\n", true, {319}},                          // čĊ
    {"tab", "tab\tx", true, {6192, 10225}},                 // tab, ĉx
    {"contractions", "I'm here, it'S fine", true, {40, 2776, 1588, 11, 432, 13272, 6915}},
    {"digits_split", "12345", true, {16, 17, 18, 19, 20}},
    {"im_start", "<|im_start|>", true, {151644}},
    {"im_start_as_text", "<|im_start|>", false, {27, 91, 318, 4906, 91, 29}},  // <, |, im, _start, |, >
    {"tool_call", "<tool_call>", true, {151657}},                  // added, not special
    {"tool_call_as_text", "<tool_call>", false, {27, 14172, 13429, 29}},
    {"chat_turn_as_text", "<|im_start|>user\nhi<|im_end|>", false,
     {27, 91, 318, 4906, 91, 29, 872, 198, 6023, 27, 91, 318, 6213, 91, 29}},
    {"chat_turn", "<|im_start|>user\nhi<|im_end|>", true, {151644, 872, 198, 6023, 151645}},
    {"eot_mid_word", "hello<|endoftext|>world", true, {14990, 151643, 14615}},
    {"partial_special", "<|im_start", true, {27, 91, 318, 4906}},
    {"think_is_text", "<think>", true, {13708, 766, 29}},     // <th, ink, >
    {"end_think", "</think>", true, {522, 26865, 29}},        // </, think, >
    {"answer", "<answer>", true, {27, 9217, 29}},             // <, answer, >
    {"nfc_composed", "\xC3\xA9", true, {963}},                // é = Ã©
    {"nfc_decomposed", "e\xCC\x81", true, {963}},             // e + U+0301 -> é
    {"chinese", "\xE4\xBD\xA0\xE5\xA5\xBD", true, {108386}},  // 你好
    {"emoji", "\xF0\x9F\x98\x80", true, {141334}},            // 😀
    {"fullwidth", "\xEF\xBC\xA1", true, {133054}},            // Ａ
    {"ideographic_space", "\xE3\x80\x80x", true, {22441, 87}},
    {"nbsp", "a\xC2\xA0" "b", true, {64, 4102, 65}},
    {"empty", "", true, {}},
};

class QwenEncode : public Qwen, public ::testing::WithParamInterface<EncodeCase> {};

TEST_P(QwenEncode, MatchesHuggingFace) {
  const EncodeCase& c = GetParam();
  EXPECT_EQ(tok().encode(c.text, c.parse_special), c.ids);
}

INSTANTIATE_TEST_SUITE_P(Cases, QwenEncode, ::testing::ValuesIn(kEncodeCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST_F(Qwen, Facts) {
  EXPECT_EQ(tok().vocab_size(), 151665u);
  EXPECT_EQ(tok().merge_count(), 151387u);
  EXPECT_EQ(tok().kind(), "bpe");
}

TEST_F(Qwen, TokenIdAndSpecial) {
  EXPECT_EQ(tok().token_id("Hello"), 9707);
  EXPECT_EQ(tok().token_id("\xC4\xA0world"), 1879);  // "Ġworld"
  EXPECT_EQ(tok().token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok().token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok().token_id("<|file_sep|>"), 151664);
  EXPECT_EQ(tok().token_id("no such token here"), std::nullopt);
  EXPECT_EQ(tok().token_id("<think>"), std::nullopt);  // text for this model, not a token
  // Added tokens 151643..151656 are special; 151657..151664 (<tool_call>, </tool_call>, the FIM and
  // repo tokens) are added tokens marked "special": false in Qwen2.5's tokenizer.json.
  for (TokenId id = 151643; id <= 151656; ++id) EXPECT_TRUE(tok().is_special(id)) << id;
  for (TokenId id = 151657; id <= 151664; ++id) EXPECT_FALSE(tok().is_special(id)) << id;
  EXPECT_FALSE(tok().is_special(9707));
  EXPECT_FALSE(tok().is_special(-1));
  EXPECT_FALSE(tok().is_special(151665));
}

TEST_F(Qwen, TokenBytes) {
  EXPECT_EQ(tok().token_bytes(220), " ");
  EXPECT_EQ(tok().token_bytes(1879), " world");
  EXPECT_EQ(tok().token_bytes(198), "\n");
  EXPECT_EQ(tok().token_bytes(151645), "<|im_end|>");
  EXPECT_EQ(tok().token_bytes(-1), "");
  EXPECT_EQ(tok().token_bytes(151665), "");
  EXPECT_EQ(tok().token_bytes(1 << 30), "");
  // Every single byte has a token whose bytes are that byte.
  for (int b = 0; b < 256; ++b) {
    const auto id = tok().token_id(byte_level::byte_to_utf8(static_cast<std::uint8_t>(b)));
    ASSERT_TRUE(id.has_value()) << b;
    EXPECT_EQ(tok().token_bytes(*id), std::string(1, static_cast<char>(b)));
  }
}

TEST_F(Qwen, DecodeRoundTrip) {
  const std::string texts[] = {
      "Hello world",
      "The quick brown fox\n\tjumps over 13 lazy dogs.",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",                  // 你好，世界
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",                  // こんにちは
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 ok",  // family ZWJ
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
      "<|im_start|>assistant\n<think>\nx\n</think>\n\n<answer>\n42\n</answer><|im_end|>",
      "   trailing   ",
      std::string("nul\0byte", 8),
  };
  for (const std::string& t : texts) EXPECT_EQ(tok().decode(tok().encode(t)), t) << t;
}

TEST_F(Qwen, DecodeSkipsSpecialAndBadIds) {
  const Ids ids = {151644, 872, 198, 6023, 151645};
  EXPECT_EQ(tok().decode(ids), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok().decode(ids, /*skip_special=*/true), "user\nhi");
  EXPECT_EQ(tok().decode(Ids{9707, -7, 999999, 1879}), "Hello world");  // unknown ids dropped
}

TEST_F(Qwen, DecodeInvalidUtf8IsReplaced) {
  auto byte_token = [&](std::uint8_t b) { return *tok().token_id(byte_level::byte_to_utf8(b)); };
  EXPECT_EQ(tok().decode(Ids{byte_token(0xE4)}), "\xEF\xBF\xBD");                    // truncated
  EXPECT_EQ(tok().decode(Ids{byte_token(0xE4), 64}), "\xEF\xBF\xBD" "a");             // broken
  EXPECT_EQ(tok().decode(Ids{byte_token(0xFF), byte_token(0xFF)}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok().decode(Ids{byte_token(0xF0), byte_token(0x9F), byte_token(0x98), byte_token(0x80)}),
            "\xF0\x9F\x98\x80");
}

TEST_F(Qwen, InvalidUtf8InputIsRepairedFirst) {
  EXPECT_EQ(tok().encode("a\xFF" "b"), tok().encode("a\xEF\xBF\xBD" "b"));
  EXPECT_EQ(tok().encode("\xE4\xBD"), tok().encode("\xEF\xBF\xBD"));
}

TEST_F(Qwen, LongInputs) {
  const std::string texts[] = {std::string(100000, 'a'), std::string(100000, ' '),
                               std::string(50000, '\n'), std::string(30000, '9')};
  for (const std::string& t : texts) {
    const Ids ids = tok().encode(t);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok().decode(ids), t);
  }
}

TEST_F(Qwen, ConcurrentEncodeAgrees) {
  std::vector<std::string> texts;
  std::mt19937 rng(42);
  const char* words[] = {"hello", " world", "\xE4\xBD\xA0\xE5\xA5\xBD", " 123", "\n", "<|im_end|>",
                         " caf\xC3\xA9", "e\xCC\x81", "\xF0\x9F\x98\x80", "  ", "don't",
                         " \xD0\xBC\xD0\xB8\xD1\x80"};
  for (int i = 0; i < 400; ++i) {
    std::string t;
    for (int w = 0; w < 30; ++w) t += words[rng() % std::size(words)];
    texts.push_back(t);
  }
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(tok().encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::size_t j = (i * 7 + k * 13) % texts.size();
        if (tok().encode(texts[j]) != expected[j]) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ------------------------------------------------------------------------------------------------
// A tiny byte-level tokenizer.json: byte b has id b; merges build "he", "ll", "hell", "hello".

nlohmann::json tiny_tokenizer(bool string_merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_utf8(static_cast<std::uint8_t>(b))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    m.push_back(string_merges ? nlohmann::json(a + " " + b) : nlohmann::json({a, b}));
  }
  const std::string qwen_regex =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
      R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 260}, {"content", "<|x|>"}, {"special", true}, {"normalized", false}},
        {{"id", 261}, {"content", "foo"}, {"special", false}, {"normalized", true}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", qwen_regex}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", false},
           {"use_regex", false}}}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}},
  };
}

class Tiny : public ::testing::TestWithParam<bool> {};  // param: merges in the old "a b" form

TEST_P(Tiny, MergesByRank) {
  TempDir dir;
  auto tok = load_bpe_tokenizer(dir.write("tokenizer.json", tiny_tokenizer(GetParam()).dump()));
  ASSERT_TRUE(tok) << tok.error().message;
  const BpeTokenizer& t = **tok;
  EXPECT_EQ(t.merge_count(), 4u);
  EXPECT_EQ(t.vocab_size(), 262u);
  EXPECT_EQ(t.encode("hello"), (Ids{259}));
  EXPECT_EQ(t.encode("hell"), (Ids{258}));
  EXPECT_EQ(t.encode("help"), (Ids{256, 'l', 'p'}));
  EXPECT_EQ(t.encode("lll"), (Ids{257, 'l'}));          // leftmost pair first on equal rank
  // Pieces "hello" and " hello"; Ġ merges with nothing.
  EXPECT_EQ(t.encode("hello hello"), (Ids{259, ' ', 259}));
  EXPECT_EQ(t.decode(t.encode("hello hello")), "hello hello");
}

TEST_P(Tiny, AddedTokens) {
  TempDir dir;
  auto tok = load_bpe_tokenizer(dir.write("tokenizer.json", tiny_tokenizer(GetParam()).dump()));
  ASSERT_TRUE(tok) << tok.error().message;
  const BpeTokenizer& t = **tok;
  EXPECT_EQ(t.encode("a<|x|>b"), (Ids{'a', 260, 'b'}));
  EXPECT_EQ(t.encode("a<|x|>b", false), (Ids{'a', '<', '|', 'x', '|', '>', 'b'}));
  // Without parse_special every added token is text, special or not.
  EXPECT_EQ(t.encode("afoob"), (Ids{'a', 261, 'b'}));
  EXPECT_EQ(t.encode("afoob", false), (Ids{'a', 'f', 'o', 'o', 'b'}));
  EXPECT_EQ(t.token_id("<|x|>"), 260);
  EXPECT_EQ(t.token_id("foo"), 261);
  EXPECT_TRUE(t.is_special(260));
  EXPECT_FALSE(t.is_special(261));
  EXPECT_EQ(t.decode(Ids{'a', 260, 261}), "a<|x|>foo");
  EXPECT_EQ(t.decode(Ids{'a', 260, 261}, true), "afoo");
}

INSTANTIATE_TEST_SUITE_P(MergeForms, Tiny, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "string_merges" : "pair_merges"; });

// ------------------------------------------------------------------------------------------------
// Load errors: a code the UI can act on and the file named in the message.

struct ErrorCase {
  const char* name;
  std::function<std::string()> content;  // null: no file at all
  std::string code;
};

using Edit = void (*)(nlohmann::json&);
std::function<std::string()> tiny_with(Edit edit) {
  return [edit] {
    nlohmann::json j = tiny_tokenizer(false);
    edit(j);
    return j.dump();
  };
}
std::function<std::string()> raw(std::string text) {
  return [text] { return text; };
}

const ErrorCase kErrorCases[] = {
    {"missing_file", nullptr, "tokenizer.missing"},
    {"not_json", raw("this is { not json"), "tokenizer.json"},
    {"empty_file", raw(""), "tokenizer.json"},
    {"json_array", raw("[1, 2, 3]"), "tokenizer.json"},
    {"no_model", tiny_with([](auto& j) { j.erase("model"); }), "tokenizer.json"},
    {"wordpiece", tiny_with([](auto& j) { j["model"]["type"] = "WordPiece"; }), "tokenizer.model_type"},
    {"no_vocab", tiny_with([](auto& j) { j["model"].erase("vocab"); }), "tokenizer.vocab"},
    {"vocab_not_bytes", tiny_with([](auto& j) { j["model"]["vocab"] = {{"a", 0}}; }), "tokenizer.vocab"},
    {"bad_id", tiny_with([](auto& j) { j["model"]["vocab"]["he"] = "x"; }), "tokenizer.vocab"},
    {"huge_id", tiny_with([](auto& j) { j["model"]["vocab"]["he"] = 2000000000; }), "tokenizer.vocab"},
    {"no_merges", tiny_with([](auto& j) { j["model"].erase("merges"); }), "tokenizer.merges"},
    {"merge_unknown", tiny_with([](auto& j) { j["model"]["merges"].push_back({"q", "z"}); }),
     "tokenizer.merges"},
    {"merge_three", tiny_with([](auto& j) { j["model"]["merges"].push_back("a b c"); }),
     "tokenizer.merges"},
    {"bad_regex",
     tiny_with([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; }),
     "tokenizer.pre_tokenizer"},
    {"not_byte_level", tiny_with([](auto& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }),
     "tokenizer.pre_tokenizer"},
    {"lowercase", tiny_with([](auto& j) { j["normalizer"] = {{"type", "Lowercase"}}; }),
     "tokenizer.normalizer"},
    {"added_no_id", tiny_with([](auto& j) { j["added_tokens"][0].erase("id"); }),
     "tokenizer.added_tokens"},
};

class LoadError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LoadError, NamesCodeAndFile) {
  const ErrorCase& c = GetParam();
  TempDir dir;
  const fs::path file =
      c.content ? dir.write("tokenizer.json", c.content()) : dir.path() / "absent.json";
  auto tok = load_bpe_tokenizer(file);
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code, c.code) << tok.error().message;
  EXPECT_EQ(tok.error().category, ErrorCategory::bad_input);
  EXPECT_NE(tok.error().message.find(file.string()), std::string::npos) << tok.error().message;
  // Through the generic entry point too.
  auto generic = load_tokenizer(file);
  ASSERT_FALSE(generic);
  EXPECT_EQ(generic.error().code, c.code);
}

INSTANTIATE_TEST_SUITE_P(Cases, LoadError, ::testing::ValuesIn(kErrorCases),
                         [](const auto& p) { return std::string(p.param.name); });

// ------------------------------------------------------------------------------------------------
// load_tokenizer picks the file.

TEST(LoadTokenizer, FolderPrefersTokenizerJson) {
  TempDir dir;
  dir.write("tokenizer.json", tiny_tokenizer(false).dump());
  dir.write("tokenizer.model", "not a sentencepiece model");
  auto tok = load_tokenizer(dir.path());
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), "bpe");
  EXPECT_EQ((*tok)->encode("hello"), (Ids{259}));
}

TEST(LoadTokenizer, FolderWithModelOnlyUsesSentencePiece) {
  TempDir dir;
  dir.write("tokenizer.model", "not a sentencepiece model");
  auto tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code, "tokenizer.sentencepiece");
}

TEST(LoadTokenizer, EmptyFolderIsMissing) {
  TempDir dir;
  auto tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code, "tokenizer.missing");
  EXPECT_NE(tok.error().message.find(dir.path().string()), std::string::npos);
}

TEST(LoadTokenizer, FileByExtension) {
  TempDir dir;
  auto bpe = load_tokenizer(dir.write("any-name.json", tiny_tokenizer(true).dump()));
  ASSERT_TRUE(bpe) << bpe.error().message;
  EXPECT_EQ((*bpe)->kind(), "bpe");
  auto sp = load_tokenizer(dir.write("x.model", "garbage"));
  ASSERT_FALSE(sp);
  EXPECT_EQ(sp.error().code, "tokenizer.sentencepiece");
}

// ------------------------------------------------------------------------------------------------
// Private helpers: the GPT-2 byte mapping and the NFC shortcut.

TEST(ByteLevel, MappingIsABijection) {
  EXPECT_EQ(byte_level::byte_to_utf8(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level::byte_to_utf8('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level::byte_to_utf8('A'), "A");
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_level::byte_to_codepoint(static_cast<std::uint8_t>(b));
    EXPECT_EQ(byte_level::codepoint_to_byte(cp), b);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_EQ(byte_level::decode("\xE4\xBD\xA0"), std::nullopt);  // 你 is not a byte-level character
}

std::string utf8proc_nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string r = n >= 0 ? std::string(reinterpret_cast<char*>(out), static_cast<std::size_t>(n)) : s;
  std::free(out);
  return r;
}

// is_nfc_quick() may only say "already NFC" when utf8proc agrees, whatever precedes or follows.
TEST(Nfc, QuickCheckNeverLies) {
  const char32_t neighbours[] = {'a', 'e', 0x3C, 0x1100, 0xAC00, 0x304B, 0x0B47, 0x0301, 0x0316};
  int checked = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string one;
    utf8::append_codepoint(one, cp);
    // U+11A7 after an LV syllable: utf8proc wrongly composes (drops) it; utf8::nfc() passes it
    // through as HF does (see Nfc.FollowsHuggingFace).
    if (!utf8::is_nfc_quick(one) || cp == 0x11A7) continue;
    ASSERT_EQ(utf8proc_nfc(one), one) << std::hex << std::uint32_t{cp};
    if (cp > 0x2FFFF) continue;  // pairs: the planes where anything composes
    for (const char32_t n : neighbours) {
      std::string before;
      utf8::append_codepoint(before, n);
      if (!utf8::is_nfc_quick(before)) continue;
      ASSERT_EQ(utf8proc_nfc(before + one), before + one)
          << std::hex << std::uint32_t{n} << " " << std::uint32_t{cp};
      ASSERT_EQ(utf8proc_nfc(one + before), one + before)
          << std::hex << std::uint32_t{cp} << " " << std::uint32_t{n};
    }
    ++checked;
  }
  EXPECT_GT(checked, 100000);
}

TEST(Nfc, FollowsHuggingFace) {
  EXPECT_EQ(utf8::nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(utf8::nfc("A\xCC\x8A"), "\xC3\x85");
  EXPECT_EQ(utf8::nfc("\xE2\x84\xAB"), "\xC3\x85");                                      // U+212B -> Å
  EXPECT_EQ(utf8::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");           // jamo -> 각
  EXPECT_EQ(utf8::nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");                       // reordered
  // HF's tables predate U+1ACA (class 220): it stays after U+0301, where utf8proc would move it.
  EXPECT_EQ(utf8::nfc("a\xCC\x81\xE1\xAB\x8A"), "\xC3\xA1\xE1\xAB\x8A");
  // HF does not compose U+11935 U+11930 into U+11938 (added after its tables).
  EXPECT_EQ(utf8::nfc("\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0"), "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0");
  // 가 U+11A7 stays (utf8proc alone would drop U+11A7).
  EXPECT_EQ(utf8::nfc("\xEA\xB0\x80\xE1\x86\xA7" "e\xCC\x81"), "\xEA\xB0\x80\xE1\x86\xA7\xC3\xA9");
}

}  // namespace
}  // namespace cosmos
