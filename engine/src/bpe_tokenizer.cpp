// Byte-level BPE encode (added tokens, NFC, regex split, rank merges, cache) and decode.
#include "cosmos/bpe_tokenizer.h"

#include <algorithm>
#include <functional>

#include "bpe_tokenizer_impl.h"
#include "byte_level.h"

namespace cosmos {

using bpe_detail::MatchData;

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {  // HF only sees valid strings; repair the way from_utf8_lossy does
    repaired = utf8::lossy(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  MatchData md;
  impl_->raw_added.split(
      text, parse_special,
      [&](std::string_view segment) { impl_->encode_text(segment, parse_special, ids, md); },
      [&](TokenId id) { ids.push_back(id); });
  return ids;
}

void BpeTokenizer::Impl::encode_text(std::string_view text, bool parse_special,
                                     std::vector<TokenId>& out, MatchData& md) const {
  std::string normalized;
  if (nfc && !utf8::is_nfc_quick(text)) {
    normalized = utf8::nfc(text);
    text = normalized;
  }
  if (normalized_added.empty()) {
    encode_normalized(text, out, md);
    return;
  }
  normalized_added.split(
      text, parse_special, [&](std::string_view segment) { encode_normalized(segment, out, md); },
      [&](TokenId id) { out.push_back(id); });
}

void BpeTokenizer::Impl::encode_normalized(std::string_view text, std::vector<TokenId>& out,
                                           MatchData& md) const {
  if (!regex) {
    encode_piece(text, out);
    return;
  }
  if (!md) md.reset(pcre2_match_data_create_from_pattern(regex.get(), nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;   // where the next search starts
  std::size_t done = 0;  // end of the text already emitted
  while (pos < text.size()) {
    int rc = jit ? pcre2_jit_match(regex.get(), subject, text.size(), pos, 0, md.get(),
                                   match_context.get())
                 : PCRE2_ERROR_JIT_BADOPTION;
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {  // no JIT, or its stack ran out: the interpreter
      rc = pcre2_match(regex.get(), subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       md.get(), match_context.get());
    }
    if (rc < 0) break;  // no more matches (or a failure): the rest is one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const std::size_t start = ov[0];
    const std::size_t end = ov[1];
    if (start > done) encode_piece(text.substr(done, start - done), out);  // "Isolated": gaps too
    if (end > start) {
      encode_piece(text.substr(start, end - start), out);
      pos = done = end;
    } else {  // an empty match: step over one character
      if (start >= text.size()) break;
      done = start;
      pos = start + utf8::step(text, start).length;
    }
  }
  if (done < text.size()) encode_piece(text.substr(done), out);
}

void BpeTokenizer::Impl::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out.push_back(byte_ids[static_cast<std::uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
  const std::size_t hash = cacheable ? std::hash<std::string_view>{}(piece) : 0;
  if (cacheable && cache.lookup(piece, hash, out)) return;
  const std::size_t before = out.size();
  bpe(piece, out);
  if (cacheable) cache.insert(piece, hash, std::span<const TokenId>(out).subspan(before));
}

// Merges by rank with a linked list of symbols and a min-heap of candidate pairs ordered by
// (rank, position): O(n log n). Mirrors HF's Word::merge_all, including how stale entries are
// recognised, so that results agree even in odd cases.
void BpeTokenizer::Impl::bpe(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges) {
    const auto it = vocab.find(byte_level::encode(piece));
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    TokenId id;
    std::int32_t prev;
    std::int32_t next;
    bool alive;
  };
  struct Candidate {
    std::int32_t rank;
    std::int32_t pos;
    TokenId merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  constexpr std::size_t kKeepScratch = 1 << 16;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  const auto n = static_cast<std::int32_t>(piece.size());
  symbols.resize(piece.size());
  heap.clear();
  for (std::int32_t i = 0; i < n; ++i) {
    const TokenId id = byte_ids[static_cast<std::uint8_t>(piece[i])];
    symbols[i] = Symbol{id, i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  const auto greater = std::greater<Candidate>{};
  auto push = [&](std::int32_t pos, std::int32_t next) {
    if (const MergeTable::Entry* m = merges.find(symbols[pos].id, symbols[next].id)) {
      heap.push_back(Candidate{m->rank, pos, m->merged});
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    const std::int32_t right_pos = left.next;
    const MergeTable::Entry* m = merges.find(left.id, symbols[right_pos].id);
    if (m == nullptr || m->merged != top.merged) continue;  // stale entry
    left.id = top.merged;
    left.next = symbols[right_pos].next;
    symbols[right_pos].alive = false;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev, top.pos);
    if (left.next >= 0) push(top.pos, left.next);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
  if (symbols.capacity() > kKeepScratch) {  // a huge piece: do not keep its buffers per thread
    symbols = {};
    heap = {};
  }
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string bytes;
  for (const TokenId id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes.append(impl_->bytes_of(id));
  }
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::lossy(bytes);
}

std::string BpeTokenizer::token_bytes(TokenId id) const { return std::string(impl_->bytes_of(id)); }

std::size_t BpeTokenizer::vocab_size() const { return impl_->offsets.size() - 1; }

std::optional<TokenId> BpeTokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  if (const auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

bool BpeTokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() && impl_->special[id] != 0;
}

std::size_t BpeTokenizer::merge_count() const { return impl_->merges.size(); }

}  // namespace cosmos
