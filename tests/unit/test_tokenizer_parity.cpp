// Parity with Hugging Face tokenizers: tests/data/tokenizer_golden.json holds, for every string of
// tests/data/tokenizer_cases.json (same order), the ids HF gives (add_special_tokens=False, special
// tokens parsed as HF does by default) with the test tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "byte_level.h"
#include "cosmos/bpe_tokenizer.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::string escaped(const std::string& s) { return nlohmann::json(s).dump(); }

TEST(TokenizerParity, MatchesHuggingFace) {
  const fs::path tokenizer = COSMOS_TEST_TOKENIZER;
  const fs::path golden_file = fs::path(COSMOS_TEST_DATA_DIR) / "tokenizer_golden.json";
  const fs::path cases_file = fs::path(COSMOS_TEST_DATA_DIR) / "tokenizer_cases.json";
  if (!fs::exists(tokenizer)) {
    FAIL() << "test tokenizer missing: " << tokenizer << " (run packaging/setup.sh)";
  }
  if (!fs::exists(golden_file)) {
    GTEST_SKIP() << golden_file << " not generated yet (HF ids for tokenizer_cases.json)";
  }
  const nlohmann::json golden = read_json(golden_file);
  const nlohmann::json cases = read_json(cases_file);
  ASSERT_FALSE(golden.is_discarded()) << golden_file << " is not JSON";
  ASSERT_FALSE(cases.is_discarded()) << cases_file << " is not JSON";
  ASSERT_TRUE(golden.contains("cases") && golden["cases"].is_array());

  // The golden file must belong to this tokenizer and to the current list of cases.
  std::ifstream sha_file(tokenizer.string() + ".sha256");
  std::string sha;
  if (sha_file >> sha && golden.contains("tokenizer_sha256")) {
    ASSERT_EQ(golden["tokenizer_sha256"].get<std::string>(), sha)
        << "golden ids were made with another tokenizer";
  }
  ASSERT_EQ(golden["cases"].size(), cases.size()) << "tokenizer_golden.json is stale: regenerate it";

  auto loaded = load_bpe_tokenizer(tokenizer);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const BpeTokenizer& tok = **loaded;

  int encode_failures = 0;
  int decode_failures = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = golden["cases"][i];
    const std::string text = c["text"].get<std::string>();
    ASSERT_EQ(text, cases[i].get<std::string>()) << "case " << i << ": tokenizer_golden.json is stale";
    const auto want = c["ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tok.encode(text);
    if (got != want && ++encode_failures <= 20) {
      ADD_FAILURE() << "case " << i << " " << escaped(text)
                    << "\n  HF:   " << nlohmann::json(want).dump()
                    << "\n  ours: " << nlohmann::json(got).dump();
    }
    // Decoding HF's ids gives the text back, normalized (NFC, as HF's normalizer does it).
    const std::string expected = utf8::nfc(text);
    if (tok.decode(want) != expected && ++decode_failures <= 20) {
      ADD_FAILURE() << "case " << i << " decode " << escaped(tok.decode(want))
                    << " != " << escaped(expected);
    }
  }
  EXPECT_EQ(encode_failures, 0) << "of " << cases.size() << " cases";
  EXPECT_EQ(decode_failures, 0) << "of " << cases.size() << " cases";
}

}  // namespace
}  // namespace cosmos
