// Token sampling with Hugging Face `generate` semantics (see sampler.h for the differences).
//
// Cost for a 152064-token vocabulary: one pass for NaN/max, one for the temperature, one exp per
// token that survives top-k (all of them without top-k), and an expected-linear quickselect for the
// top-p boundary over only the tokens that can reach it (no sort of the vocabulary).
#include "cosmos/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

namespace cosmos {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

Error params_error(const char* field, const std::string& rule, double got) {
  char value[64];
  std::snprintf(value, sizeof value, "%g", got);
  return make_error(ErrorCategory::bad_input, "sampling.params",
                    std::string("sampling parameter ") + field + " " + rule + ", got " + value);
}

// fp32(1 - top_p) as HF compares it: Python computes 1 - top_p in double from the decimal the user
// wrote, torch rounds it to fp32. The shortest decimal that round-trips our float stands in for it.
float top_p_threshold(float top_p) {
  char buf[64];
  const auto printed = std::to_chars(buf, buf + sizeof buf, top_p);
  double decimal = static_cast<double>(top_p);
  if (printed.ec == std::errc()) std::from_chars(buf, printed.ptr, decimal);
  return static_cast<float>(1.0 - decimal);
}

// The k-th largest value of x (1 <= k < x.size()), duplicates counted, like torch.topk(x, k)[-1].
// scratch: [k] min-heap for small k, [vocab] copy for large k.
float kth_largest(std::span<const float> x, std::size_t k, std::vector<float>& scratch) {
  if (k <= 4096) {
    scratch.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(k));
    std::make_heap(scratch.begin(), scratch.end(), std::greater<>());
    for (std::size_t i = k; i < x.size(); ++i) {
      if (x[i] > scratch.front()) {
        std::pop_heap(scratch.begin(), scratch.end(), std::greater<>());
        scratch.back() = x[i];
        std::push_heap(scratch.begin(), scratch.end(), std::greater<>());
      }
    }
    return scratch.front();
  }
  scratch.assign(x.begin(), x.end());
  const auto nth = scratch.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(scratch.begin(), nth, scratch.end(), std::greater<>());
  return *nth;
}

double total_weight(std::span<const SamplerCandidate> c) {
  double total = 0.0;
  for (const SamplerCandidate& e : c) total += e.weight;
  return total;
}

// HF's top-p order: ascending logit, equal logits by ascending id (a stable sort of the vocab).
bool before(const SamplerCandidate& a, const SamplerCandidate& b) {
  return a.logit < b.logit || (a.logit == b.logit && a.id < b.id);
}

// TopPLogitsWarper: sort ascending (stable), cumulative softmax, remove the positions whose
// cumulative probability is <= threshold, never the last (top) one. The removed positions are a
// prefix of the sorted order, so instead of sorting, a quickselect finds where the prefix ends:
// expected O(n), and the kept tokens stay unsorted (the draw does not need an order).
// below: the probability already removed by build_top_p_candidates (0 when it did not run).
void apply_top_p(std::vector<SamplerCandidate>& cands, double& total, float threshold,
                 double below) {
  const std::size_t n = cands.size();
  if (n <= 1) {
    total = total_weight(cands);
    return;
  }
  const auto prob = [total](const SamplerCandidate& c) {  // fp32 softmax output, as in torch
    return static_cast<double>(static_cast<float>(c.weight / total));
  };
  // Invariant: [0, lo) precede [lo, n) in `before` order and are removed; their probabilities plus
  // the pruned ones sum to `below` (accumulated in double, as torch's CPU cumsum does). [hi, n) are
  // kept.
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    // Median of three as the pivot, moved to hi - 1.
    SamplerCandidate* a = &cands[lo];
    SamplerCandidate* m = &cands[lo + (hi - lo) / 2];
    SamplerCandidate* z = &cands[hi - 1];
    if (before(*m, *a)) std::swap(*m, *a);
    if (before(*z, *m)) std::swap(*z, *m);
    if (before(*m, *a)) std::swap(*m, *a);
    std::swap(*m, *z);
    const SamplerCandidate pivot = *z;
    const auto first = cands.begin() + static_cast<std::ptrdiff_t>(lo);
    const auto last = cands.begin() + static_cast<std::ptrdiff_t>(hi - 1);
    const auto split = std::partition(
        first, last, [&pivot](const SamplerCandidate& c) { return before(c, pivot); });
    std::iter_swap(split, last);
    double cum = below;
    for (auto it = first; it != split; ++it) cum += prob(*it);
    cum += prob(pivot);  // the cumulative probability at the pivot's sorted position
    const std::size_t p = static_cast<std::size_t>(split - cands.begin());
    if (static_cast<float>(cum) <= threshold) {
      below = cum;
      lo = p + 1;
    } else {
      hi = p;
    }
  }
  // Everything removed (threshold >= 1): keep the top one, which the last step left at n - 1.
  lo = std::min(lo, n - 1);
  cands.erase(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(lo));
  total = total_weight(cands);
}

// Candidates for top-p when top-k did not already shrink the vocabulary: all weights first (the
// softmax total), then only tokens with weight >= cut = threshold * total / n. Those below the cut
// hold less than `threshold` of the probability together and are the lowest in the ascending order,
// so HF removes every one of them: they never need to be selected. Returns their probability.
// weights: [vocab] fp32 scratch.
double build_top_p_candidates(std::span<const float> x, float max_logit, float threshold,
                              std::vector<float>& weights, std::vector<SamplerCandidate>& cands,
                              double& total) {
  weights.resize(x.size());
  total = 0.0;
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float w = std::exp(x[i] - max_logit);  // -inf -> 0
    weights[i] = w;
    total += w;
    nonzero += w > 0.0f;
  }
  const double cut = static_cast<double>(threshold) * total / static_cast<double>(nonzero);
  double below = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float w = weights[i];
      if (w == 0.0f) continue;
      if (w >= cut || pass == 1) {
        cands.push_back({x[i], w, static_cast<TokenId>(i)});
      } else {
        below += static_cast<float>(w / total);  // fp32 softmax output, as in torch
      }
    }
    if (static_cast<float>(below) <= threshold) break;
    cands.clear();  // rounding made the cut unsafe: take every token (second pass)
    below = 0.0;
  }
  return below;
}

// MinPLogitsWarper: probs = softmax; remove probs < min_p * max(probs). The top token (weight 1,
// as exp(max - max)) always stays, which is HF's min_tokens_to_keep = 1.
void apply_min_p(std::vector<SamplerCandidate>& cands, double& total, float min_p) {
  float max_weight = 0.0f;
  for (const SamplerCandidate& c : cands) max_weight = std::max(max_weight, c.weight);
  const float scaled = min_p * static_cast<float>(max_weight / total);  // fp32, as torch
  std::erase_if(cands, [&](const SamplerCandidate& c) {
    return static_cast<float>(c.weight / total) < scaled;
  });
  total = total_weight(cands);
}

}  // namespace

Status validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    return params_error("temperature", "must be >= 0 and finite (0: greedy)", p.temperature);
  if (p.top_k < 0) return params_error("top_k", "must be >= 0 (0: off)", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return params_error("top_p", "must be in (0, 1] (1: off)", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return params_error("min_p", "must be in [0, 1] (0: off)", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty))
    return params_error("repetition_penalty", "must be > 0 and finite (1: off)",
                        p.repetition_penalty);
  return ok_status();
}

Sampler::Sampler(const SamplingParams& p) : params_(p), eff_(p), rng_(p.seed) {
  if (std::isnan(eff_.temperature)) eff_.temperature = 1.0f;
  eff_.top_k = std::max(eff_.top_k, 0);
  eff_.top_p = std::isnan(eff_.top_p) ? 1.0f : std::clamp(eff_.top_p, 0.0f, 1.0f);
  eff_.min_p = std::isnan(eff_.min_p) ? 0.0f : std::clamp(eff_.min_p, 0.0f, 1.0f);
  if (!(eff_.repetition_penalty > 0.0f) || std::isinf(eff_.repetition_penalty))
    eff_.repetition_penalty = 1.0f;
  top_p_threshold_ = eff_.top_p < 1.0f ? top_p_threshold(eff_.top_p) : 0.0f;
}

void Sampler::reseed(std::uint64_t seed) {
  params_.seed = seed;
  eff_.seed = seed;
  rng_.seed(seed);
}

Sampler::Outcome Sampler::process(std::span<float> x, std::span<const TokenId> history,
                                  Scratch& s) const {
  Outcome out;
  const std::size_t vocab = x.size();  // x: [vocab] fp32, processed in place
  if (vocab == 0) {
    out.single = out.degenerate = true;
    return out;
  }

  // RepetitionPenaltyLogitsProcessor: gather every history id's logit first, then scatter the
  // penalized values, so a duplicated id is penalized once (HF's gather/scatter).
  if (eff_.repetition_penalty != 1.0f && !history.empty()) {
    const float r = eff_.repetition_penalty;
    s.penalty_values.resize(history.size());  // [history] fp32
    for (std::size_t i = 0; i < history.size(); ++i) {
      const TokenId id = history[i];
      const bool valid = id >= 0 && static_cast<std::size_t>(id) < vocab;
      s.penalty_values[i] = valid ? x[static_cast<std::size_t>(id)] : 0.0f;
    }
    for (std::size_t i = 0; i < history.size(); ++i) {
      const TokenId id = history[i];
      if (id < 0 || static_cast<std::size_t>(id) >= vocab) continue;
      const float v = s.penalty_values[i];
      x[static_cast<std::size_t>(id)] = v < 0.0f ? v * r : v / r;
    }
  }

  // NaN -> -inf; the maximum and its first index (torch.argmax picks the first).
  float max_logit = kNegInf;
  std::size_t argmax = 0;
  for (std::size_t i = 0; i < vocab; ++i) {
    if (std::isnan(x[i])) x[i] = kNegInf;
    if (x[i] > max_logit) {
      max_logit = x[i];
      argmax = i;
    }
  }
  if (max_logit == kNegInf) {
    out.single = out.degenerate = true;
    return out;
  }
  if (eff_.greedy()) {
    out.single = true;
    out.token = static_cast<TokenId>(argmax);
    return out;
  }

  std::vector<SamplerCandidate>& cands = s.candidates;  // [<= vocab]
  cands.clear();
  if (max_logit == kPosInf) {  // the limit of softmax: uniform over the +inf tokens
    for (std::size_t i = 0; i < vocab; ++i) {
      if (x[i] == kPosInf) cands.push_back({kPosInf, 1.0f, static_cast<TokenId>(i)});
    }
    out.total = static_cast<double>(cands.size());
    return out;
  }

  // TemperatureLogitsWarper: logits / t in fp32 (division keeps the order, so max / t is the max).
  if (eff_.temperature != 1.0f) {
    const float t = eff_.temperature;
    if (std::isinf(max_logit / t)) {  // overflow: the t -> 0 limit is greedy
      out.single = true;
      out.token = static_cast<TokenId>(argmax);
      return out;
    }
    for (std::size_t i = 0; i < vocab; ++i) x[i] /= t;
    max_logit /= t;
  }

  // TopKLogitsWarper: keep logits >= the k-th largest (ties at the boundary stay).
  float kth = kNegInf;
  const std::size_t k = static_cast<std::size_t>(eff_.top_k);
  if (k > 0 && k < vocab) kth = kth_largest(x, k, s.heap);

  // Candidates: kept by top-k with a non-zero softmax weight (exp underflow to 0 is probability 0,
  // which no later processor or the draw can select).
  double total = 0.0;
  double top_p_below = 0.0;
  if (eff_.top_p < 1.0f && kth == kNegInf) {
    top_p_below = build_top_p_candidates(x, max_logit, top_p_threshold_, s.weights, cands, total);
  } else {
    for (std::size_t i = 0; i < vocab; ++i) {
      const float v = x[i];
      if (!(v >= kth) || v == kNegInf) continue;
      const float w = std::exp(v - max_logit);
      if (w > 0.0f) {
        cands.push_back({v, w, static_cast<TokenId>(i)});
        total += w;
      }
    }
  }

  if (eff_.top_p < 1.0f) apply_top_p(cands, total, top_p_threshold_, top_p_below);
  if (eff_.min_p > 0.0f) apply_min_p(cands, total, eff_.min_p);
  out.total = total;
  return out;
}

TokenId Sampler::sample(std::span<float> logits, std::span<const TokenId> history) {
  const Outcome o = process(logits, history, scratch_);
  degenerate_ = o.degenerate;
  if (o.single) return o.token;
  const std::vector<SamplerCandidate>& cands = scratch_.candidates;
  // One 64-bit draw per sampled token: u uniform in [0, 1) with 53 random bits.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * o.total;
  double acc = 0.0;
  for (const SamplerCandidate& c : cands) {
    acc += c.weight;
    if (target < acc) return c.id;
  }
  return cands.back().id;  // target == total after rounding
}

std::vector<float> Sampler::probabilities(std::span<const float> logits,
                                          std::span<const TokenId> history) const {
  std::vector<float> x(logits.begin(), logits.end());  // [vocab] fp32 scratch copy
  Scratch s;
  const Outcome o = process(x, history, s);
  std::vector<float> probs(logits.size(), 0.0f);  // [vocab] fp32
  if (probs.empty()) return probs;
  if (o.single) {
    probs[static_cast<std::size_t>(o.token)] = 1.0f;
    return probs;
  }
  for (const SamplerCandidate& c : s.candidates) {
    probs[static_cast<std::size_t>(c.id)] = static_cast<float>(c.weight / o.total);
  }
  return probs;
}

}  // namespace cosmos
