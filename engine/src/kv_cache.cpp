#include "cosmos/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace cosmos {

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape), refs_(static_cast<std::size_t>(std::max(shape.n_blocks, 0)), 0) {
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
    refs_[free_.back()] = 1;
    free_.pop_back();
  }
  return ok_status();
}

void KvCache::set_length(SeqId seq, int length) {
  assert(valid(seq));
  assert(length <= static_cast<int>(seqs_[seq].blocks.size()) * shape_.block_size);
  seqs_[seq].length = length;
}

void KvCache::release(int block) {
  if (--refs_[block] == 0) free_.push_back(block);
}

int KvCache::truncate(SeqId seq, int length) {
  if (!valid(seq)) return 0;
  Sequence& s = seqs_[seq];
  if (length < s.length) s.length = length;
  const int bs = shape_.block_size;
  if (s.length % bs != 0) {
    const std::size_t last = static_cast<std::size_t>(s.length / bs);  // the partly kept block
    if (last < s.blocks.size() && refs_[s.blocks[last]] > 1) s.length = static_cast<int>(last) * bs;
  }
  const std::size_t keep = (static_cast<std::size_t>(s.length) + bs - 1) / bs;
  while (s.blocks.size() > keep) {
    release(s.blocks.back());
    s.blocks.pop_back();
  }
  return s.length;
}

SeqId KvCache::fork_sequence(SeqId src, int blocks) {
  assert(valid(src));
  assert(blocks >= 0 && blocks * shape_.block_size <= seqs_[src].length);
  std::vector<int> shared(seqs_[src].blocks.begin(), seqs_[src].blocks.begin() + blocks);
  for (int b : shared) ++refs_[b];
  const SeqId seq = create_sequence();  // may reallocate seqs_
  seqs_[seq].blocks = std::move(shared);
  seqs_[seq].length = blocks * shape_.block_size;
  return seq;
}

std::span<const int> KvCache::block_table(SeqId seq) const {
  if (!valid(seq)) return {};
  return seqs_[seq].blocks;
}

}  // namespace cosmos
