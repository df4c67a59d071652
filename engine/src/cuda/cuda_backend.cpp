// CUDA backend: forward() — batch planning (shared with the CPU backend), one metadata upload per
// pass, decode steps replayed from captured CUDA graphs, logits or device-sampled ids back. A
// one-token step that samples on the device may leave the next step running ahead on the GPU
// (cuda_decode_ahead.cpp).
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "cosmos/batch_plan.h"
#include "cuda/cuda_backend_impl.h"
#include "kernels/sampling.cuh"

namespace cosmos {

void CudaBackend::drop_graphs() {
  for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
}

Result<CudaBackend::SampleMode> CudaBackend::sample_mode(std::span<const SequenceInput> batch) {
  SampleMode mode;
  mode.on = !batch.empty() && batch[0].sampling != nullptr;
  for (const SequenceInput& in : batch) {
    if ((in.sampling != nullptr) != mode.on)
      return make_error(ErrorCategory::bad_input, "backend.sampling",
                        "device sampling must be asked for every sequence of a batch or for none");
    if (in.sampling && in.all_logits)
      return make_error(ErrorCategory::bad_input, "backend.sampling", "device sampling needs all_logits off");
  }
  if (mode.on) {
    mode.all_greedy = true;
    for (const SequenceInput& in : batch) {
      const SamplingParams& p = *in.sampling;
      mode.any_penalty |= p.repetition_penalty != 1.0f;
      mode.all_greedy &= p.greedy();
      mode.any_top_k |= !p.greedy() && p.top_k > 0;
      mode.any_top_p |= !p.greedy() && p.top_p < 1.0f;
      mode.need_sort = mode.any_top_k || mode.any_top_p;
    }
  }
  return mode;
}

Status CudaBackend::forward(std::span<const SequenceInput> batch, ForwardOutput& out) {
  if (!failed_.empty())
    return make_error(ErrorCategory::internal, "backend.failed", "the GPU backend stopped after an error: " + failed_);
  if (ahead_.active) {
    if (ahead_matches(batch)) return collect_ahead(batch, out);
    if (auto st = cancel_ahead(); !st) return st;
  }
  auto mode = sample_mode(batch);
  if (!mode) return mode.error();
  auto planned = plan_batch(batch, cache_, config_.vocab_size);
  if (!planned) return planned.error();
  const BatchPlan& plan = *planned;
  // Any failure from here on gives the reserved cache blocks back.
  struct Rollback {
    std::span<const SequenceInput> batch;
    const BatchPlan& plan;
    KvCache& cache;
    bool armed = true;
    ~Rollback() {
      if (armed) rollback_batch(batch, plan, cache);
    }
  } rollback{batch, plan, cache_};
  bool submitted = false;
  if (auto st = submit(batch, plan, *mode, false, submitted); !st) return st;
  out.ran_ahead = false;
  out.first_row = plan.first_row;
  out.vocab = config_.vocab_size;
  if (!mode->on) {
    out.sampled.clear();
    out.logits.resize(plan.logits_rows.size() * static_cast<std::size_t>(config_.vocab_size));
    CUDA_TRY(cudaMemcpyAsync(out.logits.data(), logits_, out.logits.size() * sizeof(float), cudaMemcpyDeviceToHost,
                             stream_));
    CUDA_TRY(cudaStreamSynchronize(stream_));
    rollback.armed = false;
    commit_batch(batch, plan, cache_);
    return ok_status();
  }
  // The lengths advance before the next step is planned behind this one; a failure while waiting
  // moves the backend to its failed state, and the lengths go back.
  rollback.armed = false;
  commit_batch(batch, plan, cache_);
  const int slot = slot_;
  if (auto st = start_ahead(batch, *mode); !st) {
    rollback_batch(batch, plan, cache_);
    return st;
  }
  if (auto st = take_sampled(slot, batch.size(), out); !st) {
    rollback_batch(batch, plan, cache_);
    return st;
  }
  return ok_status();
}

Status CudaBackend::take_sampled(int slot, std::size_t n_seqs, ForwardOutput& out) {
  CUDA_TRY(cudaEventSynchronize(step_done_[slot]));
  const std::int32_t* ids = out_ids_host_ + static_cast<std::size_t>(slot) * sample_rows_;
  out.logits.clear();
  out.sampled.assign(ids, ids + n_seqs);
  if (ahead_.active) {
    ahead_.token = out.sampled[0];
    if (ahead_.penalty) ahead_.history.back() = out.sampled[0];
  }
  return ok_status();
}

Status CudaBackend::submit(std::span<const SequenceInput> batch, const BatchPlan& plan, const SampleMode& mode,
                           bool ahead, bool& submitted) {
  submitted = false;
  const ModelConfig& c = config_;
  const int H = c.hidden_size;
  // Flat per-token arrays for the kernels: id, position, slot, table offset, context length; each
  // sequence's block table; per sequence: first token row, new tokens, cached tokens, table offset.
  std::vector<std::int32_t> ids, pos, slots, table_off, ctx, tables, sq_start, sq_len, sq_ctx0, sq_toff, hist_off;
  std::vector<int> table_start(batch.size());
  for (std::size_t s = 0; s < batch.size(); ++s) {
    table_start[s] = static_cast<int>(tables.size());
    const auto table = cache_.block_table(batch[s].seq);
    tables.insert(tables.end(), table.begin(), table.end());
  }
  sq_start.assign(batch.size(), 0);
  sq_len.assign(batch.size(), 0);
  sq_ctx0.assign(batch.size(), 0);
  for (std::size_t t = 0; t < plan.tokens.size(); ++t) {
    const PlannedToken& tk = plan.tokens[t];
    if (sq_len[tk.seq_index]++ == 0) {
      sq_start[tk.seq_index] = static_cast<int>(t);
      sq_ctx0[tk.seq_index] = tk.cache_index;
    }
    ids.push_back(tk.id);
    pos.insert(pos.end(), {tk.position.t, tk.position.h, tk.position.w});
    slots.push_back(tk.slot);
    table_off.push_back(table_start[tk.seq_index]);
    ctx.push_back(tk.cache_index + 1);
  }
  for (std::size_t s = 0; s < batch.size(); ++s) sq_toff.push_back(table_start[s]);
  const std::vector<int>& rows = plan.logits_rows;
  const int max_ctx = plan.max_ctx;
  const int N = static_cast<int>(ids.size()), R = static_cast<int>(rows.size());
  const int n_seqs = static_cast<int>(batch.size());
  std::size_t hist_total = 0;
  if (mode.on) {
    hist_off.push_back(0);
    for (const SequenceInput& in : batch) {
      if (mode.any_penalty) hist_total += in.history.size();
      hist_off.push_back(static_cast<std::int32_t>(hist_total));
    }
  }
  std::size_t total = 0;
  for (const auto* v : {&ids, &pos, &slots, &table_off, &ctx, &sq_start, &sq_len, &sq_ctx0, &sq_toff, &hist_off, &tables})
    total += v->size();
  // A step run ahead uses the buffers as they are (the step before it is still running on them).
  if (ahead && (N > ws_tokens_ || R > ws_rows_ || total > meta_ints_ || n_seqs > sample_rows_ || !sparams_ ||
                (mode.any_penalty && (!hist_ || hist_total + 1 > hist_cap_)) ||
                graphs_.find(mode.key()) == graphs_.end()))
    return ok_status();
  if (auto st = ensure_workspace(N, R); !st) return st;

  // Sampling inputs: parameters per sequence, and the penalty history when a penalty is on.
  if (mode.on) {
    if (n_seqs > sample_rows_ || !sparams_) {
      drop_graphs();
      release(sparams_);
      release(sample_ws_);
      if (out_ids_) {
        void* p = out_ids_;
        release(p);
        out_ids_ = nullptr;
      }
      if (sparams_host_) cudaFreeHost(sparams_host_);
      if (out_ids_host_) cudaFreeHost(out_ids_host_);
      sparams_last_.clear();
      sparams_host_ = nullptr;
      out_ids_host_ = nullptr;
      const int cap = std::max(n_seqs, 4);
      auto p = alloc(cap * sizeof(kernels::SampleParams), "sampling parameters");
      if (!p) return p.error();
      sparams_ = *p;
      auto q = alloc(cap * sizeof(std::int32_t), "sampled ids");
      if (!q) return q.error();
      out_ids_ = static_cast<std::int32_t*>(*q);
      sample_ws_bytes_ = kernels::sample_workspace_bytes(cap, c.vocab_size);
      auto w = alloc(sample_ws_bytes_, "sampling workspace");
      if (!w) return w.error();
      sample_ws_ = *w;
      // Two host slots each: a step's, and the one run ahead of it.
      CUDA_TRY(cudaHostAlloc(&sparams_host_, 2 * cap * sizeof(kernels::SampleParams), cudaHostAllocDefault));
      CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&out_ids_host_), 2 * cap * sizeof(std::int32_t),
                             cudaHostAllocDefault));
      sample_rows_ = cap;
    }
    // One entry of slack: a one-token step's sampling appends its id for the step run ahead.
    if (hist_total + 1 > hist_cap_ || !hist_) {
      drop_graphs();
      if (hist_) {
        void* p = hist_;
        release(p);
        hist_ = nullptr;
      }
      const std::size_t cap =
          std::max<std::size_t>(hist_total * 2, static_cast<std::size_t>(cache_.shape().tokens())) + 1;
      auto p = alloc(cap * sizeof(std::int32_t), "sampling history");
      if (!p) return p.error();
      hist_ = static_cast<std::int32_t*>(*p);
      hist_cap_ = cap;
    }
  }
  if (total > meta_ints_) {
    drop_graphs();
    void* p = meta_;
    release(p);
    meta_ = nullptr;
    if (meta_host_) cudaFreeHost(meta_host_);
    meta_host_ = nullptr;
    const std::size_t cap = std::max<std::size_t>(total * 2, 1024);
    auto d = alloc(cap * sizeof(std::int32_t), "batch metadata");
    if (!d) return d.error();
    meta_ = static_cast<std::int32_t*>(*d);
    CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&meta_host_), 2 * cap * sizeof(std::int32_t), cudaHostAllocDefault));
    meta_ints_ = cap;
  }
  if (!step_done_[0]) {
    for (cudaEvent_t& e : step_done_) CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (cudaEvent_t& e : pass_done_) CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_TRY(cudaStreamCreateWithFlags(&ids_stream_, cudaStreamNonBlocking));
  }

  // This step's host slot: the other one may still feed the step before it.
  slot_ ^= 1;
  const std::size_t slot = static_cast<std::size_t>(slot_);
  if (mode.on) {
    // Uploaded when they differ from the last upload (greedy rows do not draw: their counter is 0),
    // so a run of greedy steps copies nothing here.
    auto* sp = static_cast<kernels::SampleParams*>(sparams_host_) + slot * sample_rows_;
    bool same = sparams_last_.size() == batch.size();
    for (std::size_t s = 0; s < batch.size(); ++s) {
      const SamplingParams& p = *batch[s].sampling;
      sp[s] = kernels::SampleParams{p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty, p.seed,
                                    p.greedy() ? 0 : batch[s].sample_step};
      const kernels::SampleParams& l = same ? sparams_last_[s] : sp[s];
      same = same && l.temperature == sp[s].temperature && l.top_k == sp[s].top_k && l.top_p == sp[s].top_p &&
             l.min_p == sp[s].min_p && l.repetition_penalty == sp[s].repetition_penalty && l.seed == sp[s].seed &&
             l.step == sp[s].step;
    }
    if (!same) {
      CUDA_TRY(cudaMemcpyAsync(sparams_, sp, batch.size() * sizeof(kernels::SampleParams), cudaMemcpyHostToDevice,
                               stream_));
      sparams_last_.assign(sp, sp + batch.size());
    }
  }

  // One upload of all the small int arrays (and the history), from a pinned mirror. A step run
  // ahead leaves the ids out: the step before it wrote them there on the device (its sampled ids).
  MetaOffsets o;
  std::size_t at = 0;
  auto place = [&](const std::vector<std::int32_t>& v) {
    const std::size_t here = at;
    at += v.size();
    return here;
  };
  o.ids = place(ids);
  o.pos = place(pos);
  o.slots = place(slots);
  o.toff = place(table_off);
  o.ctx = place(ctx);
  o.seq_qstart = place(sq_start);
  o.seq_qlen = place(sq_len);
  o.seq_ctx0 = place(sq_ctx0);
  o.seq_toff = place(sq_toff);
  o.hist_off = place(hist_off);
  o.tab = place(tables);  // last: its length changes as sequences grow, the offsets before it do not
  o.n_seqs = n_seqs;
  std::int32_t* host = meta_host_ + slot * meta_ints_;
  at = 0;
  for (const auto* v : {&ids, &pos, &slots, &table_off, &ctx, &sq_start, &sq_len, &sq_ctx0, &sq_toff, &hist_off, &tables}) {
    if (!v->empty()) std::memcpy(host + at, v->data(), v->size() * sizeof(std::int32_t));
    at += v->size();
  }
  const std::size_t skip = ahead ? o.pos : 0;
  CUDA_TRY(cudaMemcpyAsync(meta_ + skip, host + skip, (total - skip) * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                           stream_));
  // A step run ahead has its history on the device already: the previous upload plus the ids its
  // predecessors' sampling appended.
  if (mode.on && mode.any_penalty && !ahead) {
    std::size_t h = 0;
    for (const SequenceInput& in : batch) {
      static_assert(sizeof(TokenId) == sizeof(std::int32_t));
      if (!in.history.empty())
        CUDA_TRY(cudaMemcpyAsync(hist_ + h, in.history.data(), in.history.size() * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice, stream_));
      h += in.history.size();
    }
  }

  pending_embeddings_.clear();
  for (std::size_t t = 0; t < plan.tokens.size(); ++t)
    if (plan.tokens[t].embedding_row >= 0)
      pending_embeddings_.emplace_back(static_cast<int>(t), batch[plan.tokens[t].seq_index].embeddings.data() +
                                                                static_cast<std::size_t>(plan.tokens[t].embedding_row) * H);
  const bool has_embeddings = !pending_embeddings_.empty();
  // The previous pass's ids copy (ids_stream_) must have read out_ids_ before this pass's sampling
  // writes it; it overlaps this pass's uploads above. (No effect before the event's first record.)
  CUDA_TRY(cudaStreamWaitEvent(stream_, step_done_[slot ^ 1], 0));
  if (N == 1 && !has_embeddings) {
    // Decode step: replay the captured graph for this sampling mode (capture it the first time).
    // Attention reads the real length from meta_, so one graph serves every length.
    auto it = graphs_.find(mode.key());
    if (it == graphs_.end()) {
      cudaGraph_t graph = nullptr;
      CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      const Status st = enqueue(1, rows, o, static_cast<int>(cache_.shape().tokens()), mode);
      const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
      if (!st) return st;
      if (end != cudaSuccess) return fail(cuda_error(end, "cudaStreamEndCapture", __FILE__, __LINE__));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      if (inst != cudaSuccess) return fail(cuda_error(inst, "cudaGraphInstantiate", __FILE__, __LINE__));
      it = graphs_.emplace(mode.key(), exec).first;
    }
    CUDA_TRY(cudaGraphLaunch(it->second, stream_));
  } else {
    if (auto st = enqueue(N, rows, o, max_ctx, mode); !st) return st;
    if (const std::string e = gemm_.take_tune_error(); !e.empty())
      spdlog::warn("cuda backend: GEMM autotuning skipped, cuBLASLt's first choice is used: {}", e);
    if (const std::string t = gemm_.take_tune_log(); !t.empty()) spdlog::info("cuda backend: GEMM tuning:\n{}", t);
    if (gemm_.tunings() != tunings_saved_) write_tune_cache();
  }
  if (mode.on) {
    // The ids go back on a stream of their own, so the next step's uploads (on stream_) need not
    // wait for the copy; its pass waits for it (above).
    CUDA_TRY(cudaEventRecord(pass_done_[slot], stream_));
    CUDA_TRY(cudaStreamWaitEvent(ids_stream_, pass_done_[slot], 0));
    CUDA_TRY(cudaMemcpyAsync(out_ids_host_ + slot * sample_rows_, out_ids_, batch.size() * sizeof(std::int32_t),
                             cudaMemcpyDeviceToHost, ids_stream_));
    CUDA_TRY(cudaEventRecord(step_done_[slot], ids_stream_));
  }
  submitted = true;
  return ok_status();
}

}  // namespace cosmos
