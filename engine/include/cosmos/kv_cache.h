// Paged KV-cache bookkeeping: the cache is cut into fixed-size blocks of `block_size` token slots;
// each sequence has a block table (its blocks in order), so sequences of different lengths share
// one pool and a finished sequence returns its blocks at once. Sequences with a common prefix can
// share its whole blocks (fork_sequence: counted references, a block returns to the pool with its
// last reader). Backends own the storage:
//   K, V per layer: [n_blocks, block_size, n_kv_heads, head_dim]
// and find token t of sequence s at block table(s)[t / block_size], slot t % block_size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cosmos/error.h"

namespace cosmos {

struct KvCacheShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  int n_blocks = 0;     // pool size
  std::int64_t tokens() const { return static_cast<std::int64_t>(block_size) * n_blocks; }
};

using SeqId = int;

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }

  // A new, empty sequence.
  SeqId create_sequence();
  // Returns the sequence's blocks to the pool; the id becomes invalid.
  void free_sequence(SeqId seq);
  bool valid(SeqId seq) const;

  // Tokens currently stored for the sequence.
  int length(SeqId seq) const;
  // Makes room for `new_length` tokens (allocating blocks). Error "kv_cache.full" (out_of_memory)
  // when the pool has too few free blocks; the sequence is then unchanged.
  Status reserve(SeqId seq, int new_length);
  // Records that the first `length` tokens are valid (after a forward pass wrote them).
  void set_length(SeqId seq, int length);
  // Keeps the first `length` tokens and frees the blocks past them (prefix reuse, edits); returns
  // the length kept: `length` (or less when the sequence is shorter), except that part of a shared
  // block is never kept (it would be written again): the length then drops to that block's start.
  int truncate(SeqId seq, int length);
  // A new sequence that shares the first `blocks` whole blocks of `src` (which holds at least
  // blocks x block_size tokens): its length is blocks x block_size and their K/V are not copied.
  // Neither sequence writes those blocks again (a sequence writes only past its length).
  SeqId fork_sequence(SeqId src, int blocks);

  // Block ids of the sequence, in token order.
  std::span<const int> block_table(SeqId seq) const;
  int free_blocks() const { return static_cast<int>(free_.size()); }

 private:
  struct Sequence {
    bool live = false;
    int length = 0;
    std::vector<int> blocks;
  };
  KvCacheShape shape_;
  std::vector<int> free_;          // free block ids (stack)
  std::vector<int> refs_;          // [n_blocks] sequences holding each block
  void release(int block);
  std::vector<Sequence> seqs_;
};

}  // namespace cosmos
