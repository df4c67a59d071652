// Chat format: exact rendering rules of the Qwen2.5-VL template, message parsing errors, and ids
// equal to Hugging Face's rendering + tokenization (golden data from tests/golden/make_golden.py).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/chat_format.h"

namespace cosmos {
namespace {

struct RenderRow {
  const char* name;
  const char* messages_json;
  bool generation_prompt;
  const char* expected;
};

class Render : public ::testing::TestWithParam<RenderRow> {};

TEST_P(Render, MatchesTemplate) {
  const RenderRow& r = GetParam();
  auto msgs = parse_chat_messages(nlohmann::json::parse(r.messages_json), "row");
  ASSERT_TRUE(msgs.ok()) << msgs.error().message;
  ChatFormatOptions o;
  o.add_generation_prompt = r.generation_prompt;
  EXPECT_EQ(render_chat(*msgs, o), r.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, Render,
    ::testing::Values(
        RenderRow{"default_system", R"([{"role":"user","content":"Hi"}])", true,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
        RenderRow{"own_system", R"([{"role":"system","content":"S"},{"role":"user","content":"Q"}])", false,
                  "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"},
        RenderRow{"assistant_first", R"([{"role":"assistant","content":"A"}])", false,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"},
        RenderRow{"image_then_text",
                  R"([{"role":"user","content":[{"type":"image","image":"a.png"},{"type":"text","text":"What?"}]}])",
                  true,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                  "<|vision_start|><|image_pad|><|vision_end|>What?<|im_end|>\n<|im_start|>assistant\n"},
        RenderRow{"video", R"([{"role":"system","content":"S"},{"role":"user","content":[{"type":"video","video":"v"}]}])",
                  false, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|><|im_end|>\n"},
        RenderRow{"image_url", R"([{"role":"system","content":"S"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}])",
                  false, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"},
        RenderRow{"empty", R"([])", true, "<|im_start|>assistant\n"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(ChatFormat, VisionIdsNumberEachKind) {
  auto msgs = parse_chat_messages(nlohmann::json::parse(
      R"([{"role":"system","content":"S"},{"role":"user","content":[{"type":"image"},{"type":"video"},{"type":"image"}]}])"), "x");
  ASSERT_TRUE(msgs.ok());
  ChatFormatOptions o;
  o.add_generation_prompt = false;
  o.add_vision_id = true;
  const std::string s = render_chat(*msgs, o);
  EXPECT_NE(s.find("Picture 1: <|vision_start|><|image_pad|>"), std::string::npos);
  EXPECT_NE(s.find("Video 1: <|vision_start|><|video_pad|>"), std::string::npos);
  EXPECT_NE(s.find("Picture 2: <|vision_start|><|image_pad|>"), std::string::npos);
}

struct BadMessagesRow {
  const char* name;
  const char* json;
  const char* mentions;
};

class BadMessages : public ::testing::TestWithParam<BadMessagesRow> {};

TEST_P(BadMessages, AreRefusedWithTheReason) {
  auto r = parse_chat_messages(nlohmann::json::parse(GetParam().json), "msgs.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "chat.messages");
  EXPECT_NE(r.error().message.find(GetParam().mentions), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("msgs.json"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BadMessages,
    ::testing::Values(BadMessagesRow{"not_list", R"({"a":1})", "list of messages"},
                      BadMessagesRow{"no_role", R"([{"content":"x"}])", "message 0 has no \"role\""},
                      BadMessagesRow{"bad_role", R"([{"role":"user","content":"a"},{"role":"robot","content":"x"}])",
                                     "message 1 has unknown role \"robot\""},
                      BadMessagesRow{"no_content", R"([{"role":"user"}])", "no \"content\""},
                      BadMessagesRow{"number_content", R"([{"role":"user","content":5}])", "string or a list"},
                      BadMessagesRow{"bad_part", R"([{"role":"user","content":[{"type":"audio"}]}])",
                                     "neither text, image nor video"},
                      BadMessagesRow{"text_not_string", R"([{"role":"user","content":[{"type":"text","text":3}]}])",
                                     "non-string \"text\""}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(ChatFormat, AcceptsAnObjectWithMessages) {
  auto r = parse_chat_messages(nlohmann::json::parse(R"({"title":"t","messages":[{"role":"user","content":"x"}]})"), "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1u);
}

// Parity with Hugging Face: template rendering and ids (golden made by tests/golden/make_golden.py).
TEST(ChatFormatParity, MatchesHuggingFace) {
  const std::string golden_path = std::string(COSMOS_TEST_DATA_DIR) + "/chat_golden.json";
  if (!std::filesystem::exists(golden_path)) GTEST_SKIP() << "no " << golden_path;
  ASSERT_TRUE(std::filesystem::exists(COSMOS_TEST_TOKENIZER))
      << COSMOS_TEST_TOKENIZER << " is missing: run packaging/setup.sh";
  auto tok = load_tokenizer(COSMOS_TEST_TOKENIZER);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  std::ifstream f(golden_path);
  const auto golden = nlohmann::json::parse(f);
  ASSERT_GE(golden["cases"].size(), 10u);
  for (const auto& c : golden["cases"]) {
    auto msgs = parse_chat_messages(c["messages"], "golden");
    ASSERT_TRUE(msgs.ok()) << msgs.error().message;
    ChatFormatOptions o;
    o.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    EXPECT_EQ(render_chat(*msgs, o), c["prompt"].get<std::string>());
    EXPECT_EQ(chat_token_ids(**tok, *msgs, o), c["ids"].get<std::vector<TokenId>>()) << c["prompt"];
  }
}

}  // namespace
}  // namespace cosmos
