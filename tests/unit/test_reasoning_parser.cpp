// ReasoningParser: a table of whole replies with their expected (reasoning, answer); each row is
// also fed byte by byte, at every split point, at every pair of split points and in random pieces,
// and must give the same channels, with deltas that add up to them. Then the streaming behaviour
// (what is held back and when it is released, in_reasoning()) and a random-reply property test.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cosmos/reasoning_parser.h"

namespace cosmos {
namespace {

using Pieces = std::vector<std::string>;

struct Case {
  const char* name;
  std::string input;
  std::string reasoning;
  std::string answer;
  bool starts_in_reasoning = false;
};

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    if (c < 0x80) n = 1;
    else if ((c & 0xE0) == 0xC0) n = 2;
    else if ((c & 0xF0) == 0xE0) n = 3;
    else if ((c & 0xF8) == 0xF0) n = 4;
    else return false;
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

struct Outcome {
  std::string reasoning;
  std::string answer;
  bool answer_reset = false;
};

// Feeds the pieces; checks that the deltas applied in order always equal the accessors, and (when
// the pieces are whole UTF-8 characters) that every delta is valid UTF-8.
Outcome run(const Pieces& pieces, bool starts_in_reasoning, bool pieces_are_utf8) {
  ReasoningParser parser(ReasoningParserOptions{.starts_in_reasoning = starts_in_reasoning});
  Outcome got;
  auto apply = [&](const ReasoningDelta& d) {
    if (d.answer_reset) {
      got.answer.clear();
      got.answer_reset = true;
    }
    got.reasoning += d.reasoning;
    got.answer += d.answer;
    EXPECT_EQ(d.empty(), d.reasoning.empty() && d.answer.empty() && !d.answer_reset);
    if (pieces_are_utf8) {
      EXPECT_TRUE(valid_utf8(d.reasoning)) << d.reasoning;
      EXPECT_TRUE(valid_utf8(d.answer)) << d.answer;
    }
    EXPECT_EQ(got.reasoning, parser.reasoning());
    EXPECT_EQ(got.answer, parser.answer());
  };
  for (const std::string& piece : pieces) apply(parser.push(piece));
  apply(parser.finish());
  EXPECT_FALSE(parser.in_reasoning());
  EXPECT_TRUE(parser.finish().empty());
  return got;
}

std::string show(const Pieces& pieces) {
  std::string s;
  for (const std::string& p : pieces) s += "[" + p + "]";
  return s;
}

// Splits at random UTF-8 character boundaries.
Pieces random_pieces(const std::string& text, std::mt19937& rng, bool char_boundaries) {
  Pieces pieces;
  std::uniform_int_distribution<int> len(1, 6);
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = std::min(text.size(), i + static_cast<std::size_t>(len(rng)));
    while (char_boundaries && j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
    pieces.push_back(text.substr(i, j - i));
    i = j;
  }
  return pieces;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> table = {
      // Cosmos-Reason1's format.
      {"canonical", "<think>\nThe arm moves left.\nIt picks the cup.\n</think>\n\n<answer>\nThe cup.\n</answer>",
       "The arm moves left.\nIt picks the cup.", "The cup."},
      {"canonical_trailing_newline", "<think>\nR\n</think>\n\n<answer>\nA\n</answer>\n", "R", "A"},
      {"blank_lines_inside_kept", "<think>\nStep 1.\n\nStep 2.\n</think>\n\n<answer>\nLine 1\n\nLine 2\n</answer>",
       "Step 1.\n\nStep 2.", "Line 1\n\nLine 2"},
      {"compact", "<think>R</think><answer>A</answer>", "R", "A"},
      // Missing tags.
      {"no_tags", "Hello, world.\n\nSecond paragraph.", "", "Hello, world.\n\nSecond paragraph."},
      {"no_tags_trimmed", "\n  Hello  \n", "", "Hello"},
      {"only_answer", "<answer>\n42\n</answer>", "", "42"},
      {"only_think", "<think>\nR\n</think>", "R", ""},
      {"unclosed_think", "<think>\nstill thinking\n", "still thinking", ""},
      {"unclosed_answer", "<think>R</think>\n<answer>\npartial ", "R", "partial"},
      {"answer_without_open_tag", "<think>\nR\n</think>\n\nA\n</answer>", "R", "A"},
      {"empty_think_then_text", "<think></think>A", "", "A"},
      {"empty_blocks", "<think>\n\n</think>\n\n<answer>\n\n</answer>", "", ""},
      {"empty", "", "", ""},
      {"whitespace_only", " \n\r\n\t", "", ""},
      // Text outside blocks goes to the answer, with its own whitespace.
      {"text_before_think", "Sure.\n<think>\nR\n</think>\n\n<answer>\nA\n</answer>", "R", "Sure.\nA"},
      {"text_between", "<think>R</think>\nSo:\n<answer>\nA\n</answer>", "R", "So:\nA"},
      {"text_after_answer", "<think>\nR\n</think>\n\n<answer>\nA\n</answer>\nHope this helps.", "R",
       "A\nHope this helps."},
      {"inline_answer", "The answer is <answer>42</answer>.", "", "The answer is 42."},
      {"stray_close_answer", "Hi</answer> there", "", "Hi there"},
      {"stray_close_think_after_tags", "<answer>A</answer></think>B", "", "AB"},
      // Not tags.
      {"less_than", "a<b and c < d, x<=y, <3", "", "a<b and c < d, x<=y, <3"},
      {"less_than_at_end", "x <", "", "x <"},
      {"double_less_than", "<<think>R</think>", "R", "<"},
      {"unfinished_tag_at_end", "<think>\nR </thi", "R </thi", ""},
      {"unfinished_open_at_end", "A <answ", "", "A <answ"},
      {"lookalikes", "<thinking>hmm</thinking> <answers>x</answers> </thinker>", "",
       "<thinking>hmm</thinking> <answers>x</answers> </thinker>"},
      {"case_and_spaces", "<Think>a</Think> < think> <think > </ answer>", "",
       "<Think>a</Think> < think> <think > </ answer>"},
      // Tags inside blocks.
      {"nested_think", "<think>\nA <think> B\n</think>\n<answer>C</answer>", "A <think> B", "C"},
      {"answer_tags_in_think", "<think>I will write </answer> and <answer> later</think>x",
       "I will write </answer> and <answer> later", "x"},
      {"unclosed_think_with_answer", "<think>\nR\n<answer>A</answer>", "R\n<answer>A</answer>", ""},
      {"tags_in_answer", "<answer>Use <think> and </think>, or <answer>.</answer>", "",
       "Use <think> and </think>, or <answer>."},
      // Repeated blocks.
      {"think_after_answer", "<think>\nR1\n</think>\n\n<answer>\nA\n</answer>\n<think>\nR2\n</think>", "R1\n\nR2",
       "A"},
      {"two_rounds", "<think>R1</think><answer>A1</answer>\n\n<think>R2</think>\n\n<answer>A2</answer>",
       "R1\n\nR2", "A1\n\nA2"},
      {"empty_second_think", "<think>R</think><think> </think><answer>A</answer>", "R", "A"},
      // Non-ASCII text around tags.
      {"cjk_emoji", "<think>\n机器人在移动。🤖\n</think>\n\n<answer>\n答案：杯子 ☕️\n</answer>", "机器人在移动。🤖",
       "答案：杯子 ☕️"},
      {"cjk_adjacent_to_tags", "前<think>思考</think>間<answer>答え</answer>後", "思考", "前間答え後"},
      {"unicode_space_is_text", "<answer>\u3000A\u3000</answer>", "", "\u3000A\u3000"},
      // Whitespace variants.
      {"crlf", "<think>\r\nR1\r\nR2\r\n</think>\r\n\r\n<answer>\r\nA\r\n</answer>\r\n", "R1\r\nR2", "A"},
      {"tabs_and_spaces", "<think> \t R \t </think>  <answer>  A  </answer>  ", "R", "A"},
      // Missing <think>: a bare </think> before any other tag reclassifies the text so far.
      {"bare_close_think", "The scene shows a cup.\n</think>\n\n<answer>\nA cup.\n</answer>",
       "The scene shows a cup.", "A cup."},
      {"bare_close_think_no_answer_tag", "R\n</think>\nA", "R", "A"},
      {"bare_close_think_at_start", "</think>A", "", "A"},
      {"bare_close_think_then_think", "R1</think><think>R2</think>A", "R1\n\nR2", "A"},
      // The prompt opened the think block.
      {"starts_in_reasoning", "R\n</think>\n\n<answer>\nA\n</answer>", "R", "A", true},
      {"starts_in_reasoning_repeated_open", "\n<think>\nR\n</think>A", "R", "A", true},
      {"starts_in_reasoning_nested_later", "R <think> x</think>", "R <think> x", "", true},
      {"starts_in_reasoning_unclosed", "R", "R", "", true},
      {"starts_in_reasoning_empty", "", "", "", true},
  };
  return table;
}

class ReasoningTable : public testing::TestWithParam<Case> {};

TEST_P(ReasoningTable, Whole) {
  const Case& c = GetParam();
  const Outcome got = run({c.input}, c.starts_in_reasoning, true);
  EXPECT_EQ(got.reasoning, c.reasoning);
  EXPECT_EQ(got.answer, c.answer);
}

TEST_P(ReasoningTable, ByteByByte) {
  const Case& c = GetParam();
  Pieces pieces;
  for (const char ch : c.input) pieces.emplace_back(1, ch);
  const Outcome got = run(pieces, c.starts_in_reasoning, false);
  EXPECT_EQ(got.reasoning, c.reasoning);
  EXPECT_EQ(got.answer, c.answer);
}

TEST_P(ReasoningTable, EverySplitPoint) {
  const Case& c = GetParam();
  for (std::size_t i = 0; i <= c.input.size(); ++i) {
    const Pieces pieces = {c.input.substr(0, i), c.input.substr(i)};
    const Outcome got = run(pieces, c.starts_in_reasoning, false);
    EXPECT_EQ(got.reasoning, c.reasoning) << show(pieces);
    EXPECT_EQ(got.answer, c.answer) << show(pieces);
  }
}

TEST_P(ReasoningTable, EveryPairOfSplitPoints) {
  const Case& c = GetParam();
  for (std::size_t i = 0; i <= c.input.size(); ++i) {
    for (std::size_t j = i; j <= c.input.size(); ++j) {
      const Pieces pieces = {c.input.substr(0, i), c.input.substr(i, j - i), c.input.substr(j)};
      const Outcome got = run(pieces, c.starts_in_reasoning, false);
      ASSERT_EQ(got.reasoning, c.reasoning) << show(pieces);
      ASSERT_EQ(got.answer, c.answer) << show(pieces);
    }
  }
}

TEST_P(ReasoningTable, RandomPieces) {
  const Case& c = GetParam();
  for (unsigned seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const Pieces pieces = random_pieces(c.input, rng, true);
    const Outcome got = run(pieces, c.starts_in_reasoning, true);
    ASSERT_EQ(got.reasoning, c.reasoning) << "seed " << seed << " " << show(pieces);
    ASSERT_EQ(got.answer, c.answer) << "seed " << seed << " " << show(pieces);
  }
}

// The answer is reset (and the flag seen) exactly for the bare-</think> rows.
TEST_P(ReasoningTable, AnswerResetOnlyForBareCloseThink) {
  const Case& c = GetParam();
  const Outcome got = run({c.input}, c.starts_in_reasoning, true);
  const bool bare = std::string(c.name).starts_with("bare_close_think") && !c.reasoning.empty();
  EXPECT_EQ(got.answer_reset, bare);
}

INSTANTIATE_TEST_SUITE_P(Replies, ReasoningTable, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& param_info) { return std::string(param_info.param.name); });

// --- Streaming behaviour ---

TEST(ReasoningParser, InReasoningTransitions) {
  ReasoningParser p;
  EXPECT_FALSE(p.in_reasoning());
  p.push("<thi");
  EXPECT_FALSE(p.in_reasoning());
  p.push("nk>");
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_FALSE(p.reasoning_closed());
  p.push("\nLooking at the image");
  EXPECT_TRUE(p.in_reasoning());
  p.push("\n</th");
  EXPECT_TRUE(p.in_reasoning());
  p.push("ink>");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_TRUE(p.reasoning_closed());
  p.push("\n\n<answer>\nA cup\n</answer>\n<think>more");
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_TRUE(p.reasoning_closed());
  p.finish();
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.reasoning(), "Looking at the image\n\nmore");
  EXPECT_EQ(p.answer(), "A cup");
}

TEST(ReasoningParser, InReasoningFromStartWhenPromptOpenedIt) {
  ReasoningParser p(ReasoningParserOptions{.starts_in_reasoning = true});
  EXPECT_TRUE(p.in_reasoning());
  p.push("R</think>");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_TRUE(p.reasoning_closed());
  p.reset();
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_FALSE(p.reasoning_closed());
  EXPECT_EQ(p.reasoning(), "");
}

TEST(ReasoningParser, TrailingWhitespaceHeldUntilTextFollows) {
  ReasoningParser p;
  EXPECT_TRUE(p.push("<think>\n").empty());
  EXPECT_EQ(p.push("Step 1. ").reasoning, "Step 1.");
  EXPECT_TRUE(p.push("\n\n").empty());
  EXPECT_EQ(p.push("Step 2.").reasoning, " \n\nStep 2.");
  EXPECT_TRUE(p.push("\n").empty());
  EXPECT_TRUE(p.push("</think>").empty());
  EXPECT_EQ(p.reasoning(), "Step 1. \n\nStep 2.");
}

TEST(ReasoningParser, LessThanReleasedWhenItCannotBeATag) {
  ReasoningParser p;
  EXPECT_EQ(p.push("x<t").answer, "x");  // "<t" may still become <think>
  EXPECT_EQ(p.push("o").answer, "<to");
  EXPECT_EQ(p.push(" a <").answer, " a");
  EXPECT_EQ(p.push("/").answer, "");     // "</" may become </think> or </answer>
  EXPECT_EQ(p.push("b").answer, " </b");
  EXPECT_EQ(p.answer(), "x<to a </b");
}

TEST(ReasoningParser, OnlyTagsValidHereAreHeldBack) {
  ReasoningParser p;
  p.push("<think>a");
  EXPECT_EQ(p.push("<t").reasoning, "<t");  // inside think only </think> is a tag
  EXPECT_EQ(p.push("<").reasoning, "");
  EXPECT_EQ(p.push("/think").reasoning, "");
  EXPECT_EQ(p.push("s").reasoning, "</thinks");
  ReasoningParser q;
  q.push("<answer>a");
  EXPECT_EQ(q.push("<think").answer, "<think");  // inside answer only </answer> is a tag
}

TEST(ReasoningParser, UnfinishedTagFlushedAtFinish) {
  ReasoningParser p;
  EXPECT_EQ(p.push("<think>R </thi").reasoning, "R");
  const ReasoningDelta d = p.finish();
  EXPECT_EQ(d.reasoning, " </thi");
  EXPECT_EQ(p.reasoning(), "R </thi");
}

TEST(ReasoningParser, BareCloseThinkMovesAnswerToReasoning) {
  ReasoningParser p;
  EXPECT_EQ(p.push("The cup is red.").answer, "The cup is red.");
  const ReasoningDelta d = p.push("\n</think>\n\n<answer>\nRed");
  EXPECT_TRUE(d.answer_reset);
  EXPECT_EQ(d.reasoning, "The cup is red.");
  EXPECT_EQ(d.answer, "Red");
  EXPECT_EQ(p.reasoning(), "The cup is red.");
  EXPECT_EQ(p.answer(), "Red");
  EXPECT_TRUE(p.reasoning_closed());
  EXPECT_FALSE(p.push(".\n</answer>").answer_reset);
  EXPECT_EQ(p.answer(), "Red.");
}

TEST(ReasoningParser, NoResetAfterAnEarlierTag) {
  ReasoningParser p;
  p.push("<answer>A</answer> B");
  const ReasoningDelta d = p.push("</think> C");
  EXPECT_FALSE(d.answer_reset);
  EXPECT_EQ(p.reasoning(), "");
  EXPECT_EQ(p.answer(), "A B C");
}

TEST(ReasoningParser, PushAfterFinishIgnoredUntilReset) {
  ReasoningParser p;
  p.push("<answer>A");
  p.finish();
  EXPECT_TRUE(p.finished());
  EXPECT_TRUE(p.push("more").empty());
  EXPECT_EQ(p.answer(), "A");
  p.reset();
  EXPECT_FALSE(p.finished());
  EXPECT_EQ(p.answer(), "");
  EXPECT_EQ(p.push("<think>x").reasoning, "x");
}

// --- Property test: random replies built from tags, tag prefixes, whitespace and text ---

std::string random_reply(std::mt19937& rng) {
  static const std::vector<std::string> parts = {
      "<think>", "</think>", "<answer>", "</answer>", "<thi", "</", "<", "<answers>", "<thinking>", " ", "\n",
      "\r\n", "\t", "\n\n", "word", "a<b", ">", "/", "思考", "🤖", "x y", "</think", "<answer"};
  std::uniform_int_distribution<std::size_t> count(0, 30);
  std::uniform_int_distribution<std::size_t> pick(0, parts.size() - 1);
  std::string reply;
  const std::size_t n = count(rng);
  for (std::size_t i = 0; i < n; ++i) reply += parts[pick(rng)];
  return reply;
}

TEST(ReasoningParserProperty, RandomRepliesAndSplits) {
  for (unsigned seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(seed);
    const std::string reply = random_reply(rng);
    const bool starts_in_reasoning = seed % 3 == 0;
    const Outcome whole = run({reply}, starts_in_reasoning, true);
    for (const std::string* ch : {&whole.reasoning, &whole.answer}) {
      if (ch->empty()) continue;
      EXPECT_FALSE(is_ascii_space(ch->front())) << "seed " << seed;
      EXPECT_FALSE(is_ascii_space(ch->back())) << "seed " << seed;
    }
    for (int trial = 0; trial < 5; ++trial) {
      const bool char_boundaries = trial % 2 == 0;
      const Pieces pieces = random_pieces(reply, rng, char_boundaries);
      const Outcome got = run(pieces, starts_in_reasoning, char_boundaries);
      ASSERT_EQ(got.reasoning, whole.reasoning) << "seed " << seed << " " << show(pieces);
      ASSERT_EQ(got.answer, whole.answer) << "seed " << seed << " " << show(pieces);
    }
  }
}

}  // namespace
}  // namespace cosmos
