// libFuzzer target: the reply's text path on arbitrary bytes, checked against the invariants the
// headers promise (a wrong result traps, as a crash does):
//   - ReasoningParser (cosmos/reasoning_parser.h): the final channels do not depend on how the reply
//     is split into pieces; replaying the deltas (clear the answer on answer_reset, then append)
//     gives exactly reasoning() and answer(); neither channel starts or ends with ASCII whitespace.
//   - With a tokenizer (COSMOS_TEST_TOKENIZER, the Qwen2 tokenizer.json that packaging/setup.sh
//     fetches; the tokenizer part is skipped without it):
//       * encode: every id is below vocab_size(); for valid UTF-8 text, decode(encode(t)) is t up to
//         NFC, so encoding it again gives the same ids; for ASCII text it is t itself;
//       * StreamingDecoder: for any id sequence (here: ids taken from the input), the pieces
//         push() returns, then flush(), concatenate to decode(ids), and each piece is valid UTF-8.
//
//   cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCOSMOS_FUZZ=ON
//   ninja -C build/fuzz fuzz_text_stream
//   COSMOS_TEST_TOKENIZER=~/.cache/cosmos-chat/test-tokenizer/tokenizer.json \
//     build/fuzz/bin/fuzz_text_stream -dict=tests/fuzz/text.dict -max_total_time=60 /tmp/tcorpus tests/fuzz/text_corpus
//
// Input layout: byte 0 holds the options (bit 0: starts_in_reasoning, bit 1: parse_special; bits 2-7
// seed the piece boundaries); the rest is the reply text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cosmos/bpe_tokenizer.h"
#include "cosmos/reasoning_parser.h"
#include "cosmos/streaming_decoder.h"

namespace {

std::unique_ptr<cosmos::BpeTokenizer> g_tokenizer;  // loaded once; encode() is const

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) { ++i; continue; }
    if (b >= 0xC2 && b <= 0xDF) { n = 1; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 2; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 3; cp = b & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

void check_channel(const std::string& s) {
  if (!s.empty() && (is_space(s.front()) || is_space(s.back()))) __builtin_trap();
}

struct Parsed {
  std::string reasoning, answer;
};

// Parses `text` in pieces cut at `cuts` (sorted offsets), checking the delta-replay invariant.
Parsed parse(std::string_view text, const std::vector<std::size_t>& cuts, bool starts_in_reasoning) {
  cosmos::ReasoningParser parser(cosmos::ReasoningParserOptions{starts_in_reasoning});
  Parsed replay;
  auto apply = [&replay](const cosmos::ReasoningDelta& d) {
    if (d.answer_reset) replay.answer.clear();
    replay.reasoning += d.reasoning;
    replay.answer += d.answer;
  };
  std::size_t begin = 0;
  for (std::size_t cut : cuts) {
    apply(parser.push(text.substr(begin, cut - begin)));
    begin = cut;
  }
  apply(parser.push(text.substr(begin)));
  apply(parser.finish());
  if (replay.reasoning != parser.reasoning() || replay.answer != parser.answer()) __builtin_trap();
  if (parser.in_reasoning() || !parser.finished()) __builtin_trap();
  if (!parser.push("more").empty() || !parser.finish().empty()) __builtin_trap();  // ended until reset()
  check_channel(parser.reasoning());
  check_channel(parser.answer());
  return {parser.reasoning(), parser.answer()};
}

void check_parser(std::string_view text, unsigned options) {
  const bool starts = options & 1u;
  const Parsed whole = parse(text, {}, starts);
  // Piece boundaries from a small generator seeded by the option bits and the text's length.
  std::vector<std::size_t> cuts;
  std::uint32_t state = (options >> 2) * 2654435761u + static_cast<std::uint32_t>(text.size()) + 1;
  for (std::size_t at = 0;;) {
    state = state * 1664525u + 1013904223u;
    at += 1 + (state >> 24) % 9;  // pieces of 1-9 bytes
    if (at >= text.size()) break;
    cuts.push_back(at);
  }
  const Parsed split = parse(text, cuts, starts);
  if (split.reasoning != whole.reasoning || split.answer != whole.answer) __builtin_trap();
  // One byte at a time, the hardest split for the held-back tag prefixes.
  std::vector<std::size_t> bytes;
  for (std::size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  const Parsed single = parse(text, bytes, starts);
  if (single.reasoning != whole.reasoning || single.answer != whole.answer) __builtin_trap();
}

void check_tokenizer(std::string_view text, bool parse_special) {
  const auto& tok = *g_tokenizer;
  const std::vector<cosmos::TokenId> ids = tok.encode(text, parse_special);
  for (auto id : ids)
    if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size()) __builtin_trap();
  if (valid_utf8(text)) {
    const std::string back = tok.decode(ids);
    if (!valid_utf8(back)) __builtin_trap();
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii && back != text) __builtin_trap();
    if (tok.encode(back, parse_special) != ids) __builtin_trap();
  }
  // Arbitrary ids (two input bytes each), streamed: the pieces concatenate to decode().
  std::vector<cosmos::TokenId> any;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    const unsigned v = static_cast<unsigned char>(text[i]) | (static_cast<unsigned>(static_cast<unsigned char>(text[i + 1])) << 8);
    // Mostly ordinary tokens, with the top of the vocabulary (the special tokens) reachable too.
    any.push_back(static_cast<cosmos::TokenId>((v & 0x8000u) ? tok.vocab_size() - 1 - (v & 0xFFu) : v % tok.vocab_size()));
  }
  for (bool skip : {false, true}) {
    cosmos::StreamingDecoder dec(tok, skip);
    std::string streamed;
    for (auto id : any) {
      const std::string piece = dec.push(id);
      if (!valid_utf8(piece) || dec.pending() > 3) __builtin_trap();
      streamed += piece;
    }
    const std::string rest = dec.flush();
    if (!valid_utf8(rest) || dec.pending() != 0) __builtin_trap();
    streamed += rest;
    if (streamed != tok.decode(any, skip)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* path = std::getenv("COSMOS_TEST_TOKENIZER")) {
    auto r = cosmos::load_bpe_tokenizer(path);
    if (!r) __builtin_trap();  // a tokenizer named but not loadable: the run would test nothing
    g_tokenizer = std::move(r).value();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned options = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  check_parser(text, options);
  if (g_tokenizer) check_tokenizer(text, (options & 2u) != 0);
  return 0;
}
