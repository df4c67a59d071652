// BpeTokenizer internals shared by its encode and load files: tables, matcher, cache and Impl.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <pcre2.h>

#include "cosmos/bpe_tokenizer.h"

namespace cosmos::bpe_detail {

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
// PCRE2 handles (the regex itself is compiled by the loader; see hf_compat::translate_pattern).

struct Pcre2Deleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
  void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
};
using MatchData = std::unique_ptr<pcre2_match_data, Pcre2Deleter>;

}  // namespace cosmos::bpe_detail

namespace cosmos {

struct BpeTokenizer::Impl {
  using StringMap = bpe_detail::StringMap;
  using MergeTable = bpe_detail::MergeTable;
  using AddedMatcher = bpe_detail::AddedMatcher;
  using PieceCache = bpe_detail::PieceCache;
  using Pcre2Deleter = bpe_detail::Pcre2Deleter;
  using MatchData = bpe_detail::MatchData;

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

}  // namespace cosmos
