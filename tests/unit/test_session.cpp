// Session: prefix reuse across turns, truncation on edits, stops, cancellation, context limits,
// and streamed pieces that are valid UTF-8 and add up to the reply.
#include <gtest/gtest.h>

#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "cosmos/stop_strings.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

LoadedModel load(int context = 4096) {
  BackendOptions o;
  o.context_tokens = context;
  auto m = load_model(testing::tiny_model_dir(), Device::cpu, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return std::move(*m);
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = n;
  o.stop_tokens = {-1};
  return o;
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(Session, SecondTurnReusesThePrefixAndMatchesAFreshSession) {
  LoadedModel m = load();
  std::vector<ChatMessage> conv = {ChatMessage::text("user", "Describe the scene.")};
  Session s(*m.backend, *m.tokenizer);
  auto t1 = s.chat(conv, greedy(12));
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  EXPECT_EQ(t1->stats.reused_tokens, 0);
  conv.push_back(ChatMessage::text("assistant", t1->text));
  conv.push_back(ChatMessage::text("user", "And then?"));
  auto t2 = s.chat(conv, greedy(12));
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  // The first turn's prompt at least (the reply may re-tokenize differently) comes from the cache.
  EXPECT_GE(t2->stats.reused_tokens, t1->stats.prompt_tokens);
  EXPECT_LT(t2->stats.reused_tokens, t2->stats.prompt_tokens);

  Session fresh(*m.backend, *m.tokenizer);
  auto f = fresh.chat(conv, greedy(12));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->stats.reused_tokens, 0);
  EXPECT_EQ(f->token_ids, t2->token_ids);
  EXPECT_EQ(f->text, t2->text);
}

TEST(Session, EditingAnEarlierMessageTruncatesToTheCommonPrefix) {
  LoadedModel m = load();
  Session s(*m.backend, *m.tokenizer);
  const std::vector<TokenId> a = m.tokenizer->encode("The robot picks up the red cup and");
  ASSERT_TRUE(s.generate(a, greedy(5)).ok());
  std::vector<TokenId> b = a;
  b[4] = 5000;  // an edit in the middle
  auto r = s.generate(b, greedy(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reused_tokens, 4);
  Session fresh(*m.backend, *m.tokenizer);
  auto f = fresh.generate(b, greedy(5));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->token_ids, r->token_ids);
  // Regenerating the same prompt recomputes only its last token.
  auto again = s.generate(b, greedy(5));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stats.reused_tokens, static_cast<int>(b.size()) - 1);
  EXPECT_EQ(again->token_ids, r->token_ids);
}

TEST(Session, PiecesAreValidUtf8AndAddUpToTheText) {
  LoadedModel m = load();
  Session s(*m.backend, *m.tokenizer);
  GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 3;
  o.max_new_tokens = 80;
  std::string joined;
  int calls = 0;
  auto r = s.generate(m.tokenizer->encode("机器人把杯子放在桌子上。"), o, [&](std::string_view piece, const GenerationStats&) {
    EXPECT_TRUE(valid_utf8(piece));
    joined += piece;
    ++calls;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(joined, r->text);
  EXPECT_GT(calls, 0);
  EXPECT_GT(r->stats.decode_tok_per_s, 0.0);
  EXPECT_GT(r->stats.ttft_s, 0.0);
  // Same seed, same tokens.
  Session s2(*m.backend, *m.tokenizer);
  auto r2 = s2.generate(m.tokenizer->encode("机器人把杯子放在桌子上。"), o);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->token_ids, r->token_ids);
}

TEST(Session, CancelsWhenTheCallbackSaysSo) {
  LoadedModel m = load();
  Session s(*m.backend, *m.tokenizer);
  int calls = 0;
  auto r = s.generate(m.tokenizer->encode("Hello"), greedy(50),
                      [&](std::string_view, const GenerationStats&) { return ++calls < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.stop, StopReason::cancelled);
  EXPECT_EQ(r->stats.generated_tokens, 3);
}

TEST(Session, StopsOnStopTokensAndStopStrings) {
  LoadedModel m = load();
  Session s(*m.backend, *m.tokenizer);
  const auto prompt = m.tokenizer->encode("Hello");
  auto free_run = s.generate(prompt, greedy(30));
  ASSERT_TRUE(free_run.ok());
  ASSERT_GE(free_run->token_ids.size(), 6u);
  // The 4th generated token as a stop token: generation ends there, without its text.
  GenerateOptions o = greedy(30);
  o.stop_tokens = {free_run->token_ids[3]};
  auto r = s.generate(prompt, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.stop, StopReason::eos);
  EXPECT_EQ(r->token_ids.size(), 4u);
  // A stop string taken from the middle of the free-running text.
  const std::string& text = free_run->text;
  ASSERT_GE(text.size(), 8u);
  GenerateOptions so = greedy(30);
  so.stop_strings = {text.substr(text.size() / 2, 3)};
  auto rs = s.generate(prompt, so);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->stats.stop, StopReason::stop_string);
  EXPECT_EQ(rs->text, text.substr(0, text.find(so.stop_strings[0])));
}

TEST(Session, ContextOverflowIsAClearErrorAndAFullContextStops) {
  LoadedModel m = load(64);
  Session s(*m.backend, *m.tokenizer);
  std::vector<TokenId> long_prompt(100, 1000);
  auto r = s.generate(long_prompt, greedy(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "context.overflow");
  EXPECT_NE(r.error().message.find("100 tokens"), std::string::npos);
  EXPECT_NE(r.error().message.find("64"), std::string::npos);
  std::vector<TokenId> prompt(50, 1000);
  auto full = s.generate(prompt, greedy(100));
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->stats.stop, StopReason::context_full);
  EXPECT_LE(full->stats.prompt_tokens + full->stats.generated_tokens, 64);
}

TEST(Session, RejectsBadSamplingParameters) {
  LoadedModel m = load();
  Session s(*m.backend, *m.tokenizer);
  GenerateOptions o;
  o.sampling.top_p = 1.5f;
  auto r = s.generate(m.tokenizer->encode("Hi"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("top_p"), std::string::npos);
}

struct StopRow {
  const char* name;
  std::vector<std::string> stops;
  std::vector<std::string> pieces;
  std::string emitted;
  bool stopped;
};

class StopStrings : public ::testing::TestWithParam<StopRow> {};

TEST_P(StopStrings, HoldBackOnlyWhatCouldStillMatch) {
  const StopRow& row = GetParam();
  StopStringFilter f(row.stops);
  std::string out;
  for (const auto& p : row.pieces) out += f.push(p);
  if (!f.stopped()) out += f.flush();
  EXPECT_EQ(out, row.emitted);
  EXPECT_EQ(f.stopped(), row.stopped);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, StopStrings,
    ::testing::Values(StopRow{"none", {}, {"ab", "cd"}, "abcd", false},
                      StopRow{"whole", {"STOP"}, {"abSTOPcd"}, "ab", true},
                      StopRow{"split", {"STOP"}, {"ab", "ST", "O", "Pcd"}, "ab", true},
                      StopRow{"false_start", {"STOP"}, {"abST", "x"}, "abSTx", false},
                      StopRow{"tail_kept_until_flush", {"STOP"}, {"abSTO"}, "abSTO", false},
                      StopRow{"earliest_wins", {"cd", "b"}, {"abcd"}, "a", true},
                      StopRow{"multibyte", {"。"}, {"机器", "人\xe3", "\x80\x82后"}, "机器人", true}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace cosmos
