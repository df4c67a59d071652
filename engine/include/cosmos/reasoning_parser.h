// Streaming reasoning parser: splits a reply like
//   "<think>\n…reasoning…\n</think>\n\n<answer>\n…answer…\n</answer>"
// into two channels, reasoning and answer, while it arrives in pieces (the text pieces of a
// StreamingDecoder: valid UTF-8 each, but a tag may be split across pieces, e.g. "</thi" + "nk>").
// Shared by the CLI, the desktop app and the server; Qt-free, no exceptions.
//
// Rules (each one is tested in tests/unit/test_reasoning_parser.cpp):
//
// Tags. Only the exact, case-sensitive tags <think>, </think>, <answer>, </answer> are tags;
//   "<thinking>", "<answers>", "<Think>", "< think>", "a<b", "a < b" are text. Recognized tags never
//   appear in either channel. Which tags are recognized depends on where the stream is:
//   - outside any block: all four. <think> opens a think block, <answer> an answer block. A stray
//     </answer> (no block open) is dropped, so is a stray </think> after any earlier tag. A bare
//     </think> before any other tag: see "Missing <think>" below.
//   - inside <think>: only </think>. A nested <think>, or <answer>/</answer>, is reasoning text (the
//     reasoning may talk about the format). A think block left open runs to the end of the reply.
//   - inside <answer>: only </answer>. <think>, </think>, a nested <answer> are answer text.
//   - a second think block (e.g. after the answer) appends to the reasoning channel, separated from
//     the earlier reasoning by a blank line ("\n\n"); a second answer block appends to the answer.
//
// Channels. Think-block content goes to reasoning. Everything else (answer-block content and text
//   outside any block: before <think>, between </think> and <answer>, after </answer>, or a reply
//   with no tags at all) goes to answer, in order, byte-exact (CJK and emoji pass through; the parser
//   only ever holds back ASCII, so a delta never splits a UTF-8 sequence).
//
// Whitespace (ASCII space, \t, \n, \r, \v, \f; other Unicode spaces are text).
//   - Neither channel ever starts or ends with whitespace.
//   - Whitespace right after <think>/<answer> and right before </think>/</answer> is dropped.
//   - Whitespace-only text between </think> and the <answer> that follows it is dropped.
//   - Whitespace elsewhere is kept: outside text joins an answer block with its own whitespace
//     ("The answer is <answer>42</answer>." gives "The answer is 42."). Internal whitespace
//     (blank lines, "\r\n") is never changed.
//   Trailing whitespace is held back until it is known whether more text of the channel follows;
//   it is emitted then, and dropped at a closing tag or at finish().
//
// Held-back tag prefixes. A "<" is held back only while the bytes after it can still become a tag
//   recognized at that point; as soon as they cannot, it is emitted as text. At finish() an
//   unfinished tag ("…<thi") is emitted as text of the current channel.
//
// Missing <think>. Some replies start with the reasoning and only close it ("…reasoning…</think>
//   <answer>…"), e.g. when the prompt already ended with "<think>".
//   - If the caller knows the prompt opened the block, construct the parser with
//     starts_in_reasoning: the stream starts inside a think block (in_reasoning() is true at once),
//     and a "<think>" before any reasoning text is swallowed (the model repeated the tag).
//   - Otherwise, a bare </think> arriving before any other tag reclassifies all the text so far
//     (which was streamed as answer) as reasoning: reasoning() gets it, answer() restarts empty, and
//     the delta of that push has answer_reset set, carries the moved text in `reasoning`, and only
//     text after the reset in `answer`. A UI clears its answer view on answer_reset (a terminal that
//     cannot retract may print a separator). The stored message is therefore always right. A tagless
//     reply that mentions a literal "</think>" is reclassified the same way (accepted: rare).
//
// End of stream. finish() flushes held-back text and ends the stream; an unclosed think block stays
//   reasoning (answer empty if nothing else was written). After finish(), in_reasoning() is false and
//   push()/finish() return empty deltas until reset().
//
// Invariant: starting from empty channels and, for each delta, clearing the answer if answer_reset
// and then appending reasoning and answer, gives exactly reasoning() and answer(); the final channels
// do not depend on how the reply was split into pieces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cosmos {

// Text appended to each channel by one push() or finish().
struct ReasoningDelta {
  std::string reasoning;      // appended to the reasoning channel
  std::string answer;         // appended to the answer channel (after the reset, if any)
  bool answer_reset = false;  // the answer so far moved to reasoning (bare </think>): clear it first

  bool empty() const { return reasoning.empty() && answer.empty() && !answer_reset; }
};

struct ReasoningParserOptions {
  // The prompt already opened the think block (it ended with "<think>"): start inside it.
  bool starts_in_reasoning = false;
};

class ReasoningParser {
 public:
  ReasoningParser() = default;
  explicit ReasoningParser(ReasoningParserOptions options);

  // Adds the next piece of the reply; returns what became certain.
  ReasoningDelta push(std::string_view piece);
  // End of stream: flushes held-back text (an unfinished tag becomes text; trailing whitespace goes).
  ReasoningDelta finish();

  // Everything so far (after finish(): final).
  const std::string& reasoning() const { return reasoning_.text; }
  const std::string& answer() const { return answer_.text; }
  // Inside an open think block now (UI: "thinking…"); false after finish().
  bool in_reasoning() const { return state_ == State::think && !finished_; }
  // A </think> was seen (including a bare one).
  bool reasoning_closed() const { return reasoning_closed_; }
  // finish() was called.
  bool finished() const { return finished_; }

  // Starts a new stream with the same options.
  void reset();

 private:
  enum class State { outside, think, answer };
  enum class Tag { open_think, close_think, open_answer, close_answer };

  struct Channel {
    std::string text;           // emitted so far
    std::string held;           // whitespace held back (emitted before the next text, if any)
    bool block_start = false;   // at the start of a block: whitespace is dropped, not held
    bool block_has_text = false;
  };

  void scan(std::string_view text, ReasoningDelta& delta);
  bool tag_allowed(Tag tag) const;
  void on_tag(Tag tag, ReasoningDelta& delta);
  void write(std::string_view text, ReasoningDelta& delta);
  static void write_channel(Channel& channel, std::string_view text, std::string& out);

  ReasoningParserOptions options_;
  State state_ = State::outside;
  Channel reasoning_;
  Channel answer_;
  std::string pending_;             // a held-back tag prefix ("<", "</thi", …)
  bool implicit_open_ = false;      // inside the block opened by the prompt (starts_in_reasoning)
  bool saw_tag_ = false;            // any tag recognized so far
  bool reasoning_closed_ = false;
  bool after_think_ = false;        // only whitespace since the last </think>
  std::size_t gap_mark_ = 0;        // answer_.held size at that </think>
  bool finished_ = false;
};

}  // namespace cosmos
