#include "cosmos/session.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "cosmos/stop_strings.h"
#include "cosmos/streaming_decoder.h"

namespace cosmos {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::eos: return "eos";
    case StopReason::stop_string: return "stop_string";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::cancelled: return "cancelled";
    case StopReason::context_full: return "context_full";
  }
  return "?";
}

Session::Session(Backend& backend, const Tokenizer& tokenizer) : backend_(backend), tokenizer_(tokenizer) {
  seq_ = backend_.kv_cache().create_sequence();
}

Session::~Session() { backend_.kv_cache().free_sequence(seq_); }

int Session::context_limit() const {
  const auto capacity = backend_.kv_cache().shape().tokens();
  return static_cast<int>(std::min<std::int64_t>(capacity, backend_.config().max_position_embeddings));
}

void Session::reset() {
  backend_.kv_cache().truncate(seq_, 0);
  cached_.clear();
}

Status Session::prefill(std::span<const TokenId> tokens, int chunk, const SamplingParams* device_sampling,
                        std::span<const TokenId> history, ForwardOutput& out, GenerationStats& stats,
                        const StreamCallback& on_piece, bool& cancelled) {
  for (std::size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const std::size_t end = std::min(tokens.size(), begin + static_cast<std::size_t>(chunk));
    SequenceInput in;
    in.seq = seq_;
    in.tokens.assign(tokens.begin() + begin, tokens.begin() + end);
    if (end == tokens.size()) {  // the last chunk's last token starts the reply
      in.sampling = device_sampling;
      in.history = history;
    }
    if (auto st = backend_.forward(std::span<const SequenceInput>(&in, 1), out); !st) return st;
    cached_.insert(cached_.end(), in.tokens.begin(), in.tokens.end());
    if (end < tokens.size() && on_piece && !on_piece({}, stats)) {
      cancelled = true;
      return ok_status();
    }
  }
  return ok_status();
}

Result<GenerationResult> Session::generate(std::span<const TokenId> prompt, const GenerateOptions& options,
                                           const StreamCallback& on_piece) {
  if (auto st = validate(options.sampling); !st) return st.error();
  if (prompt.empty()) return make_error(ErrorCategory::bad_input, "generate.empty", "the prompt is empty");
  const int limit = context_limit();
  if (static_cast<int>(prompt.size()) >= limit)
    return make_error(ErrorCategory::bad_input, "context.overflow",
                      "the conversation is " + std::to_string(prompt.size()) + " tokens but the context holds " +
                          std::to_string(limit) + " (prompt and reply together): start a new conversation, "
                          "shorten it, or raise the context length");
  const auto t_start = Clock::now();
  GenerationResult result;
  GenerationStats& stats = result.stats;
  stats.prompt_tokens = static_cast<int>(prompt.size());

  // Prefix reuse: keep the cached tokens shared with the prompt, but recompute at least the last
  // prompt token (its logits start the reply).
  std::size_t common = 0;
  while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) ++common;
  const std::size_t keep = std::min(common, prompt.size() - 1);
  const std::size_t kept = static_cast<std::size_t>(backend_.kv_cache().truncate(seq_, static_cast<int>(keep)));
  cached_.resize(kept);
  stats.reused_tokens = static_cast<int>(kept);

  // Backends that sample on the device return only the id (same processors as Sampler; the random
  // draws differ from the host's mt19937_64, greedy is identical).
  const SamplingParams* device_sampling = backend_.samples_on_device() ? &options.sampling : nullptr;
  std::vector<TokenId> history(prompt.begin(), prompt.end());  // for the repetition penalty
  ForwardOutput out;
  bool cancelled = false;
  const int chunk = std::max(1, options.prefill_chunk);
  if (auto st = prefill(prompt.subspan(kept), chunk, device_sampling, history, out, stats, on_piece, cancelled); !st)
    return st.error();
  const double prefill_s = seconds_since(t_start);
  stats.prefill_tok_per_s = static_cast<double>(prompt.size() - kept) / std::max(prefill_s, 1e-9);
  if (cancelled) {
    stats.stop = StopReason::cancelled;
    return result;
  }

  std::vector<TokenId> stop_tokens = options.stop_tokens;
  if (stop_tokens.empty())
    for (const char* s : {"<|im_end|>", "<|endoftext|>"})
      if (auto id = tokenizer_.token_id(s)) stop_tokens.push_back(*id);

  Sampler sampler(options.sampling);
  StreamingDecoder decoder(tokenizer_);
  StopStringFilter stops(options.stop_strings);
  std::vector<float> logits;                                   // [vocab] fp32 scratch
  Clock::time_point t_first{};

  auto emit = [&](const std::string& piece) {
    result.text += piece;
    return !on_piece || on_piece(piece, stats);
  };

  while (true) {
    TokenId id = 0;
    if (device_sampling) {
      id = out.sampled.at(0);
    } else {
      const auto row = out.row(static_cast<int>(out.logits.size() / out.vocab) - 1);  // last prompt/reply token
      logits.assign(row.begin(), row.end());
      id = sampler.sample(logits, history);
    }
    ++stats.generated_tokens;
    if (stats.generated_tokens == 1) {
      t_first = Clock::now();
      stats.ttft_s = seconds_since(t_start);
    } else {
      stats.decode_tok_per_s = (stats.generated_tokens - 1) / std::max(seconds_since(t_first), 1e-9);
    }
    result.token_ids.push_back(id);
    history.push_back(id);
    if (std::find(stop_tokens.begin(), stop_tokens.end(), id) != stop_tokens.end()) {
      stats.stop = StopReason::eos;
      break;
    }
    const std::string text = stops.push(decoder.push(id));
    if (stops.stopped()) {
      stats.stop = StopReason::stop_string;
      emit(text);
      break;
    }
    if (!emit(text)) {
      stats.stop = StopReason::cancelled;
      break;
    }
    if (stats.generated_tokens >= options.max_new_tokens) {
      stats.stop = StopReason::max_tokens;
      break;
    }
    if (static_cast<int>(cached_.size()) + 1 >= limit) {
      stats.stop = StopReason::context_full;
      break;
    }
    SequenceInput in;
    in.seq = seq_;
    in.tokens = {id};
    in.sampling = device_sampling;
    in.history = history;
    in.sample_step = static_cast<std::uint64_t>(stats.generated_tokens);
    if (auto st = backend_.forward(std::span<const SequenceInput>(&in, 1), out); !st) return st.error();
    cached_.push_back(id);
  }
  if (stats.stop != StopReason::stop_string && stats.stop != StopReason::cancelled) {
    std::string tail = stops.push(decoder.flush());
    if (!stops.stopped()) tail += stops.flush();
    if (!tail.empty()) emit(tail);
  }
  spdlog::debug("generate: {} prompt ({} reused), {} generated, ttft {:.3f}s, {:.1f} tok/s, stop {}",
                stats.prompt_tokens, stats.reused_tokens, stats.generated_tokens, stats.ttft_s,
                stats.decode_tok_per_s, to_string(stats.stop));
  return result;
}

Result<GenerationResult> Session::chat(std::span<const ChatMessage> messages, const GenerateOptions& options,
                                       const StreamCallback& on_piece) {
  const std::vector<TokenId> ids = chat_token_ids(tokenizer_, messages, ChatFormatOptions{});
  return generate(ids, options, on_piece);
}

}  // namespace cosmos
