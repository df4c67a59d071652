// Byte-level BPE (Hugging Face tokenizer.json). See cosmos/bpe_tokenizer.h for the pipeline.
#include "cosmos/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <spdlog/spdlog.h>

#include "byte_level.h"

namespace cosmos {
namespace {

using json = nlohmann::json;

// Lets string-keyed maps be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

// ---------------------------------------------------------------------------------------------
// Added tokens: leftmost-longest whole-string matching (what HF's aho-corasick LeftmostLongest does).

struct AddedToken {
  std::string content;
  TokenId id = 0;
  bool special = false;
};

class AddedMatcher {
 public:
  void add(const AddedToken& token) {
    if (token.content.empty()) return;
    auto& bucket = by_first_[static_cast<std::uint8_t>(token.content[0])];
    bucket.push_back(token);
    // Longest first, so the first candidate that matches at a position is the longest one.
    std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken& a, const AddedToken& b) {
      return a.content.size() > b.content.size();
    });
    empty_ = false;
  }
  bool empty() const { return empty_; }

  // Calls on_text(segment) for the text between matches and on_token(id) for each match. Without
  // parse_special nothing is matched (the Tokenizer contract: added tokens are then ordinary text).
  template <typename OnText, typename OnToken>
  void split(std::string_view text, bool parse_special, OnText&& on_text, OnToken&& on_token) const {
    if (!parse_special || empty_) {
      on_text(text);
      return;
    }
    std::size_t text_start = 0;
    std::size_t i = 0;
    while (i < text.size()) {
      const AddedToken* hit = nullptr;
      for (const AddedToken& t : by_first_[static_cast<std::uint8_t>(text[i])]) {
        if (text.compare(i, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
      }
      if (hit == nullptr) {
        ++i;
        continue;
      }
      if (i > text_start) on_text(text.substr(text_start, i - text_start));
      on_token(hit->id);
      i += hit->content.size();
      text_start = i;
    }
    if (text_start < text.size()) on_text(text.substr(text_start));
  }

 private:
  std::array<std::vector<AddedToken>, 256> by_first_;
  bool empty_ = true;
};

// ---------------------------------------------------------------------------------------------
// Merge rules: (left id, right id) -> (rank, merged id) in an open-addressing table.

class MergeTable {
 public:
  struct Entry {
    std::uint64_t key = kEmpty;
    std::int32_t rank = 0;
    TokenId merged = 0;
  };

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  // A later rule for the same pair replaces the earlier one (HF builds a HashMap the same way).
  void insert(TokenId a, TokenId b, std::int32_t rank, TokenId merged) {
    const std::uint64_t key = make_key(a, b);
    for (std::size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) ++count_;
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = Entry{key, rank, merged};
        return;
      }
    }
  }
  const Entry* find(TokenId a, TokenId b) const {
    const std::uint64_t key = make_key(a, b);
    for (std::size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  std::size_t size() const { return count_; }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t make_key(TokenId a, TokenId b) {
    return (std::uint64_t{static_cast<std::uint32_t>(a)} << 32) | static_cast<std::uint32_t>(b);
  }
  std::size_t hash(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask_;
  }
  std::vector<Entry> slots_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Piece cache: piece bytes -> ids, sharded so that threads rarely wait on one another.

class PieceCache {
 public:
  static constexpr std::size_t kMaxPieceBytes = 256;

  bool lookup(std::string_view piece, std::size_t hash, std::vector<TokenId>& out) const {
    Shard& s = shard(hash);
    std::lock_guard lock(s.mutex);
    const auto it = s.map.find(KeyView{piece, hash});
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void insert(std::string_view piece, std::size_t hash, std::span<const TokenId> ids) const {
    Shard& s = shard(hash);
    std::lock_guard lock(s.mutex);
    if (s.map.size() >= kMaxPerShard) s.map.clear();  // crude but bounded; refills with what is used
    s.map.emplace(Key{std::string(piece), hash}, std::vector<TokenId>(ids.begin(), ids.end()));
  }

 private:
  static constexpr std::size_t kShards = 64;
  static constexpr std::size_t kMaxPerShard = 2048;
  struct Key {
    std::string text;
    std::size_t hash;
  };
  struct KeyView {
    std::string_view text;
    std::size_t hash;
  };
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(const Key& k) const { return k.hash; }
    std::size_t operator()(const KeyView& k) const { return k.hash; }
  };
  struct KeyEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return a.hash == b.hash && std::string_view(a.text) == std::string_view(b.text);
    }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<Key, std::vector<TokenId>, KeyHash, KeyEq> map;
  };
  Shard& shard(std::size_t hash) const { return shards_[(hash * 0x9E3779B97F4A7C15ULL) >> 58]; }
  mutable std::array<Shard, kShards> shards_;
};

// ---------------------------------------------------------------------------------------------
// The pre-tokenizer regex (PCRE2, JIT when available; see hf_compat::translate_pattern).

pcre2_jit_stack* thread_jit_stack(void*) {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    ~Holder() {
      if (stack != nullptr) pcre2_jit_stack_free(stack);
    }
  };
  thread_local Holder holder;
  return holder.stack;  // nullptr falls back to PCRE2's small default stack
}

struct Pcre2Deleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
  void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
};
using MatchData = std::unique_ptr<pcre2_match_data, Pcre2Deleter>;

}  // namespace

// ---------------------------------------------------------------------------------------------

struct BpeTokenizer::Impl {
  std::filesystem::path file;
  StringMap vocab;      // byte-level token text -> id
  StringMap added_ids;  // added token content -> id
  std::array<TokenId, 256> byte_ids{};
  MergeTable merges;
  AddedMatcher raw_added;         // normalized = false: matched on the input text
  AddedMatcher normalized_added;  // normalized = true: matched after NFC
  bool nfc = false;
  bool ignore_merges = false;
  std::unique_ptr<pcre2_code, Pcre2Deleter> regex;  // null: no split, a segment is one piece
  std::unique_ptr<pcre2_match_context, Pcre2Deleter> match_context;
  bool jit = false;
  std::string bytes_blob;               // token_bytes of every id, back to back
  std::vector<std::uint32_t> offsets;   // id -> [offsets[id], offsets[id + 1]) in bytes_blob
  std::vector<std::uint8_t> special;    // id -> 1 for special added tokens
  PieceCache cache;

  void encode_text(std::string_view text, bool parse_special, std::vector<TokenId>& out,
                   MatchData& md) const;
  void encode_normalized(std::string_view text, std::vector<TokenId>& out, MatchData& md) const;
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void bpe(std::string_view piece, std::vector<TokenId>& out) const;
  std::string_view bytes_of(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) + 1 >= offsets.size()) return {};
    return std::string_view(bytes_blob).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }
};

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

// ---------------------------------------------------------------------------------------------
// Loading

namespace {

class Loader {
 public:
  explicit Loader(std::filesystem::path file) : file_(std::move(file)) {}

  Result<std::unique_ptr<BpeTokenizer>> load();

 private:
  Error fail(const std::string& code, const std::string& what) const {
    return make_error(ErrorCategory::bad_input, code, file_.string() + ": " + what);
  }
  std::optional<Error> load_vocab(const json& model, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_merges(const json& model, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_normalizer(const json& normalizer, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_pre_tokenizer(const json& pre, BpeTokenizer::Impl& impl) const;
  std::optional<Error> compile_regex(const std::string& pattern, BpeTokenizer::Impl& impl) const;

  std::filesystem::path file_;
};

// Ids index flat tables: refuse absurd ones rather than allocate for them.
constexpr std::int64_t kMaxTokenId = (1 << 24) - 1;

bool valid_id(const json& id) {
  return id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() <= kMaxTokenId;
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<Error> Loader::load_vocab(const json& model, BpeTokenizer::Impl& impl) const {
  const json* vocab = member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->empty()) {
    return fail("tokenizer.vocab", "model.vocab is missing or not an object");
  }
  impl.vocab.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!valid_id(id)) {
      return fail("tokenizer.vocab", "vocabulary id of \"" + token + "\" is not a valid id");
    }
    impl.vocab.emplace(token, id.get<TokenId>());
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = impl.vocab.find(byte_level::byte_to_utf8(static_cast<std::uint8_t>(b)));
    if (it == impl.vocab.end()) {
      return fail("tokenizer.vocab",
                  "not a byte-level vocabulary (byte " + std::to_string(b) + " has no token)");
    }
    impl.byte_ids[b] = it->second;
  }
  return std::nullopt;
}

std::optional<Error> Loader::load_merges(const json& model, BpeTokenizer::Impl& impl) const {
  const json* merges = member(model, "merges");
  if (merges == nullptr || !merges->is_array()) {
    return fail("tokenizer.merges", "model.merges is missing or not an array");
  }
  impl.merges.reserve(merges->size());
  std::string left;
  std::string right;
  for (std::size_t rank = 0; rank < merges->size(); ++rank) {
    const json& m = (*merges)[rank];
    if (m.is_string()) {  // older form: "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return fail("tokenizer.merges",
                    "merge " + std::to_string(rank) + " (\"" + s + "\") is not two tokens");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return fail("tokenizer.merges",
                  "merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    const auto a = impl.vocab.find(left);
    const auto b = impl.vocab.find(right);
    const auto ab = impl.vocab.find(left + right);
    if (a == impl.vocab.end() || b == impl.vocab.end() || ab == impl.vocab.end()) {
      return fail("tokenizer.merges", "merge " + std::to_string(rank) + " (" + left + " " + right +
                                          ") uses a token that is not in the vocabulary");
    }
    impl.merges.insert(a->second, b->second, static_cast<std::int32_t>(rank), ab->second);
  }
  return std::nullopt;
}

std::optional<Error> Loader::load_normalizer(const json& normalizer,
                                             BpeTokenizer::Impl& impl) const {
  if (normalizer.is_null()) return std::nullopt;
  const std::string type = normalizer.value("type", "");
  if (type == "NFC") {
    impl.nfc = true;
    return std::nullopt;
  }
  if (type == "Sequence" && normalizer.contains("normalizers")) {
    for (const json& n : normalizer["normalizers"]) {
      if (auto e = load_normalizer(n, impl)) return e;
    }
    return std::nullopt;
  }
  return fail("tokenizer.normalizer", "normalizer \"" + type + "\" is not supported (only NFC)");
}

std::optional<Error> Loader::compile_regex(const std::string& pattern,
                                           BpeTokenizer::Impl& impl) const {
  const std::string translated = hf_compat::translate_pattern(pattern);
  int code = 0;
  PCRE2_SIZE offset = 0;
  impl.regex.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr));
  if (!impl.regex) {
    std::array<PCRE2_UCHAR, 256> msg{};
    pcre2_get_error_message(code, msg.data(), msg.size());
    return fail("tokenizer.pre_tokenizer", "pre-tokenizer regex does not compile at offset " +
                                               std::to_string(offset) + ": " +
                                               reinterpret_cast<const char*>(msg.data()));
  }
  impl.jit = pcre2_jit_compile(impl.regex.get(), PCRE2_JIT_COMPLETE) == 0;
  if (!impl.jit) spdlog::debug("tokenizer: PCRE2 JIT unavailable, using the interpreter");
  impl.match_context.reset(pcre2_match_context_create(nullptr));
  if (impl.jit) pcre2_jit_stack_assign(impl.match_context.get(), thread_jit_stack, nullptr);
  return std::nullopt;
}

std::optional<Error> Loader::load_pre_tokenizer(const json& pre, BpeTokenizer::Impl& impl) const {
  std::vector<const json*> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const json& p : pre["pretokenizers"]) steps.push_back(&p);
  } else if (!pre.is_null()) {
    steps.push_back(&pre);
  }
  std::optional<std::string> pattern;
  bool byte_level = false;
  for (const json* step : steps) {
    const std::string type = step->value("type", "");
    if (type == "Split") {
      if (pattern) return fail("tokenizer.pre_tokenizer", "only one regex split is supported");
      const json* pat = member(*step, "pattern");
      if (step->value("behavior", "") != "Isolated" || step->value("invert", false) || pat == nullptr) {
        return fail("tokenizer.pre_tokenizer", "only a Split with behavior Isolated is supported");
      }
      if (const json* re = member(*pat, "Regex"); re && re->is_string()) {
        pattern = re->get<std::string>();
      } else if (const json* lit = member(*pat, "String"); lit && lit->is_string()) {
        std::string escaped;  // a literal: escape every ASCII punctuation character
        for (const char c : lit->get<std::string>()) {
          const auto u = static_cast<unsigned char>(c);
          if (u < 0x80 && !std::isalnum(u)) escaped += '\\';
          escaped += c;
        }
        pattern = escaped;
      } else {
        return fail("tokenizer.pre_tokenizer", "Split pattern is neither Regex nor String");
      }
    } else if (type == "ByteLevel") {
      byte_level = true;
      if (step->value("add_prefix_space", true)) {
        return fail("tokenizer.pre_tokenizer", "ByteLevel add_prefix_space is not supported");
      }
      if (step->value("use_regex", true)) {
        if (pattern) return fail("tokenizer.pre_tokenizer", "only one regex split is supported");
        pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
      }
    } else {
      return fail("tokenizer.pre_tokenizer", "pre-tokenizer \"" + type + "\" is not supported");
    }
  }
  if (!byte_level) {
    return fail("tokenizer.pre_tokenizer", "only byte-level BPE is supported (no ByteLevel step)");
  }
  if (pattern) return compile_regex(*pattern, impl);
  return std::nullopt;
}

Result<std::unique_ptr<BpeTokenizer>> Loader::load() {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_, ec)) {
    return make_error(ErrorCategory::bad_input, "tokenizer.missing",
                      "tokenizer file not found: " + file_.string());
  }
  std::ifstream in(file_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    return make_error(ErrorCategory::io, "tokenizer.read",
                      "cannot read tokenizer file " + file_.string());
  }
  const json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return fail("tokenizer.json", "not a valid tokenizer.json (JSON object expected)");
  }

  const json* model = member(root, "model");
  if (model == nullptr || !model->is_object()) return fail("tokenizer.json", "no \"model\" object");
  const std::string type = model->value("type", "BPE");
  if (type != "BPE") {
    return fail("tokenizer.model_type", "model type \"" + type + "\" is not supported (BPE expected)");
  }
  if (!model->value("continuing_subword_prefix", std::string()).empty() ||
      !model->value("end_of_word_suffix", std::string()).empty()) {
    return fail("tokenizer.model_type", "BPE with a subword prefix or word suffix is not supported");
  }

  auto impl = std::make_unique<BpeTokenizer::Impl>();
  impl->file = file_;
  impl->ignore_merges = model->value("ignore_merges", false);
  if (auto e = load_vocab(*model, *impl)) return *e;
  if (auto e = load_merges(*model, *impl)) return *e;
  if (auto e = load_normalizer(root.value("normalizer", json()), *impl)) return *e;
  if (auto e = load_pre_tokenizer(root.value("pre_tokenizer", json()), *impl)) return *e;

  // Added tokens.
  std::vector<AddedToken> added;
  TokenId max_id = -1;
  for (const auto& [token, id] : impl->vocab) max_id = std::max(max_id, id);
  if (const json* list = member(root, "added_tokens")) {
    for (const json& t : *list) {
      if (!t.is_object() || !t.contains("id") || !valid_id(t["id"]) || !t.contains("content") ||
          !t["content"].is_string()) {
        return fail("tokenizer.added_tokens", "an added token lacks a valid id or content");
      }
      AddedToken a{t["content"].get<std::string>(), t["id"].get<TokenId>(), t.value("special", false)};
      if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false)) {
        spdlog::warn("tokenizer {}: lstrip/rstrip/single_word of added token {} are ignored",
                     file_.string(), a.content);
      }
      (t.value("normalized", !a.special) ? impl->normalized_added : impl->raw_added).add(a);
      impl->added_ids[a.content] = a.id;
      max_id = std::max(max_id, a.id);
      added.push_back(std::move(a));
    }
  }

  // token_bytes for every id: vocabulary tokens byte-level decoded, added tokens as written.
  std::vector<std::string> decoded(static_cast<std::size_t>(max_id) + 1);
  for (const auto& [token, id] : impl->vocab) {
    auto raw = byte_level::decode(token);
    decoded[id] = raw ? std::move(*raw) : token;
  }
  impl->special.assign(decoded.size(), 0);
  for (const AddedToken& a : added) {
    decoded[a.id] = a.content;
    impl->special[a.id] = a.special ? 1 : 0;
  }
  impl->offsets.reserve(decoded.size() + 1);
  for (const std::string& d : decoded) {
    impl->offsets.push_back(static_cast<std::uint32_t>(impl->bytes_blob.size()));
    impl->bytes_blob += d;
  }
  impl->offsets.push_back(static_cast<std::uint32_t>(impl->bytes_blob.size()));
  spdlog::debug("tokenizer {}: {} tokens, {} merges, {} added", file_.string(), impl->vocab.size(),
                impl->merges.size(), added.size());
  return std::make_unique<BpeTokenizer>(std::move(impl));
}

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> load_bpe_tokenizer(const std::filesystem::path& tokenizer_json) {
  try {
    return Loader(tokenizer_json).load();
  } catch (const std::exception& e) {  // nlohmann type errors on a malformed file, bad_alloc
    return make_error(ErrorCategory::bad_input, "tokenizer.json",
                      tokenizer_json.string() + ": malformed tokenizer.json: " + e.what());
  }
}

}  // namespace cosmos
