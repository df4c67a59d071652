#include "cosmos/batch_plan.h"

#include <algorithm>
#include <string>

namespace cosmos {

Result<BatchPlan> plan_batch(std::span<const SequenceInput> batch, KvCache& cache, int vocab_size) {
  BatchPlan plan;
  plan.start.resize(batch.size());
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    if (!cache.valid(in.seq))
      return make_error(ErrorCategory::internal, "backend.sequence", "forward: unknown sequence " + std::to_string(in.seq));
    if (in.tokens.empty())
      return make_error(ErrorCategory::internal, "backend.empty", "forward: a sequence has no new tokens");
    if (!in.positions.empty() && in.positions.size() != in.tokens.size())
      return make_error(ErrorCategory::internal, "backend.positions", "forward: positions and tokens differ in length");
    if (!in.embedding_rows.empty() && in.embedding_rows.size() != in.tokens.size())
      return make_error(ErrorCategory::internal, "backend.embeddings", "forward: embedding rows and tokens differ in length");
    for (std::size_t i = 0; i < in.tokens.size(); ++i) {
      const bool embedded = !in.embedding_rows.empty() && in.embedding_rows[i] >= 0;
      if (!embedded && (in.tokens[i] < 0 || in.tokens[i] >= vocab_size))
        return make_error(ErrorCategory::bad_input, "backend.token",
                          "token id " + std::to_string(in.tokens[i]) + " is outside the vocabulary (0.." +
                              std::to_string(vocab_size - 1) + ")");
    }
    plan.start[s] = cache.length(in.seq);
  }
  // Reserve blocks for every sequence, or none.
  for (std::size_t s = 0; s < batch.size(); ++s) {
    if (auto st = cache.reserve(batch[s].seq, plan.start[s] + static_cast<int>(batch[s].tokens.size())); !st) {
      for (std::size_t r = 0; r <= s; ++r) cache.truncate(batch[r].seq, plan.start[r]);
      return st.error();
    }
  }
  const int bs = cache.shape().block_size;
  plan.first_row.resize(batch.size());
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    const auto table = cache.block_table(in.seq);
    const int n = static_cast<int>(in.tokens.size());
    plan.first_row[s] = static_cast<int>(plan.logits_rows.size());
    for (int i = 0; i < n; ++i) {
      PlannedToken t;
      t.seq_index = static_cast<int>(s);
      t.cache_index = plan.start[s] + i;
      t.slot = table[t.cache_index / bs] * bs + t.cache_index % bs;
      t.position = in.positions.empty() ? Position3::text(t.cache_index) : in.positions[i];
      t.embedding_row = in.embedding_rows.empty() ? -1 : in.embedding_rows[i];
      t.id = t.embedding_row >= 0 ? -1 : in.tokens[i];
      plan.max_ctx = std::max(plan.max_ctx, t.cache_index + 1);
      plan.tokens.push_back(t);
      if (in.all_logits || i == n - 1) plan.logits_rows.push_back(static_cast<int>(plan.tokens.size()) - 1);
    }
  }
  return plan;
}

void commit_batch(std::span<const SequenceInput> batch, const BatchPlan& plan, KvCache& cache) {
  for (std::size_t s = 0; s < batch.size(); ++s)
    cache.set_length(batch[s].seq, plan.start[s] + static_cast<int>(batch[s].tokens.size()));
}

void rollback_batch(std::span<const SequenceInput> batch, const BatchPlan& plan, KvCache& cache) {
  for (std::size_t s = 0; s < batch.size(); ++s) cache.truncate(batch[s].seq, plan.start[s]);
}

}  // namespace cosmos
