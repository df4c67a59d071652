// Private helpers for the tokenizers: the GPT-2 byte <-> unicode mapping used by byte-level BPE,
// UTF-8 validation and lossy repair (the same U+FFFD rules as Rust's String::from_utf8_lossy),
// NFC normalization through utf8proc with a cheap "already NFC" check, and the adjustments that make
// PCRE2 and utf8proc agree with Hugging Face tokenizers (Oniguruma, unicode-normalization).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cosmos::byte_level {

// The code point GPT-2's bytes_to_unicode() assigns to byte b (printable bytes map to themselves,
// the others to U+0100 and up, e.g. ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
char32_t byte_to_codepoint(std::uint8_t b);

// The inverse: the byte a code point stands for, or -1 when it is not one of the 256.
int codepoint_to_byte(char32_t cp);

// The UTF-8 text of byte b's code point, e.g. byte_to_utf8(' ') == "Ġ".
const std::string& byte_to_utf8(std::uint8_t b);

// Byte-level form of raw bytes ("a b" -> "aĠb").
std::string encode(std::string_view bytes);

// Raw bytes of a byte-level token ("Ġthe" -> " the"); nullopt when a character is not in the
// mapping or the token is not valid UTF-8.
std::optional<std::string> decode(std::string_view token);

}  // namespace cosmos::byte_level

namespace cosmos::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// One step of UTF-8 decoding at s[i] (i < s.size()).
struct Step {
  enum Status : std::uint8_t {
    ok,         // `length` bytes form one complete character
    invalid,    // `length` bytes are a maximal invalid subpart: one U+FFFD replaces them
    truncated,  // `length` bytes reach the end of s and are a valid prefix of a character
  };
  std::size_t length;
  Status status;
};
Step step(std::string_view s, std::size_t i);

bool is_valid(std::string_view s);

// Appends s to out with every maximal invalid subpart (and an incomplete tail) as U+FFFD.
void append_lossy(std::string& out, std::string_view s);
inline std::string lossy(std::string_view s) {
  std::string out;
  append_lossy(out, s);
  return out;
}

void append_codepoint(std::string& out, char32_t cp);

// Decodes the character at s[i] of valid UTF-8; sets len to its byte count.
char32_t decode_at(std::string_view s, std::size_t i, std::size_t& len);

// Unicode White_Space (what Oniguruma's \s and Rust's char::is_whitespace match).
bool is_white_space(char32_t cp);

// True when s (valid UTF-8) certainly is in NFC already: every character is a starter that has no
// canonical decomposition and cannot compose with a preceding character. False means "maybe not".
bool is_nfc_quick(std::string_view s);

// NFC of valid UTF-8 (utf8proc). Returns s unchanged when it is already NFC or utf8proc fails.
std::string nfc(std::string_view s);

}  // namespace cosmos::utf8

namespace cosmos::hf_compat {

// Rewrites a pre-tokenizer regex written for Oniguruma (what HF runs) so that PCRE2 with
// PCRE2_UTF | PCRE2_UCP splits text the same way (see the table in byte_level.cpp).
std::string translate_pattern(std::string_view onig_pattern);

}  // namespace cosmos::hf_compat
