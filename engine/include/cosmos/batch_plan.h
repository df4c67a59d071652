// How one forward pass's tokens map onto their sequences and the paged KV cache. Every backend
// plans a batch the same way: validate it, reserve cache blocks for all sequences (or none), and
// lay the tokens out in batch order with their cache slot, position and logits row.
#pragma once

#include <span>
#include <vector>

#include "cosmos/backend.h"

namespace cosmos {

struct PlannedToken {
  int seq_index = 0;      // index into the batch
  int cache_index = 0;    // position in its sequence's cache (it attends to 0..cache_index)
  int slot = 0;           // storage slot: block * block_size + offset
  Position3 position;     // M-RoPE position
  TokenId id = 0;         // token id, or -1 where an input embedding replaces it
  int embedding_row = -1; // row of the sequence's `embeddings`, or -1
};

struct BatchPlan {
  std::vector<PlannedToken> tokens;  // [N] in batch order
  std::vector<int> start;            // [n_seqs] cached tokens before this pass
  std::vector<int> logits_rows;      // [rows] token index of each logits row
  std::vector<int> first_row;        // [n_seqs] first logits row of each sequence
  int max_ctx = 0;                   // the longest context any token attends to
};

// Errors: "backend.sequence" / "backend.positions" / "backend.empty" (internal) for malformed
// input, "backend.token" (bad_input) for an id outside the vocabulary, "kv_cache.full". On error
// the cache is unchanged.
Result<BatchPlan> plan_batch(std::span<const SequenceInput> batch, KvCache& cache, int vocab_size);
// After the pass succeeded: the sequences now hold their new tokens.
void commit_batch(std::span<const SequenceInput> batch, const BatchPlan& plan, KvCache& cache);
// After the pass failed: gives back the blocks plan_batch reserved.
void rollback_batch(std::span<const SequenceInput> batch, const BatchPlan& plan, KvCache& cache);

}  // namespace cosmos
