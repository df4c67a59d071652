// CUDA backend: the next decode step submitted before the current one has finished.
//
// After a one-token step that samples on the device, forward() submits the step that would follow
// it before waiting: same sequence, next position, same sampling parameters (draw counter + 1), its
// token id read on the device from this step's sample (kernels/sampling.cuh, next_ids). The GPU
// then goes from one step to the next without waiting for the host (the sampled id's copy back,
// the caller's bookkeeping, the next upload and graph launch: 20-30 us a step, docs/PERFORMANCE.md
// session 18). The next forward() call takes that step's result when its batch is exactly that
// step (ahead_matches), else it waits for the step and gives its cache reservation back
// (cancel_ahead): results never depend on whether a step ran ahead.
//
// Only single-sequence steps run ahead. With a repetition penalty, the step's sampling also appends
// its id to the history on the device (SampleArgs::history_append), and the caller's history must
// be the previous one plus that id. COSMOS_DECODE_AHEAD=0 turns it off. The step run ahead writes its K/V
// at the sequence's next cache slot, beyond the committed length, in a block it reserved; if the
// caller frees or truncates the sequence meanwhile, later writes to that block are ordered after
// it on the backend's one stream.
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "cosmos/batch_plan.h"
#include "cuda/cuda_backend_impl.h"

namespace cosmos {

void CudaBackend::choose_decode_ahead() {
  ahead_enabled_ = true;
  if (const char* env = std::getenv("COSMOS_DECODE_AHEAD"); env && std::string_view(env) == "0") {
    ahead_enabled_ = false;
    spdlog::info("cuda backend: decode steps one at a time (COSMOS_DECODE_AHEAD=0)");
  }
}

bool CudaBackend::ahead_matches(std::span<const SequenceInput> batch) const {
  if (batch.size() != 1) return false;
  const SequenceInput& in = batch[0];
  const SamplingParams* p = in.sampling;
  const SamplingParams& a = ahead_.sampling;
  return in.seq == ahead_.seq && in.tokens.size() == 1 && in.tokens[0] == ahead_.token && ahead_.token >= 0 &&
         in.embedding_rows.empty() && !in.all_logits && in.positions == ahead_.positions && p != nullptr &&
         p->temperature == a.temperature && p->top_k == a.top_k && p->top_p == a.top_p && p->min_p == a.min_p &&
         p->repetition_penalty == a.repetition_penalty && p->seed == a.seed &&
         (p->greedy() || in.sample_step == ahead_.sample_step) &&
         (!ahead_.penalty || std::equal(in.history.begin(), in.history.end(), ahead_.history.begin(),
                                        ahead_.history.end())) &&
         cache_.valid(in.seq) && cache_.length(in.seq) == ahead_.start && slot_still_reserved();
}

// The cache slot the step wrote its K/V to is still the sequence's next one: a truncation to the
// same length gives back the block reserved for it, and a later reservation may take another.
bool CudaBackend::slot_still_reserved() const {
  const int bs = cache_.shape().block_size;
  const auto table = cache_.block_table(ahead_.seq);
  const std::size_t block = static_cast<std::size_t>(ahead_.start / bs);
  return block < table.size() && table[block] * bs + ahead_.start % bs == ahead_.kv_slot;
}

Status CudaBackend::start_ahead(std::span<const SequenceInput> batch, const SampleMode& mode) {
  if (!ahead_enabled_ || batch.size() != 1 || !mode.on) return ok_status();
  const SequenceInput& in = batch[0];
  if (in.tokens.size() != 1 || !in.embedding_rows.empty() || in.all_logits) return ok_status();
  ahead_.seq = in.seq;
  ahead_.start = cache_.length(in.seq);
  ahead_.positions.clear();
  if (!in.positions.empty()) {
    const Position3 p = in.positions[0];
    ahead_.positions.push_back({p.t + 1, p.h + 1, p.w + 1});
  }
  ahead_.sampling = *in.sampling;
  ahead_.sample_step = in.sample_step + 1;
  ahead_.token = -1;
  // With a repetition penalty the step's history is this one's plus the id (its last entry, set
  // when the id is known); the caller's must equal it.
  ahead_.penalty = mode.any_penalty;
  ahead_.history.clear();
  if (ahead_.penalty) {
    ahead_.history.assign(in.history.begin(), in.history.end());
    ahead_.history.push_back(0);
  }
  SequenceInput next;
  next.seq = in.seq;
  next.tokens = {0};  // placeholder: the step reads its id from the device
  next.positions = ahead_.positions;
  next.sampling = &ahead_.sampling;
  next.sample_step = ahead_.sample_step;
  next.history = ahead_.history;
  const std::span<const SequenceInput> one(&next, 1);
  auto planned = plan_batch(one, cache_, config_.vocab_size);
  if (!planned) return ok_status();  // e.g. the cache is full: the next step runs when asked for
  bool submitted = false;
  if (auto st = submit(one, *planned, mode, true, submitted); !st || !submitted) {
    rollback_batch(one, *planned, cache_);
    return st;
  }
  ahead_.slot = slot_;
  ahead_.kv_slot = planned->tokens[0].slot;
  ahead_.active = true;
  return ok_status();
}

Status CudaBackend::collect_ahead(std::span<const SequenceInput> batch, ForwardOutput& out) {
  const SequenceInput& in = batch[0];
  const int slot = ahead_.slot, start = ahead_.start;
  ahead_.active = false;
  cache_.set_length(in.seq, start + 1);
  out.ran_ahead = true;
  out.first_row = {0};
  out.vocab = config_.vocab_size;
  auto mode = sample_mode(batch);
  if (!mode) return mode.error();
  Status st = start_ahead(batch, *mode);
  if (st) st = take_sampled(slot, 1, out);
  if (!st) cache_.truncate(in.seq, start);
  return st;
}

Status CudaBackend::cancel_ahead() {
  ahead_.active = false;
  CUDA_TRY(cudaEventSynchronize(step_done_[ahead_.slot]));
  // Gives back the block the step reserved, unless the caller already changed the sequence.
  if (cache_.valid(ahead_.seq) && cache_.length(ahead_.seq) == ahead_.start) cache_.truncate(ahead_.seq, ahead_.start);
  return ok_status();
}

}  // namespace cosmos
