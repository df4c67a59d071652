// A chat session on one backend: it owns one KV-cache sequence and keeps it between turns, so the
// next turn prefills only the tokens the cache does not already hold (prefix reuse); an edited or
// regenerated earlier message truncates the cache to the common prefix.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cosmos/backend.h"
#include "cosmos/chat_format.h"
#include "cosmos/sampler.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

enum class StopReason { none, eos, stop_string, max_tokens, cancelled, context_full };
const char* to_string(StopReason reason);

struct GenerationStats {
  int prompt_tokens = 0;          // the whole prompt (conversation so far)
  int reused_tokens = 0;          // prompt tokens whose KV came from the cache
  int generated_tokens = 0;
  double ttft_s = 0;              // request start to first generated token
  double prefill_tok_per_s = 0;   // (prompt - reused) tokens / prefill time
  double decode_tok_per_s = 0;    // tokens after the first / their time
  StopReason stop = StopReason::none;
};

struct GenerateOptions {
  SamplingParams sampling;
  int max_new_tokens = 4096;
  std::vector<std::string> stop_strings;
  // Empty: the tokenizer's <|im_end|> and <|endoftext|>.
  std::vector<TokenId> stop_tokens;
  int prefill_chunk = 512;        // tokens per forward pass while prefilling
};

struct GenerationResult {
  std::string text;               // the reply (stop token / stop string not included)
  std::vector<TokenId> token_ids; // generated ids, the stop token included when one ended it
  GenerationStats stats;
};

// Receives each new piece of reply text (valid UTF-8; may be empty, e.g. during prefill) with the
// statistics so far. Returning false cancels: the result then has stop reason `cancelled`.
using StreamCallback = std::function<bool(std::string_view piece, const GenerationStats& stats)>;

class Session {
 public:
  Session(Backend& backend, const Tokenizer& tokenizer);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Continues `prompt` (all ids of the conversation so far). Errors: "context.overflow"
  // (bad_input) when the prompt does not fit the context; sampling parameter errors; backend errors.
  Result<GenerationResult> generate(std::span<const TokenId> prompt, const GenerateOptions& options,
                                    const StreamCallback& on_piece = {});
  // Renders the messages in the chat format (with the generation prompt) and generates.
  Result<GenerationResult> chat(std::span<const ChatMessage> messages, const GenerateOptions& options,
                                const StreamCallback& on_piece = {});

  // Tokens whose keys and values are in the cache now.
  std::span<const TokenId> cached_tokens() const { return cached_; }
  // The longest prompt + reply this session can hold.
  int context_limit() const;
  // Forgets the cache (next turn prefills everything).
  void reset();

 private:
  Status prefill(std::span<const TokenId> tokens, int chunk, const SamplingParams* device_sampling,
                 std::span<const TokenId> history, ForwardOutput& out, GenerationStats& stats,
                 const StreamCallback& on_piece, bool& cancelled);

  Backend& backend_;
  const Tokenizer& tokenizer_;
  SeqId seq_ = -1;
  std::vector<TokenId> cached_;
};

}  // namespace cosmos
