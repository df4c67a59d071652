#include "cosmos/batch_scheduler.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "cosmos/sampler.h"
#include "cosmos/stop_strings.h"
#include "cosmos/streaming_decoder.h"

namespace cosmos {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

struct BatchScheduler::Request {
  int index = 0;
  Request(std::vector<TokenId> p, GenerateOptions o)
      : prompt(std::move(p)), options(std::move(o)),
        result(make_error(ErrorCategory::internal, "batch.pending", "the request has not finished")) {}
  std::vector<TokenId> prompt;
  GenerateOptions options;
  std::vector<TokenId> stops;
  Clock::time_point submitted = Clock::now();
  // The run's state, reset when the request is preempted.
  SeqId seq = -1;
  int prefilled = 0;             // prompt tokens in the cache
  TokenId next = -1;             // sampled and not yet in the cache
  std::vector<TokenId> history;  // prompt + reply: the repetition penalty's ids
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamingDecoder> decoder;
  std::unique_ptr<StopStringFilter> stop_filter;
  GenerationResult out;
  Clock::time_point admitted, first;
  bool done = false;
  Result<GenerationResult> result;
};

BatchScheduler::BatchScheduler(Backend& backend, const Tokenizer& tokenizer, BatchSchedulerOptions options)
    : backend_(backend), tokenizer_(tokenizer), options_(options) {
  options_.max_batch = std::max(1, options_.max_batch);
  options_.step_tokens = std::max(1, options_.step_tokens);
  for (const char* s : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = tokenizer_.token_id(s)) default_stops_.push_back(*id);
}

BatchScheduler::~BatchScheduler() {
  for (auto& r : requests_)
    if (r->seq >= 0) backend_.kv_cache().free_sequence(r->seq);
}

int BatchScheduler::submit(std::vector<TokenId> prompt, GenerateOptions options) {
  const int id = static_cast<int>(requests_.size());
  requests_.push_back(std::make_unique<Request>(std::move(prompt), std::move(options)));
  Request& r = *requests_.back();
  r.index = id;
  r.stops = r.options.stop_tokens.empty() ? default_stops_ : r.options.stop_tokens;
  if (auto st = validate(r.options.sampling); !st) {
    fail(r, st.error());
  } else if (r.prompt.empty()) {
    fail(r, make_error(ErrorCategory::bad_input, "batch.prompt", "the prompt is empty"));
  } else {
    waiting_.push_back(id);
  }
  return id;
}

int BatchScheduler::blocks_for(int tokens) const {
  const int bs = backend_.kv_cache().shape().block_size;
  return (tokens + bs - 1) / bs;
}

void BatchScheduler::notify(const Request& r, BatchEvent::Kind kind, std::string_view text) {
  if (!listener_ || (kind == BatchEvent::Kind::text && text.empty())) return;
  BatchEvent e;
  e.request = r.index;
  e.kind = kind;
  e.text = text;
  listener_(e);
}

void BatchScheduler::fail(Request& r, Error error) {
  r.result = std::move(error);
  r.done = true;
  ++finished_;
  notify(r, BatchEvent::Kind::finished);
}

void BatchScheduler::cancel(int request) {
  Request& r = *requests_.at(request);
  if (r.done) return;
  if (r.seq >= 0) return finish(r, StopReason::cancelled);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), request), waiting_.end());
  r.out = GenerationResult{};
  r.out.stats.prompt_tokens = static_cast<int>(r.prompt.size());
  r.out.stats.stop = StopReason::cancelled;
  r.result = std::move(r.out);
  r.done = true;
  ++finished_;
  notify(r, BatchEvent::Kind::finished);
}

Status BatchScheduler::admit() {
  KvCache& kv = backend_.kv_cache();
  const int limit = context_limit();
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_batch) {
    Request& r = *requests_[waiting_.front()];
    const int n = static_cast<int>(r.prompt.size());
    if (n >= limit) {
      waiting_.erase(waiting_.begin());
      fail(r, make_error(ErrorCategory::bad_input, "context.overflow",
                         "the prompt has " + std::to_string(n) + " tokens; the context holds " + std::to_string(limit) +
                             " (prompt and reply together)"));
      continue;
    }
    // A prompt that begins like a running request's shares that request's whole cached blocks of
    // it; while such a request is still prefilling the common part, this one waits for it.
    const Share share = find_share(r);
    if (share.wait) break;
    const int need = blocks_for(n) - share.blocks + static_cast<int>(running_.size());  // a block of headroom per running reply
    if (need > kv.free_blocks()) {
      if (!running_.empty()) break;  // waits for running requests to finish
      waiting_.erase(waiting_.begin());
      fail(r, make_error(ErrorCategory::out_of_memory, "batch.kv_cache",
                         "the prompt needs " + std::to_string(blocks_for(n)) + " KV-cache blocks and " +
                             std::to_string(kv.free_blocks()) + " are free"));
      continue;
    }
    r.seq = share.blocks > 0 ? kv.fork_sequence(share.seq, share.blocks) : kv.create_sequence();
    r.prefilled = share.blocks * kv.shape().block_size;
    r.out = GenerationResult{};
    r.out.stats.reused_tokens = r.prefilled;
    r.next = -1;
    r.history = r.prompt;
    r.sampler = std::make_unique<Sampler>(r.options.sampling);
    r.decoder = std::make_unique<StreamingDecoder>(tokenizer_);
    r.stop_filter = std::make_unique<StopStringFilter>(r.options.stop_strings);
    r.out.stats.prompt_tokens = n;
    r.admitted = Clock::now();
    running_.push_back(waiting_.front());
    waiting_.erase(waiting_.begin());
  }
  return ok_status();
}

BatchScheduler::Share BatchScheduler::find_share(const Request& r) const {
  Share best;
  const int bs = backend_.kv_cache().shape().block_size;
  const int n = static_cast<int>(r.prompt.size());
  for (const int id : running_) {
    const Request& d = *requests_[id];
    const auto m = std::mismatch(r.prompt.begin(), r.prompt.end(), d.prompt.begin(), d.prompt.end());
    // Whole blocks only, and never the last prompt token (its logits start the reply).
    const int common = std::min(static_cast<int>(m.first - r.prompt.begin()), n - 1);
    const int now = std::min(common, d.prefilled) / bs, later = common / bs;
    if (now > best.blocks) {
      best.blocks = now;
      best.seq = d.seq;
    }
    // Waiting costs this request a step: worth it for two blocks or more (a chat template's
    // common first block alone is not).
    best.wait |= later - now >= 2 && d.next < 0 && d.prefilled < static_cast<int>(d.prompt.size());
  }
  if (best.wait) best.blocks = 0;
  return best;
}

int BatchScheduler::leave_running(const Request& r) {
  running_.erase(std::find(running_.begin(), running_.end(), r.index));
  return r.index;
}

int BatchScheduler::context_limit() const {
  const auto capacity = backend_.kv_cache().shape().tokens();
  return static_cast<int>(std::min<std::int64_t>(capacity, backend_.config().max_position_embeddings));
}

void BatchScheduler::preempt(Request& r) {
  backend_.kv_cache().free_sequence(r.seq);
  r.seq = -1;
  const int id = leave_running(r);
  waiting_.insert(waiting_.begin(), id);  // first in line again; restarts from the beginning
  generated_ -= r.out.stats.generated_tokens;
  ++preempted_;
  spdlog::debug("batch: request {} preempted after {} tokens (KV cache full); it restarts later", id,
                r.out.stats.generated_tokens);
  notify(r, BatchEvent::Kind::restarted);
}

void BatchScheduler::finish(Request& r, StopReason stop) {
  if (stop != StopReason::stop_string && stop != StopReason::cancelled) {
    std::string tail = r.stop_filter->push(r.decoder->flush());
    if (!r.stop_filter->stopped()) tail += r.stop_filter->flush();
    r.out.text += tail;
    notify(r, BatchEvent::Kind::text, tail);
  }
  r.out.stats.stop = stop;
  backend_.kv_cache().free_sequence(r.seq);
  r.seq = -1;
  leave_running(r);
  r.result = std::move(r.out);
  r.done = true;
  ++finished_;
  notify(r, BatchEvent::Kind::finished);
}

void BatchScheduler::take_token(Request& r, TokenId id) {
  GenerationStats& s = r.out.stats;
  const auto now = Clock::now();
  ++s.generated_tokens;
  ++generated_;
  if (s.generated_tokens == 1) {
    r.first = now;
    s.ttft_s = seconds(r.submitted, now);
    s.prefill_tok_per_s = s.prompt_tokens / std::max(seconds(r.admitted, now), 1e-9);
  } else {
    s.decode_tok_per_s = (s.generated_tokens - 1) / std::max(seconds(r.first, now), 1e-9);
  }
  r.out.token_ids.push_back(id);
  r.history.push_back(id);
  if (std::find(r.stops.begin(), r.stops.end(), id) != r.stops.end()) return finish(r, StopReason::eos);
  const std::string piece = r.stop_filter->push(r.decoder->push(id));
  r.out.text += piece;
  notify(r, BatchEvent::Kind::text, piece);
  if (r.stop_filter->stopped()) return finish(r, StopReason::stop_string);
  if (s.generated_tokens >= r.options.max_new_tokens) return finish(r, StopReason::max_tokens);
  if (backend_.kv_cache().length(r.seq) + 1 >= context_limit()) return finish(r, StopReason::context_full);
  r.next = id;
}

Result<bool> BatchScheduler::step() {
  if (auto st = admit(); !st) return st.error();
  if (running_.empty()) return !waiting_.empty();
  KvCache& kv = backend_.kv_cache();
  // The batch: every decoding request's next token, then prompt chunks within the step's budget.
  std::vector<SequenceInput> batch;
  std::vector<int> who;
  // Backends that sample on the device (CUDA) sample every sequence's last row there, with its own
  // parameters, history and draw counter, as a Session does; a sequence still in its prompt
  // ignores its id. Else each request samples its logits row on the host.
  const bool device = backend_.samples_on_device();
  while (true) {
    batch.clear();
    who.clear();
    int budget = options_.step_tokens, need = 0;
    for (const int id : running_) {
      Request& r = *requests_[id];
      SequenceInput in;
      in.seq = r.seq;
      if (r.next >= 0) {
        in.tokens = {r.next};
        --budget;
      } else {
        const int n = std::min<int>(static_cast<int>(r.prompt.size()) - r.prefilled, std::max(budget, 0));
        if (n <= 0) continue;
        in.tokens.assign(r.prompt.begin() + r.prefilled, r.prompt.begin() + r.prefilled + n);
        budget -= n;
      }
      if (device) {
        in.sampling = &r.options.sampling;
        in.history = r.history;
        in.sample_step = static_cast<std::uint64_t>(r.out.stats.generated_tokens);
      }
      const int len = kv.length(r.seq);
      need += blocks_for(len + static_cast<int>(in.tokens.size())) - static_cast<int>(kv.block_table(r.seq).size());
      batch.push_back(std::move(in));
      who.push_back(id);
    }
    if (need <= kv.free_blocks()) break;
    // Not enough blocks for this step: the most recently admitted request gives its blocks back.
    Request& newest = *requests_[running_.back()];
    if (running_.size() == 1) {
      finish(newest, StopReason::context_full);  // alone and the cache still cannot hold it
      return !waiting_.empty() || !running_.empty();
    }
    preempt(newest);
  }
  if (batch.empty()) return true;
  ForwardOutput& out = out_;
  if (auto st = backend_.forward(batch, out); !st) return st.error();
  std::vector<float>& logits = logits_;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Request& r = *requests_[who[i]];
    if (r.done) continue;  // cancelled by the listener during this loop
    if (r.next >= 0) {
      r.next = -1;
    } else {
      r.prefilled += static_cast<int>(batch[i].tokens.size());
      if (r.prefilled < static_cast<int>(r.prompt.size())) continue;
    }
    if (device) {
      take_token(r, out.sampled.at(i));
    } else {
      const auto row = out.row(out.first_row[i]);
      logits.assign(row.begin(), row.end());
      take_token(r, r.sampler->sample(logits, r.history));
    }
  }
  return finished_ < static_cast<int>(requests_.size());
}

Status BatchScheduler::run(const std::function<void(const BatchProgress&)>& on_step) {
  while (true) {
    auto more = step();
    if (!more) return more.error();
    if (on_step) on_step(progress());
    if (!*more) return ok_status();
  }
}

BatchProgress BatchScheduler::progress() const {
  BatchProgress p;
  p.total = static_cast<int>(requests_.size());
  p.finished = finished_;
  p.running = static_cast<int>(running_.size());
  p.waiting = static_cast<int>(waiting_.size());
  p.generated_tokens = generated_;
  p.preempted = preempted_;
  return p;
}

bool BatchScheduler::finished(int request) const { return requests_.at(request)->done; }

const Result<GenerationResult>& BatchScheduler::result(int request) const { return requests_.at(request)->result; }

}  // namespace cosmos
