#include "byte_level.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <vector>

#include <utf8proc.h>

namespace cosmos::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8{};
  std::array<std::int16_t, 324> to_byte{};  // code points 0..323 cover the whole mapping

  Tables() {
    // GPT-2 bytes_to_unicode(): printable Latin-1 bytes keep their code point, the other 68 bytes
    // get 256, 257, ... in byte order.
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      to_cp[b] = cp;
      to_byte[cp] = static_cast<std::int16_t>(b);
      utf8::append_codepoint(to_utf8[b], cp);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_codepoint(std::uint8_t b) { return tables().to_cp[b]; }

int codepoint_to_byte(char32_t cp) {
  return cp < tables().to_byte.size() ? tables().to_byte[cp] : -1;
}

const std::string& byte_to_utf8(std::uint8_t b) { return tables().to_utf8[b]; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += byte_to_utf8(static_cast<std::uint8_t>(c));
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  if (!utf8::is_valid(token)) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    std::size_t len = 0;
    const int b = codepoint_to_byte(utf8::decode_at(token, i, len));
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
    i += len;
  }
  return out;
}

}  // namespace cosmos::byte_level

namespace cosmos::utf8 {

Step step(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<std::uint8_t>(s[i]);
  if (b0 < 0x80) return {1, Step::ok};
  int need = 0;
  std::uint8_t lo = 0x80;
  std::uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, Step::invalid};  // 80..C1, F5..FF never start a character
  }
  std::size_t k = 1;
  for (int j = 0; j < need; ++j, ++k) {
    if (i + k >= s.size()) return {k, Step::truncated};
    const auto c = static_cast<std::uint8_t>(s[i + k]);
    if (c < lo || c > hi) return {k, Step::invalid};
    lo = 0x80;
    hi = 0xBF;
  }
  return {k, Step::ok};
}

namespace {

// Length of the run of ASCII bytes starting at i.
std::size_t ascii_run(std::string_view s, std::size_t i) {
  const std::size_t start = i;
  while (i + 8 <= s.size()) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & 0x8080808080808080ULL) break;
    i += 8;
  }
  while (i < s.size() && static_cast<std::uint8_t>(s[i]) < 0x80) ++i;
  return i - start;
}

}  // namespace

bool is_valid(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    i += ascii_run(s, i);
    if (i >= s.size()) break;
    const Step st = step(s, i);
    if (st.status != Step::ok) return false;
    i += st.length;
  }
  return true;
}

void append_lossy(std::string& out, std::string_view s) {
  out.reserve(out.size() + s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t run = ascii_run(s, i);
    out.append(s.substr(i, run));
    i += run;
    if (i >= s.size()) break;
    const Step st = step(s, i);
    if (st.status == Step::ok) {
      out.append(s.substr(i, st.length));
    } else {
      out.append(kReplacement);
    }
    i += st.length;
  }
}

void append_codepoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

char32_t decode_at(std::string_view s, std::size_t i, std::size_t& len) {
  const auto b0 = static_cast<std::uint8_t>(s[i]);
  auto cont = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<std::uint8_t>(s[i + k]) & 0x3F);
  };
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    len = 2;
    return (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
  }
  if (b0 < 0xF0) {
    len = 3;
    return (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
  }
  len = 4;
  return (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

namespace {

std::string nfc_utf8proc(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                   static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0 || out == nullptr) {
    std::free(out);
    return std::string(s);
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return result;
}

// A character is "stable" when NFC keeps it whatever surrounds it: a starter (combining class 0)
// that is its own NFC and that no composition takes as its second element.
bool stable_slow(char32_t cp) {
  if (cp < 0x300) return true;  // nothing below U+0300 combines or decomposes under NFC
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;  // jamo V, T
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  // comb_index >= 0x8000 marks characters that compose with a preceding starter.
  if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  if (p->decomp_type == 0 && p->decomp_seqindex != UINT16_MAX) {  // canonical decomposition
    std::string one;
    append_codepoint(one, cp);
    return nfc_utf8proc(one) == one;  // precomposed letters survive; singletons etc. do not
  }
  return true;
}

// The Basic Multilingual Plane precomputed; the rest is looked up when met (it rarely is).
const std::vector<bool>& stable_bmp() {
  static const std::vector<bool> table = [] {
    std::vector<bool> t(0x10000);
    for (char32_t cp = 0; cp < 0x10000; ++cp) t[cp] = stable_slow(cp);
    return t;
  }();
  return table;
}

}  // namespace

bool is_nfc_quick(std::string_view s) {
  const std::vector<bool>& bmp = stable_bmp();
  for (std::size_t i = 0; i < s.size();) {
    i += ascii_run(s, i);
    if (i >= s.size()) break;
    std::size_t len = 0;
    const char32_t cp = decode_at(s, i, len);
    if (!(cp < 0x10000 ? bmp[cp] : stable_slow(cp))) return false;
    i += len;
  }
  return true;
}

namespace {

// Hugging Face normalizes with the unicode-normalization-alignments crate, whose tables are from
// Unicode 9: it gives combining class 0 to the combining marks assigned since (and does not know the
// one composition added since, U+11935 U+11930 -> U+11938). To produce the same text, these code
// points are passed through untouched and NFC is applied to the text between them: a class-0
// character that composes with nothing is a boundary that NFC never crosses. The list was obtained
// by comparing HF's NFC with utf8proc's on every mark and composition utf8proc knows.
// U+11A7 is here for another reason: utf8proc wrongly composes LV syllable + U+11A7 (dropping it);
// it composes with nothing, so passing it through is exact.
constexpr std::pair<char32_t, char32_t> kNfcPassThrough[] = {  // sorted
    {0x07FD, 0x07FD}, {0x0898, 0x089F}, {0x08CA, 0x08D3}, {0x09FE, 0x09FE}, {0x0C3C, 0x0C3C},
    {0x0D3B, 0x0D3C}, {0x0EBA, 0x0EBA}, {0x11A7, 0x11A7}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE},
    {0x1DF6, 0x1DFA}, {0xA82C, 0xA82C}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B},
    {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x1193D, 0x1193E},
    {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
    {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97},
    {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
};

bool nfc_pass_through(char32_t cp) {
  if (cp < kNfcPassThrough[0].first) return false;
  for (const auto& [lo, hi] : kNfcPassThrough) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

}  // namespace

std::string nfc(std::string_view s) {
  if (is_nfc_quick(s)) return std::string(s);
  std::string out;
  out.reserve(s.size());
  std::size_t part = 0;  // start of the text not yet normalized
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 0;
    const char32_t cp = decode_at(s, i, len);
    if (nfc_pass_through(cp)) {
      out += nfc_utf8proc(s.substr(part, i - part));
      out.append(s.substr(i, len));
      part = i + len;
    }
    i += len;
  }
  if (part == 0) return nfc_utf8proc(s);
  out += nfc_utf8proc(s.substr(part));
  return out;
}

}  // namespace cosmos::utf8

namespace cosmos::hf_compat {

// HF runs the pattern with Oniguruma (Unicode 16 data in current releases); PCRE2 10.42 knows
// Unicode 14 and its \s differs slightly. translate_pattern() rewrites the few escapes where the two
// disagree so that pieces match HF exactly (checked code point by code point against HF):
//   \s, \S  -> Unicode White_Space exactly (PCRE2's \s also matches U+180E);
//   \p{L}   -> plus the letters assigned in Unicode 15 and 16;
//   \p{N}   -> plus the digits and numbers assigned in Unicode 15 and 16.
// Extra ranges are harmless with a newer PCRE2. Everything else passes through unchanged.
namespace {

struct EscapeRewrite {
  std::string_view escape;  // as written in the pattern
  std::string_view set;     // class contents that replace it (without the brackets)
  bool negated;             // the escape means "not in set" (only usable outside a class)
};

constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";
constexpr std::string_view kLetters =
    R"(\p{L}\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65})"
    R"(\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B}\x{1138E})"
    R"(\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10})"
    R"(\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D})"
    R"(\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D})"
    R"(\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr std::string_view kNumbers =
    R"(\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9})"
    R"(\x{1E5F1}-\x{1E5FA})";
constexpr std::array<EscapeRewrite, 4> kRewrites = {{
    {R"(\s)", kWhiteSpace, false},
    {R"(\S)", kWhiteSpace, true},
    {R"(\p{L})", kLetters, false},
    {R"(\p{N})", kNumbers, false},
}};

}  // namespace

std::string translate_pattern(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const char next = i + 1 < p.size() ? p[i + 1] : '\0';
    if (c == '\\' && next != '\0') {
      const auto rule = std::find_if(kRewrites.begin(), kRewrites.end(), [&](const EscapeRewrite& r) {
        return p.substr(i).starts_with(r.escape) && !(r.negated && in_class);
      });
      if (rule != kRewrites.end()) {
        if (in_class) {
          out += rule->set;
        } else {
          out += rule->negated ? "[^" : "[";
          out += rule->set;
          out += ']';
        }
        i += rule->escape.size() - 1;
      } else {  // any other escape is copied as is (its two characters)
        out += c;
        out += next;
        ++i;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (next == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == '[' && next == ':') {  // POSIX class such as [:alpha:]
      const std::size_t end = p.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(p.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace cosmos::hf_compat
