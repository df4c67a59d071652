// Continuous batching on one backend: many requests share its forward passes. Each step runs one
// forward over the running requests: one token for each that is decoding, plus chunks of the prompts
// still being prefilled, within a per-step token budget, so that a long new prompt does not stall
// the running decodes. Requests join at step boundaries (first come, first served, up to
// `max_batch` at once) and leave when they stop, freeing their KV-cache blocks for the next.
//
// Prompts that begin alike (the app's several answers to one question, a shared system prompt)
// share the KV blocks of the common part: a request whose prompt starts like a running request's
// forks that request's whole cached blocks (KvCache::fork_sequence) and prefills only the rest;
// while the running one is still prefilling the common part, the new one waits for it.
//
// Memory: a request is admitted when the free KV blocks cover its prompt plus one block for each
// running request; when a step then needs more blocks than are free (replies grow), the most
// recently admitted requests are preempted: their blocks freed and their work restarted later from
// the start, with the same seed, so their results do not change. A request whose prompt cannot fit
// the cache (or the model's positions) at all is refused with an error of its own; the others run.
//
// Results do not depend on batching: each request samples with its own Sampler (its seed, its
// history) from its own logits row, exactly as a Session would; with greedy sampling the tokens
// equal those of running the request alone (tests/unit/test_batch_scheduler.cpp, CPU backend).
// Backends that sample on the device (CUDA) do so for every sequence of a step, each with its own
// parameters, history and draw counter (the same draws a Session gets there); else each request
// samples its logits row on the host.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "cosmos/backend.h"
#include "cosmos/error.h"
#include "cosmos/session.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

struct BatchSchedulerOptions {
  int max_batch = 16;     // requests in the running batch at once
  int step_tokens = 512;  // tokens per forward pass (decodes first, then prompt chunks)
};

// What a request did in a step, for front ends that stream replies (the app's parallel answers).
struct BatchEvent {
  enum class Kind {
    text,       // `text` was appended to the reply
    restarted,  // preempted (KV cache full): the reply so far is void and starts again later
    finished,   // result(request) is ready (a reply, or why the request failed)
  };
  int request = 0;
  Kind kind = Kind::text;
  std::string_view text;  // Kind::text only
};

struct BatchProgress {
  int total = 0, finished = 0, running = 0, waiting = 0;
  long long generated_tokens = 0;  // over all requests so far
  int preempted = 0;               // restarts so far (memory)
};

class BatchScheduler {
 public:
  BatchScheduler(Backend& backend, const Tokenizer& tokenizer, BatchSchedulerOptions options = {});
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Queues a request (prompt ids, e.g. from chat_token_ids); returns its index (0, 1, ...). The
  // options' prefill_chunk is not used (the step budget chunks prompts); its sampling parameters
  // must pass validate() (else the request ends with that error).
  int submit(std::vector<TokenId> prompt, GenerateOptions options);

  // Runs one forward pass; false when every request has finished. A backend error fails the call
  // (the requests of that step keep their state; the caller may give up).
  Result<bool> step();
  // Steps until every request has finished; on_step (may be null) sees the progress after each.
  Status run(const std::function<void(const BatchProgress&)>& on_step = {});

  // Called from step() (same thread) as replies grow, restart and finish; may be null.
  void set_listener(std::function<void(const BatchEvent&)> listener) { listener_ = std::move(listener); }
  // Stops a request now: a running one keeps its reply so far (StopReason::cancelled), a waiting
  // one finishes with no reply. No effect on a finished request.
  void cancel(int request);

  BatchProgress progress() const;
  bool finished(int request) const;
  // The request's result once finished(): the reply (text, ids, stats), or why it was refused.
  const Result<GenerationResult>& result(int request) const;

 private:
  struct Request;
  // What a new request can share of the running requests' cached prompts (whole KV blocks).
  struct Share {
    SeqId seq = -1;     // the sequence to fork
    int blocks = 0;     // whole blocks of its prompt it can share now
    bool wait = false;  // a running request is still prefilling more of the common prefix
  };
  Share find_share(const Request& r) const;
  Status admit();
  Status make_room(int needed_blocks);
  void preempt(Request& r);
  void finish(Request& r, StopReason stop);
  void fail(Request& r, Error error);
  void take_token(Request& r, TokenId id);  // the request's next token: stops, text, stats
  int blocks_for(int tokens) const;
  int context_limit() const;                 // the longest prompt + reply (cache and positions)
  int leave_running(const Request& r);       // takes r out of running_; its index

  Backend& backend_;
  const Tokenizer& tokenizer_;
  BatchSchedulerOptions options_;
  std::vector<std::unique_ptr<Request>> requests_;
  std::vector<int> waiting_;  // request indices, in admission order
  std::vector<int> running_;  // request indices, oldest admission first
  int finished_ = 0, preempted_ = 0;
  long long generated_ = 0;
  std::vector<TokenId> default_stops_;
  std::function<void(const BatchEvent&)> listener_;
  ForwardOutput out_;          // the last step's output (buffers reused between steps)
  std::vector<float> logits_;  // [vocab] host sampling scratch
  void notify(const Request& r, BatchEvent::Kind kind, std::string_view text = {});
};

}  // namespace cosmos
