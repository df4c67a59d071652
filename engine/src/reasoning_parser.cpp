#include "cosmos/reasoning_parser.h"

#include <algorithm>
#include <array>

namespace cosmos {
namespace {

// Indexed by ReasoningParser::Tag.
constexpr std::array<std::string_view, 4> kTagTexts = {"<think>", "</think>", "<answer>", "</answer>"};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

ReasoningParser::ReasoningParser(ReasoningParserOptions options) : options_(options) { reset(); }

void ReasoningParser::reset() {
  state_ = options_.starts_in_reasoning ? State::think : State::outside;
  reasoning_ = Channel{};
  answer_ = Channel{};
  reasoning_.block_start = options_.starts_in_reasoning;
  pending_.clear();
  implicit_open_ = options_.starts_in_reasoning;
  saw_tag_ = false;
  reasoning_closed_ = false;
  after_think_ = false;
  gap_mark_ = 0;
  finished_ = false;
}

ReasoningDelta ReasoningParser::push(std::string_view piece) {
  ReasoningDelta delta;
  if (finished_ || piece.empty()) return delta;
  if (pending_.empty()) {
    scan(piece, delta);
  } else {
    std::string joined = std::move(pending_);
    pending_.clear();
    joined.append(piece);
    scan(joined, delta);
  }
  return delta;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta delta;
  if (finished_) return delta;
  // An unfinished tag is text of the current channel; then trailing whitespace is dropped.
  const std::string rest = std::move(pending_);
  pending_.clear();
  write(rest, delta);
  reasoning_.held.clear();
  answer_.held.clear();
  finished_ = true;
  return delta;
}

// Text up to each '<' is written; at a '<', a complete recognized tag is handled, a proper prefix of
// one (the text ends inside it) is held back in pending_, anything else makes the '<' plain text.
void ReasoningParser::scan(std::string_view text, ReasoningDelta& delta) {
  std::size_t text_start = 0;
  std::size_t pos = 0;
  while ((pos = text.find('<', pos)) != std::string_view::npos) {
    // Written first: which tags are recognized may depend on it (the prompt's <think> repeated).
    write(text.substr(text_start, pos - text_start), delta);
    text_start = pos;
    const std::string_view rest = text.substr(pos);
    bool prefix = false;
    bool matched = false;
    for (std::size_t t = 0; t < kTagTexts.size() && !matched && !prefix; ++t) {
      const Tag tag = static_cast<Tag>(t);
      const std::string_view tag_text = kTagTexts[t];
      if (!tag_allowed(tag)) continue;
      if (rest.starts_with(tag_text)) {
        on_tag(tag, delta);
        pos += tag_text.size();
        text_start = pos;
        matched = true;
      } else if (rest.size() < tag_text.size() && tag_text.starts_with(rest)) {
        prefix = true;
      }
    }
    if (prefix) {
      pending_.assign(rest);
      return;
    }
    if (!matched) ++pos;
  }
  write(text.substr(text_start), delta);
}

bool ReasoningParser::tag_allowed(Tag tag) const {
  switch (state_) {
    case State::outside:
      return true;
    case State::think:
      return tag == Tag::close_think ||
             (tag == Tag::open_think && implicit_open_ && !reasoning_.block_has_text);
    case State::answer:
      return tag == Tag::close_answer;
  }
  return false;
}

void ReasoningParser::on_tag(Tag tag, ReasoningDelta& delta) {
  const bool first_tag = !saw_tag_;
  saw_tag_ = true;
  switch (tag) {
    case Tag::open_think:
      if (state_ == State::think) return;  // the model repeated the prompt's <think>: swallowed
      state_ = State::think;
      after_think_ = false;
      reasoning_.held = reasoning_.text.empty() ? "" : "\n\n";  // blank line between think blocks
      reasoning_.block_start = true;
      reasoning_.block_has_text = false;
      return;
    case Tag::close_think:
      if (state_ == State::outside) {
        if (!first_tag) return;  // stray </think>: dropped
        // Bare </think> before any other tag: the text so far was reasoning.
        if (!answer_.text.empty()) {
          delta.reasoning += answer_.text;
          delta.answer.clear();
          delta.answer_reset = true;
          reasoning_.text = std::move(answer_.text);
          answer_.text.clear();
        }
        answer_.held.clear();
      }
      state_ = State::outside;
      reasoning_closed_ = true;
      implicit_open_ = false;
      reasoning_.held.clear();  // trailing whitespace of the block (or the unused separator)
      reasoning_.block_start = false;
      answer_.block_start = false;
      after_think_ = true;
      gap_mark_ = answer_.held.size();
      return;
    case Tag::open_answer:
      if (after_think_) answer_.held.resize(std::min(gap_mark_, answer_.held.size()));
      after_think_ = false;
      state_ = State::answer;
      answer_.block_start = true;
      answer_.block_has_text = false;
      return;
    case Tag::close_answer:
      if (state_ == State::outside) return;  // stray </answer>: dropped
      state_ = State::outside;
      if (answer_.block_has_text) answer_.held.clear();  // trailing whitespace of the block
      answer_.block_start = false;
      after_think_ = false;
      return;
  }
}

void ReasoningParser::write(std::string_view text, ReasoningDelta& delta) {
  if (text.empty()) return;
  if (state_ == State::think) {
    write_channel(reasoning_, text, delta.reasoning);
    return;
  }
  if (state_ == State::outside && after_think_ &&
      std::any_of(text.begin(), text.end(), [](char c) { return !is_space(c); })) {
    after_think_ = false;
  }
  write_channel(answer_, text, delta.answer);
}

// Whitespace is held back (dropped at a block start); other text first releases what was held,
// unless the channel is still empty (no leading whitespace).
void ReasoningParser::write_channel(Channel& channel, std::string_view text, std::string& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const bool space = is_space(text[i]);
    std::size_t j = i + 1;
    while (j < text.size() && is_space(text[j]) == space) ++j;
    const std::string_view run = text.substr(i, j - i);
    if (space) {
      if (!channel.block_start) channel.held.append(run);
    } else {
      if (!channel.text.empty()) {
        channel.text += channel.held;
        out += channel.held;
      }
      channel.held.clear();
      channel.text.append(run);
      out.append(run);
      channel.block_start = false;
      channel.block_has_text = true;
    }
    i = j;
  }
}

}  // namespace cosmos
