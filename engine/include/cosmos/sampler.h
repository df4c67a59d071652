// Token sampling: turns one position's logits into the next token id, with the same processors, in
// the same order and with the same tie rules as Hugging Face transformers `generate`:
//   repetition penalty -> temperature -> top-k -> top-p -> min-p -> softmax -> multinomial draw.
// Greedy (temperature <= 0, HF do_sample=False) applies only the repetition penalty, then argmax.
//
// Differences from HF, all at edges where HF fails or is device dependent:
//   - The draw uses std::mt19937_64 (seeded; same seed + same inputs -> same tokens), not torch's
//     generator, so individual draws differ from torch.multinomial; the distribution is the same.
//   - NaN logits are treated as -inf (HF would fail in torch.multinomial).
//   - +inf logits (after the penalty): the draw is uniform over the +inf tokens (HF: NaN, fails).
//   - A temperature so small that max_logit / t overflows to inf acts as greedy (the t -> 0 limit).
//   - No usable logit (empty span, all -inf/NaN): sample() returns 0 and sets
//     last_sample_was_degenerate(); probabilities() is one-hot on id 0 (what the draw picks).
//   - History ids outside [0, vocab) are ignored by the repetition penalty (HF: index error).
//   - The top-p cumulative sum is accumulated in double (as torch does on the CPU; CUDA uses fp32),
//     and 1 - top_p is computed in double from top_p's shortest decimal form (0.9f -> 0.9), as Python
//     would from the user's 0.9, then rounded to fp32 as torch does for the comparison.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "cosmos/error.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

struct SamplingParams {
  float temperature = 1.0f;         // <= 0: greedy (argmax), like HF do_sample=False
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  std::uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0f; }
};

// Returns an Error (bad_input, code "sampling.params") naming the bad field: temperature < 0, NaN or
// infinite, top_k < 0, top_p not in (0,1], min_p not in [0,1], repetition_penalty <= 0, NaN or
// infinite.
Status validate(const SamplingParams& p);

// One token's kept candidates after all processors: the final distribution is weight / total.
struct SamplerCandidate {
  float logit = 0.0f;   // processed logit (after penalty and temperature)
  float weight = 0.0f;  // exp(logit - max_logit), unnormalized probability
  TokenId id = 0;
};

class Sampler {
 public:
  // Parameters that fail validate() are clamped (top_k < 0: off; top_p to [0,1]; min_p to [0,1];
  // a NaN temperature or a bad repetition penalty: off). Call validate() first to report them.
  explicit Sampler(const SamplingParams& p);

  // logits: [vocab] fp32 for one position (modified in place as scratch). history: the ids the
  // repetition penalty applies to (prompt + generated so far, HF semantics: each distinct id once).
  TokenId sample(std::span<float> logits, std::span<const TokenId> history);

  // The final distribution the draw uses (after penalty, temperature, top-k, top-p, min-p), for tests
  // and for showing probabilities: [vocab] fp32, summing to 1. Greedy: one-hot on the argmax.
  std::vector<float> probabilities(std::span<const float> logits,
                                   std::span<const TokenId> history) const;

  // Restarts the random sequence (the same seed gives the same draws again).
  void reseed(std::uint64_t seed);

  // True when the last sample() found no usable logit (see the header comment) and returned 0.
  bool last_sample_was_degenerate() const { return degenerate_; }

  const SamplingParams& params() const { return params_; }

 private:
  // Scratch reused across calls so sample() does not allocate in steady state.
  struct Scratch {
    std::vector<float> penalty_values;          // [history] logits gathered before the penalty
    std::vector<float> heap;                    // [top_k] top-k selection
    std::vector<float> weights;                 // [vocab] softmax weights for top-p pruning
    std::vector<SamplerCandidate> candidates;   // [<= vocab] kept tokens
  };
  // What the processors leave: either one token (greedy, overflow, degenerate) or candidates.
  struct Outcome {
    bool single = false;       // the distribution is one-hot on `token`
    bool degenerate = false;   // no usable logit; token is 0
    TokenId token = 0;
    double total = 0.0;        // sum of the candidates' weights (when !single)
  };

  Outcome process(std::span<float> logits, std::span<const TokenId> history, Scratch& s) const;

  SamplingParams params_;  // as given
  SamplingParams eff_;     // clamped, what process() uses
  float top_p_threshold_ = 0.0f;  // fp32(1 - top_p), the HF comparison value
  std::mt19937_64 rng_;
  Scratch scratch_;
  bool degenerate_ = false;
};

}  // namespace cosmos
