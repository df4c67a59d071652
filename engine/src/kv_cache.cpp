#include "cosmos/kv_cache.h"

#include <cassert>
#include <string>

namespace cosmos {

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  free_.reserve(shape.n_blocks);
  for (int b = shape.n_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out block 0 first
}

SeqId KvCache::create_sequence() {
  for (std::size_t i = 0; i < seqs_.size(); ++i)
    if (!seqs_[i].live) {
      seqs_[i] = Sequence{true, 0, {}};
      return static_cast<SeqId>(i);
    }
  seqs_.push_back(Sequence{true, 0, {}});
  return static_cast<SeqId>(seqs_.size() - 1);
}

bool KvCache::valid(SeqId seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < seqs_.size() && seqs_[seq].live;
}

void KvCache::free_sequence(SeqId seq) {
  if (!valid(seq)) return;
  truncate(seq, 0);
  seqs_[seq].live = false;
}

int KvCache::length(SeqId seq) const { return valid(seq) ? seqs_[seq].length : 0; }

Status KvCache::reserve(SeqId seq, int new_length) {
  assert(valid(seq));
  Sequence& s = seqs_[seq];
  const int needed = (new_length + shape_.block_size - 1) / shape_.block_size;
  const int extra = needed - static_cast<int>(s.blocks.size());
  if (extra <= 0) return ok_status();
  if (extra > free_blocks())
    return make_error(ErrorCategory::out_of_memory, "kv_cache.full",
                      "the KV cache is full: " + std::to_string(new_length) + " tokens need " +
                          std::to_string(needed) + " blocks of " + std::to_string(shape_.block_size) +
                          ", " + std::to_string(free_blocks() + s.blocks.size()) + " are available");
  for (int i = 0; i < extra; ++i) {
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return ok_status();
}

void KvCache::set_length(SeqId seq, int length) {
  assert(valid(seq));
  assert(length <= static_cast<int>(seqs_[seq].blocks.size()) * shape_.block_size);
  seqs_[seq].length = length;
}

void KvCache::truncate(SeqId seq, int length) {
  if (!valid(seq)) return;
  Sequence& s = seqs_[seq];
  if (length < s.length) s.length = length;
  const std::size_t keep = (static_cast<std::size_t>(s.length) + shape_.block_size - 1) / shape_.block_size;
  while (s.blocks.size() > keep) {
    free_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
}

std::span<const int> KvCache::block_table(SeqId seq) const {
  if (!valid(seq)) return {};
  return seqs_[seq].blocks;
}

}  // namespace cosmos
