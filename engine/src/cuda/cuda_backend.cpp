// CUDA backend: forward() — batch planning (shared with the CPU backend), one metadata upload per
// pass, decode steps replayed from captured CUDA graphs, logits or device-sampled ids back. A
// one-token step that samples on the device may leave the next step running ahead on the GPU
// (cuda_decode_ahead.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

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
  own_decode_knobs();  // before a step runs ahead or is captured: another backend may have set its own
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

void CudaBackend::sync_streams() {
  for (cudaStream_t s : {stream_, up_stream_, ids_stream_})
    if (s) cudaStreamSynchronize(s);
}

// The buffers a pass reads besides the workspace: sampling parameters, sampled ids and history,
// and the metadata, each with two slots; grown (graphs dropped) when a batch needs more.
Status CudaBackend::ensure_pass_buffers(int n_seqs, std::size_t hist_total, std::size_t meta_total,
                                        const SampleMode& mode) {
  if (!step_done_[0]) {
    for (auto* events : {&step_done_, &pass_done_, &up_done_})
      for (cudaEvent_t& e : *events) CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_TRY(cudaStreamCreateWithFlags(&ids_stream_, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&up_stream_, cudaStreamNonBlocking));
  }
  const bool grow_sampling = mode.on && (n_seqs > sample_rows_ || !sparams_dev_[0]);
  const bool grow_hist = mode.on && (hist_total + 1 > hist_cap_ || !hist_);
  const bool grow_meta = meta_total > meta_ints_;
  if (!grow_sampling && !grow_hist && !grow_meta) return ok_status();
  sync_streams();
  drop_graphs();
  if (grow_sampling) {
    release(sparams_dev_[0]);
    release(sample_ws_);
    void* ids = out_ids_dev_[0];
    release(ids);
    if (sparams_host_) cudaFreeHost(sparams_host_);
    if (out_ids_host_) cudaFreeHost(out_ids_host_);
    sparams_dev_[0] = sparams_dev_[1] = sparams_ = nullptr;
    out_ids_dev_[0] = out_ids_dev_[1] = out_ids_ = nullptr;
    sparams_last_[0].clear();
    sparams_last_[1].clear();
    sparams_host_ = nullptr;
    out_ids_host_ = nullptr;
    sample_rows_ = 0;  // until every buffer below exists (a failed allocation is retried next time)
    int cap = 4;  // powers of two: a batch growing one sequence at a time reallocates (and drops graphs) rarely
    while (cap < n_seqs) cap *= 2;
    auto p = alloc(2 * cap * sizeof(kernels::SampleParams), "sampling parameters");
    if (!p) return p.error();
    sparams_dev_[0] = *p;
    sparams_dev_[1] = static_cast<kernels::SampleParams*>(*p) + cap;
    auto q = alloc(2 * cap * sizeof(std::int32_t), "sampled ids");
    if (!q) return q.error();
    out_ids_dev_[0] = static_cast<std::int32_t*>(*q);
    out_ids_dev_[1] = out_ids_dev_[0] + cap;
    sample_ws_bytes_ = kernels::sample_workspace_bytes(cap, config_.vocab_size);
    auto w = alloc(sample_ws_bytes_, "sampling workspace");
    if (!w) return w.error();
    sample_ws_ = *w;
    CUDA_TRY(kernels::sample_workspace_init(sample_ws_, cap, config_.vocab_size, stream_));
    CUDA_TRY(cudaHostAlloc(&sparams_host_, 2 * cap * sizeof(kernels::SampleParams), cudaHostAllocDefault));
    CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&out_ids_host_), 2 * cap * sizeof(std::int32_t),
                           cudaHostAllocDefault));
    sample_rows_ = cap;
  }
  if (grow_hist) {
    // One entry of slack: a one-token step's sampling appends its id for the step run ahead.
    void* h = hist_;
    release(h);
    hist_ = nullptr;
    hist_cap_ = 0;
    const std::size_t cap = std::max<std::size_t>(hist_total * 2, static_cast<std::size_t>(cache_.shape().tokens())) + 1;
    auto p = alloc(cap * sizeof(std::int32_t), "sampling history");
    if (!p) return p.error();
    hist_ = static_cast<std::int32_t*>(*p);
    hist_cap_ = cap;
  }
  if (grow_meta) {
    void* m = meta_dev_[0];
    release(m);
    meta_dev_[0] = meta_dev_[1] = meta_ = meta_next_ = nullptr;
    if (meta_host_) cudaFreeHost(meta_host_);
    meta_host_ = nullptr;
    meta_ints_ = 0;
    const std::size_t cap = std::max<std::size_t>(meta_total * 2, 1024);
    auto d = alloc(2 * cap * sizeof(std::int32_t), "batch metadata");
    if (!d) return d.error();
    meta_dev_[0] = static_cast<std::int32_t*>(*d);
    meta_dev_[1] = meta_dev_[0] + cap;
    CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&meta_host_), 2 * cap * sizeof(std::int32_t), cudaHostAllocDefault));
    meta_ints_ = cap;
  }
  return ok_status();
}

void CudaBackend::select_slot(int slot) {
  meta_ = meta_dev_[slot];
  meta_next_ = meta_dev_[slot ^ 1];
  sparams_ = sparams_dev_[slot];
  out_ids_ = out_ids_dev_[slot];
}

void CudaBackend::choose_graphs() {
  graphs_enabled_ = true;
  if (const char* env = std::getenv("COSMOS_CUDA_GRAPHS"); env && std::string_view(env) == "0") {
    graphs_enabled_ = false;
    ahead_enabled_ = false;  // a step run ahead replays the next step's graph
    spdlog::info("cuda backend: decode steps launched kernel by kernel, no graph replay and no step run ahead "
                 "(COSMOS_CUDA_GRAPHS=0)");
  }
}

// Captures a decode step of n sequences (one new token each) reading slot `slot`'s buffers
// (nothing runs: the graph is recorded).
Status CudaBackend::capture_step(const SampleMode& mode, int slot, int n, const std::vector<int>& rows,
                                 const MetaOffsets& o) {
  select_slot(slot);
  cudaGraph_t graph = nullptr;
  CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const Status st = enqueue(n, rows, o, static_cast<int>(cache_.shape().tokens()), mode);
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!st) return st;
  if (end != cudaSuccess) return fail(cuda_error(end, "cudaStreamEndCapture", __FILE__, __LINE__));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) return fail(cuda_error(inst, "cudaGraphInstantiate", __FILE__, __LINE__));
  graphs_[graph_key(mode, slot, n, tier_)] = exec;
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
  // Long-context graphs (long_context_from() says from which context length; context_tier()).
  const int tier = N == 1 ? context_tier(max_ctx) : 0;
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
  const int next_slot = slot_ ^ 1;
  if (ahead && (N > ws_tokens_ || R > ws_rows_ || total > meta_ints_ || n_seqs > sample_rows_ || !sparams_dev_[0] ||
                (mode.any_penalty && (!hist_ || hist_total + 1 > hist_cap_)) ||
                graphs_.find(graph_key(mode, next_slot, 1, tier)) == graphs_.end()))
    return ok_status();
  if (auto st = ensure_workspace(N, R); !st) return st;
  if (auto st = ensure_pass_buffers(n_seqs, hist_total, total, mode); !st) return st;

  // This pass's slot: the other one may still feed the pass before it.
  slot_ = next_slot;
  const int slot = slot_;
  select_slot(slot);
  // The uploads go on up_stream_ once the slot's last pass has read its buffers (and its ids copy
  // has read out_ids_), so they overlap the pass before this one; this pass waits for them.
  CUDA_TRY(cudaStreamWaitEvent(up_stream_, pass_done_[slot], 0));
  CUDA_TRY(cudaStreamWaitEvent(up_stream_, step_done_[slot], 0));
  if (mode.on) {
    // Uploaded when they differ from the slot's last upload (greedy rows do not draw: their counter
    // is 0), so a run of greedy steps copies nothing here.
    auto* sp = static_cast<kernels::SampleParams*>(sparams_host_) + static_cast<std::size_t>(slot) * sample_rows_;
    std::vector<kernels::SampleParams>& last = sparams_last_[slot];
    bool same = last.size() == batch.size();
    for (std::size_t s = 0; s < batch.size(); ++s) {
      const SamplingParams& p = *batch[s].sampling;
      sp[s] = kernels::SampleParams{p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty, p.seed,
                                    p.greedy() ? 0 : batch[s].sample_step};
      const kernels::SampleParams& l = same ? last[s] : sp[s];
      same = same && l.temperature == sp[s].temperature && l.top_k == sp[s].top_k && l.top_p == sp[s].top_p &&
             l.min_p == sp[s].min_p && l.repetition_penalty == sp[s].repetition_penalty && l.seed == sp[s].seed &&
             l.step == sp[s].step;
    }
    if (!same) {
      CUDA_TRY(cudaMemcpyAsync(sparams_, sp, batch.size() * sizeof(kernels::SampleParams), cudaMemcpyHostToDevice,
                               up_stream_));
      last.assign(sp, sp + batch.size());
    }
  }

  // One upload of all the small int arrays, from the slot's pinned mirror. A step run ahead leaves
  // the ids out: the step before it wrote them there on the device (its sampled ids).
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
  o.n_tab = static_cast<int>(tables.size());
  std::int32_t* host = meta_host_ + static_cast<std::size_t>(slot) * meta_ints_;
  at = 0;
  for (const auto* v : {&ids, &pos, &slots, &table_off, &ctx, &sq_start, &sq_len, &sq_ctx0, &sq_toff, &hist_off, &tables}) {
    if (!v->empty()) std::memcpy(host + at, v->data(), v->size() * sizeof(std::int32_t));
    at += v->size();
  }
  const std::size_t skip = ahead ? o.pos : 0;
  CUDA_TRY(cudaMemcpyAsync(meta_ + skip, host + skip, (total - skip) * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                           up_stream_));
  CUDA_TRY(cudaEventRecord(up_done_[slot], up_stream_));
  CUDA_TRY(cudaStreamWaitEvent(stream_, up_done_[slot], 0));
  // A step run ahead has its history on the device already: the previous upload plus the ids its
  // predecessors' sampling appended. Other passes start with nothing running (stream_ order).
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
  long_context_ = tier > 0;
  tier_ = tier;
  if (graphs_enabled_ && N == n_seqs && N <= kMaxDecodeBatch && !has_embeddings && (N == 1 || !reference_math_)) {
    // Decode step (one new token per sequence): replay the captured graph for this batch size,
    // sampling mode and slot (capture it the first time). Attention reads the real lengths and
    // block tables from the metadata, so one graph serves every length.
    const int key = graph_key(mode, slot, N, tier);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      // Both slots' graphs at once, so the step run ahead behind this one finds its own.
      for (const int g : {slot ^ 1, slot})
        if (graphs_.find(graph_key(mode, g, N, tier)) == graphs_.end())
          if (auto st = capture_step(mode, g, N, rows, o); !st) return st;
      select_slot(slot);
      it = graphs_.find(key);
    }
    CUDA_TRY(cudaGraphLaunch(it->second, stream_));
  } else {
    if (auto st = enqueue(N, rows, o, max_ctx, mode); !st) return st;
    if (const std::string e = gemm_.take_tune_error(); !e.empty())
      spdlog::warn("cuda backend: GEMM autotuning skipped, cuBLASLt's first choice is used: {}", e);
    if (const std::string t = gemm_.take_tune_log(); !t.empty()) spdlog::info("cuda backend: GEMM tuning:\n{}", t);
    if (gemm_.tunings() != tunings_saved_) write_tune_cache();
  }
  CUDA_TRY(cudaEventRecord(pass_done_[slot], stream_));
  if (mode.on) {
    // The ids go back on a stream of their own: the next pass (the other slot) need not wait for
    // the copy; the next uploads into this slot do.
    CUDA_TRY(cudaStreamWaitEvent(ids_stream_, pass_done_[slot], 0));
    CUDA_TRY(cudaMemcpyAsync(out_ids_host_ + static_cast<std::size_t>(slot) * sample_rows_, out_ids_,
                             batch.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, ids_stream_));
    CUDA_TRY(cudaEventRecord(step_done_[slot], ids_stream_));
  }
  submitted = true;
  return ok_status();
}

}  // namespace cosmos
