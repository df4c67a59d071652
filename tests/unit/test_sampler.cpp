// Sampler: Hugging Face `generate` semantics (repetition penalty -> temperature -> top-k -> top-p ->
// min-p -> softmax -> draw). Small hand-checked cases give exact probabilities; seeded draws are
// checked against the distribution; validate() names each bad field; a 152064-token vocabulary checks
// what top-k / top-p / min-p keep against a brute-force reference (full stable sort), and times
// sample().
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cosmos/sampler.h"

namespace cosmos {
namespace {

using Ids = std::vector<TokenId>;
using Floats = std::vector<float>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::size_t kQwenVocab = 152064;

// ---------------------------------------------------------------------------------------------
// Exact probabilities on small cases. Expected values are softmax of the processed logits, worked
// by hand (exp relative to the max, divided by the sum) and checked with Python's math.exp.
// ---------------------------------------------------------------------------------------------
struct ProbCase {
  std::string name;
  Floats logits;
  Ids history;
  SamplingParams params;
  Floats expected;
};

std::ostream& operator<<(std::ostream& os, const ProbCase& c) { return os << c.name; }

const float k3 = 1.0f / 3.0f;
// softmax([1,2,3]): e^-2 = 0.1353353, e^-1 = 0.3678794, 1; sum 1.5032147.
const Floats kSoftmax123 = {0.0900306f, 0.2447285f, 0.6652410f};
// softmax([2,3]) = [0.2689414, 0.7310586]
const float kA = 0.2689414f, kB = 0.7310586f;

const ProbCase kProbCases[] = {
    {"softmax", {1, 2, 3}, {}, {}, kSoftmax123},
    // [1,2,3] / 0.5 = [2,4,6]: e^-4 = 0.0183156, e^-2 = 0.1353353, 1; sum 1.1536509.
    {"temperature_half", {1, 2, 3}, {}, {.temperature = 0.5f}, {0.0158762f, 0.1173104f, 0.8668133f}},
    // [1,2,3] / 2 = [0.5,1,1.5]: e^-1 = 0.3678794, e^-0.5 = 0.6065307, 1; sum 1.9744101.
    {"temperature_two", {1, 2, 3}, {}, {.temperature = 2.0f}, {0.1863237f, 0.3071959f, 0.5064804f}},
    // k-th largest = 2: keep [2,3].
    {"top_k_2", {1, 2, 3, 0}, {}, {.top_k = 2}, {0, kA, kB, 0}},
    // Sorted [3,3,3,2,1]: 2nd largest is 3, and every 3 stays (HF filters logits < topk[-1]).
    {"top_k_ties_kept", {1, 3, 3, 2, 3}, {}, {.top_k = 2}, {0, k3, k3, 0, k3}},
    {"top_k_1_tied_max", {1, 3, 3, 2}, {}, {.top_k = 1}, {0, 0.5f, 0.5f, 0}},
    // 4th largest is 2: keep 3,3,3,2 -> 1,1,1,e^-1 over 3.3678794.
    {"top_k_4", {1, 3, 3, 2, 3}, {}, {.top_k = 4}, {0, 0.2969227f, 0.2969227f, 0.1092318f, 0.2969227f}},
    {"top_k_above_vocab", {1, 2, 3}, {}, {.top_k = 10}, kSoftmax123},
    // 1 - 0.9 = 0.1; ascending cumulative 0.0900, 0.3348, 1: only the first is <= 0.1.
    {"top_p_0_9", {1, 2, 3}, {}, {.top_p = 0.9f}, {0, kA, kB}},
    // 1 - 0.91 = 0.09 < 0.0900306: nothing removed (the boundary is 3e-5 away).
    {"top_p_0_91_keeps_all", {1, 2, 3}, {}, {.top_p = 0.91f}, kSoftmax123},
    // 1 - 0.3 = 0.7: 0.0900 and 0.3348 are <= 0.7, only the top stays.
    {"top_p_0_3", {1, 2, 3}, {}, {.top_p = 0.3f}, {0, 0, 1}},
    // Uniform 0.25 each (exact): stable ascending order is ids 0,1,2,3 with cumulative 0.25, 0.5,
    // 0.75, 1. Removed when <= 1 - top_p, so the boundary value itself is removed, lowest ids first.
    {"top_p_uniform_0_5", {0, 0, 0, 0}, {}, {.top_p = 0.5f}, {0, 0, 0.5f, 0.5f}},
    {"top_p_uniform_0_75", {0, 0, 0, 0}, {}, {.top_p = 0.75f}, {0, k3, k3, k3}},
    {"top_p_uniform_0_76", {0, 0, 0, 0}, {}, {.top_p = 0.76f}, {0.25f, 0.25f, 0.25f, 0.25f}},
    // [3,3,1]: probs 0.4683105, 0.4683105, 0.0633789; ascending (stable) ids 2,0,1 with cumulative
    // 0.0634, 0.5317, 1; 1 - 0.1 = 0.9 removes ids 2 and 0: of the tied top, the higher id stays.
    {"top_p_tied_top_keeps_higher_id", {3, 3, 1}, {}, {.top_p = 0.1f}, {0, 1, 0}},
    // max prob 0.6652410 * 0.2 = 0.1330482 > 0.0900306: id 0 removed.
    {"min_p_0_2", {1, 2, 3}, {}, {.min_p = 0.2f}, {0, kA, kB}},
    // 0.6652410 * 0.1 = 0.0665241 < 0.0900306: all kept.
    {"min_p_0_1", {1, 2, 3}, {}, {.min_p = 0.1f}, kSoftmax123},
    {"min_p_1_keeps_tied_max", {3, 3, 1}, {}, {.min_p = 1.0f}, {0.5f, 0.5f, 0}},
    // r = 2, ids 0 and 1 repeated: 2 / 2 = 1, -2 * 2 = -4 (once each, not per occurrence):
    // softmax([1,-4,1,0.5]): 1, e^-5 = 0.0067379, 1, e^-0.5 = 0.6065307; sum 2.6132686.
    {"repetition_penalty_duplicates",
     {2, -2, 1, 0.5f}, {0, 1, 1, 0, 1}, {.repetition_penalty = 2.0f},
     {0.3826625f, 0.0025784f, 0.3826625f, 0.2320966f}},
    // r = 0.5 rewards: 2 / 0.5 = 4, -2 * 0.5 = -1, 0 stays 0 (0 < 0 is false: 0 / r):
    // softmax([4,-1,0]): 1, e^-5 = 0.0067379, e^-4 = 0.0183156; sum 1.0250535.
    {"repetition_penalty_below_one",
     {2, -2, 0}, {0, 1, 2}, {.repetition_penalty = 0.5f}, {0.9755588f, 0.0065733f, 0.0178680f}},
    {"repetition_penalty_ignores_bad_ids", {1, 2, 3}, {-1, 3, 100}, {.repetition_penalty = 2.0f},
     kSoftmax123},
    // Penalty: id 3: 4 / 1.5 = 2.6666667. Temperature 0.5: [2, 4, 6, 5.3333333, 0]. Top-3: ids 1,2,3.
    // Probs over {4, 6, 5.3333}: e^-2 = 0.1353353, 1, e^-0.6666667 = 0.5134171; sum 1.6487524 ->
    // 0.0820834, 0.6065192, 0.3113973. Top-p 0.8 (1 - 0.8 = 0.2): cumulative 0.0821 removed,
    // 0.3935 kept -> ids 3,2: 0.5134171 / 1.5134171 = 0.3392436 and 0.6607564.
    // Min-p 0.5: 0.5 * 0.6607564 = 0.3303782 < 0.3392436: kept.
    {"combined",
     {1, 2, 3, 4, 0}, {3, 3},
     {.temperature = 0.5f, .top_k = 3, .top_p = 0.8f, .min_p = 0.5f, .repetition_penalty = 1.5f},
     {0, 0, 0.6607564f, 0.3392436f, 0}},
    // Same, min-p 0.6: 0.6 * 0.6607564 = 0.3964538 > 0.3392436: only id 2.
    {"combined_min_p_0_6",
     {1, 2, 3, 4, 0}, {3, 3},
     {.temperature = 0.5f, .top_k = 3, .top_p = 0.8f, .min_p = 0.6f, .repetition_penalty = 1.5f},
     {0, 0, 1, 0, 0}},
    // Greedy: argmax, the first of equal maxima (torch.argmax).
    {"greedy_first_max", {1, 3, 3, 2}, {}, {.temperature = 0.0f}, {0, 1, 0, 0}},
    // Greedy still applies the penalty: [2, 1.5, 0] -> [1, 1.5, 0].
    {"greedy_with_penalty", {2, 1.5f, 0}, {0}, {.temperature = 0.0f, .repetition_penalty = 2.0f},
     {0, 1, 0}},
    // Greedy ignores the warpers: top_p 0.1 / top_k 1 would keep the higher id of the tie.
    {"greedy_ignores_warpers", {3, 3, 1}, {}, {.temperature = 0.0f, .top_k = 1, .top_p = 0.1f},
     {1, 0, 0}},
    {"nan_is_neg_inf", {kNaN, 0, 0}, {}, {}, {0, 0.5f, 0.5f}},
    {"neg_inf_tokens", {-kInf, 1, 2, 3}, {}, {}, {0, 0.0900306f, 0.2447285f, 0.6652410f}},
    {"greedy_skips_nan", {kNaN, 1, 5, kNaN}, {}, {.temperature = 0.0f}, {0, 0, 1, 0}},
    {"pos_inf_uniform", {0, kInf, 1, kInf}, {}, {.top_k = 1}, {0, 0.5f, 0, 0.5f}},
    // 30 / FLT_MIN overflows to inf: the t -> 0 limit, greedy.
    {"tiny_temperature_is_greedy", {1, 30, 2}, {}, {.temperature = std::numeric_limits<float>::min()},
     {0, 1, 0}},
    // No usable logit: one-hot on id 0, what sample() returns.
    {"all_neg_inf_degenerate", {-kInf, kNaN, -kInf}, {}, {}, {1, 0, 0}},
};

class SamplerProbabilities : public ::testing::TestWithParam<ProbCase> {};

TEST_P(SamplerProbabilities, MatchHandComputed) {
  const ProbCase& c = GetParam();
  ASSERT_TRUE(validate(c.params).ok()) << c.params.top_p;
  Sampler sampler(c.params);
  const Floats probs = sampler.probabilities(c.logits, c.history);
  ASSERT_EQ(probs.size(), c.expected.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    EXPECT_NEAR(probs[i], c.expected[i], 2e-6) << "id " << i;
    sum += probs[i];
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  // Draws only ever pick tokens the distribution keeps.
  for (int n = 0; n < 200; ++n) {
    Floats scratch = c.logits;
    const TokenId id = sampler.sample(scratch, c.history);
    ASSERT_GE(id, 0);
    ASSERT_LT(static_cast<std::size_t>(id), probs.size());
    EXPECT_GT(probs[static_cast<std::size_t>(id)], 0.0f) << "drew id " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SamplerProbabilities, ::testing::ValuesIn(kProbCases),
                         [](const ::testing::TestParamInfo<ProbCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(Sampler, DegenerateInputReturnsZeroAndSaysSo) {
  Sampler sampler({});
  Floats dead = {-kInf, kNaN, -kInf};
  EXPECT_EQ(sampler.sample(dead, {}), 0);
  EXPECT_TRUE(sampler.last_sample_was_degenerate());
  Floats good = {0, 5, 0};
  sampler.sample(good, {});
  EXPECT_FALSE(sampler.last_sample_was_degenerate());
  EXPECT_EQ(sampler.sample(std::span<float>(), {}), 0);
  EXPECT_TRUE(sampler.last_sample_was_degenerate());
  EXPECT_TRUE(sampler.probabilities({}, {}).empty());
}

TEST(Sampler, GreedySampleIsArgmax) {
  Sampler sampler({.temperature = 0.0f, .repetition_penalty = 3.0f});
  Floats logits = {0.5f, 2.0f, 2.0f, 1.0f};
  EXPECT_EQ(sampler.sample(logits, Ids{}), 1);
  logits = {0.5f, 2.0f, 2.0f, 1.0f};
  const Ids history = {1, 2};  // 2 / 3 = 0.667 each: 1.0 (id 3) is now the max
  EXPECT_EQ(sampler.sample(logits, history), 3);
}

// ---------------------------------------------------------------------------------------------
// Seeded draws. Counts over N draws are multinomial: each bin's count has mean N p and binomial
// standard deviation sqrt(N p (1 - p)); a bin may deviate by 5 of those (a false alarm odds of
// ~6e-7 per bin). Pearson's chi-square must stay under its 0.1% critical value. The RNG is seeded,
// so each check is deterministic: these bounds say the draws look like the distribution.
// ---------------------------------------------------------------------------------------------

// Upper 0.1% point of chi-square with `df` degrees of freedom: tabulated up to 10, above that the
// Wilson-Hilferty approximation (z(0.999) = 3.0902; 0.5% high at df 11, closer above).
double chi_square_critical_0_001(int df) {
  static const double table[] = {10.828, 13.816, 16.266, 18.467, 20.515,
                                 22.458, 24.322, 26.124, 27.877, 29.588};
  if (df >= 1 && df <= 10) return table[df - 1];
  const double k = df;
  const double t = 1.0 - 2.0 / (9.0 * k) + 3.0902 * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

void check_draws(Sampler& sampler, const Floats& logits, const Ids& history, int n) {
  const Floats probs = sampler.probabilities(logits, history);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    Floats scratch = logits;  // sample() uses its argument as scratch
    ++counts[static_cast<std::size_t>(sampler.sample(scratch, history))];
  }
  double chi2 = 0.0;
  int bins = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    const double expected = n * static_cast<double>(probs[i]);
    if (probs[i] == 0.0f) {
      EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
      continue;
    }
    const double sigma = std::sqrt(expected * (1.0 - probs[i]));
    EXPECT_LE(std::abs(counts[i] - expected), 5.0 * sigma + 1.0)
        << "token " << i << ": " << counts[i] << " draws, expected " << expected;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++bins;
  }
  if (bins > 1) {
    EXPECT_LT(chi2, chi_square_critical_0_001(bins - 1)) << bins << " bins";
  }
}

TEST(SamplerDraws, MatchSoftmaxOverSeeds) {
  // softmax([1,2,3,0]) = [0.0871443, 0.2368828, 0.6439143, 0.0320586]; 20000 draws per seed; the
  // binomial sigma of the smallest bin is sqrt(20000 * 0.032 * 0.968) = 24.9 draws.
  EXPECT_NEAR(chi_square_critical_0_001(11), 31.264, 0.2);  // Wilson-Hilferty vs the table
  for (const std::uint64_t seed : {1u, 2u, 3u, 12345u}) {
    SCOPED_TRACE(seed);
    Sampler sampler({.seed = seed});
    check_draws(sampler, {1, 2, 3, 0}, {}, 20000);
  }
}

TEST(SamplerDraws, MatchFilteredDistributions) {
  std::mt19937_64 gen(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Floats logits(64);
  for (float& v : logits) v = normal(gen);
  const Ids history = {3, 5, 5, 8};
  const SamplingParams rows[] = {
      {.temperature = 0.7f, .top_k = 10, .seed = 1},
      {.temperature = 1.3f, .top_p = 0.8f, .seed = 2},
      {.top_p = 0.95f, .min_p = 0.02f, .repetition_penalty = 1.3f, .seed = 3},
      {.temperature = 0.9f, .top_k = 20, .top_p = 0.9f, .min_p = 0.05f, .seed = 4},
  };
  for (const SamplingParams& p : rows) {
    SCOPED_TRACE(p.seed);
    Sampler sampler(p);
    check_draws(sampler, logits, history, 20000);
  }
}

std::vector<TokenId> draw_sequence(Sampler& sampler, const Floats& logits, int n) {
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) {
    Floats scratch = logits;
    out.push_back(sampler.sample(scratch, {}));
  }
  return out;
}

TEST(SamplerDraws, SeedReproducibility) {
  const Floats logits = {0.1f, 0.4f, 0.2f, 0.3f, 0.0f, 0.25f, 0.35f, 0.15f};  // nearly flat
  const SamplingParams p = {.top_p = 0.95f, .seed = 42};
  Sampler a(p), b(p);
  const auto first = draw_sequence(a, logits, 200);
  EXPECT_EQ(first, draw_sequence(b, logits, 200));  // same seed, same inputs: same tokens
  a.reseed(42);
  EXPECT_EQ(first, draw_sequence(a, logits, 200));  // reseed replays
  Sampler c({.top_p = 0.95f, .seed = 43});
  EXPECT_NE(first, draw_sequence(c, logits, 200));  // another seed: another sequence
  // probabilities() is const and does not advance the generator.
  a.reseed(42);
  a.probabilities(logits, {});
  EXPECT_EQ(first, draw_sequence(a, logits, 200));
}

// ---------------------------------------------------------------------------------------------
// validate()
// ---------------------------------------------------------------------------------------------
struct ValidateRow {
  SamplingParams params;
  const char* field;  // nullptr: valid
};

TEST(SamplerValidate, NamesTheBadField) {
  const ValidateRow rows[] = {
      {{}, nullptr},
      {{.temperature = 0.0f}, nullptr},
      {{.temperature = 0.01f, .top_k = 1, .top_p = 1e-6f, .min_p = 1.0f}, nullptr},
      {{.min_p = 0.0f, .repetition_penalty = 1e-3f}, nullptr},
      {{.temperature = -0.1f}, "temperature"},
      {{.temperature = kNaN}, "temperature"},
      {{.temperature = kInf}, "temperature"},
      {{.top_k = -1}, "top_k"},
      {{.top_p = 0.0f}, "top_p"},
      {{.top_p = -0.5f}, "top_p"},
      {{.top_p = 1.01f}, "top_p"},
      {{.top_p = kNaN}, "top_p"},
      {{.min_p = -0.01f}, "min_p"},
      {{.min_p = 1.5f}, "min_p"},
      {{.min_p = kNaN}, "min_p"},
      {{.repetition_penalty = 0.0f}, "repetition_penalty"},
      {{.repetition_penalty = -1.0f}, "repetition_penalty"},
      {{.repetition_penalty = kNaN}, "repetition_penalty"},
      {{.repetition_penalty = kInf}, "repetition_penalty"},
  };
  for (const ValidateRow& row : rows) {
    const Status s = validate(row.params);
    if (row.field == nullptr) {
      EXPECT_TRUE(s.ok()) << s.error().message;
      continue;
    }
    ASSERT_FALSE(s.ok()) << row.field;
    EXPECT_EQ(s.error().category, ErrorCategory::bad_input);
    EXPECT_EQ(s.error().code, "sampling.params");
    EXPECT_NE(s.error().message.find(std::string(row.field) + " "), std::string::npos)
        << s.error().message;
  }
  EXPECT_EQ(validate({.top_k = -3}).error().message,
            "sampling parameter top_k must be >= 0 (0: off), got -3");
}

TEST(SamplerValidate, InvalidParamsAreClampedNotCrashing) {
  const Floats logits = {1, 2, 3};
  EXPECT_EQ(Sampler({.top_k = -5}).probabilities(logits, {}), Sampler({}).probabilities(logits, {}));
  EXPECT_EQ(Sampler({.top_p = 0.0f}).probabilities(logits, {}), (Floats{0, 0, 1}));  // top only
  EXPECT_EQ(Sampler({.min_p = 7.0f}).probabilities(logits, {}), (Floats{0, 0, 1}));
  EXPECT_EQ(Sampler({.repetition_penalty = -2.0f}).probabilities(logits, Ids{2}),
            Sampler({}).probabilities(logits, {}));
}

// ---------------------------------------------------------------------------------------------
// Qwen-size vocabulary: kept sets against a brute-force HF reference, probabilities sum to 1.
// ---------------------------------------------------------------------------------------------

// LLM-like logits: normal(0, 2) with 40 tokens lifted by 8..14 (a peaked head), or flat normal(0, 1).
Floats make_vocab_logits(bool peaked, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, peaked ? 2.0f : 1.0f);
  Floats logits(kQwenVocab);  // [vocab] fp32
  for (float& v : logits) v = normal(gen);
  if (peaked) {
    std::uniform_int_distribution<std::size_t> pick(0, kQwenVocab - 1);
    std::uniform_real_distribution<float> lift(8.0f, 14.0f);
    for (int i = 0; i < 40; ++i) logits[pick(gen)] += lift(gen);
  }
  return logits;
}

// HF's pipeline written the slow, obvious way (full stable sort), for temperature / top-k / top-p /
// min-p without penalty. Returns the kept mask [vocab].
std::vector<bool> reference_kept(Floats x, float temperature, int top_k, double top_p_decimal,
                                 float min_p) {
  const std::size_t n = x.size();
  for (float& v : x) v /= temperature;
  std::vector<bool> kept(n, true);
  if (top_k > 0) {
    Floats sorted = x;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const float kth = sorted[static_cast<std::size_t>(top_k) - 1];
    for (std::size_t i = 0; i < n; ++i) kept[i] = x[i] >= kth;
  }
  const auto softmax = [&] {  // over the kept tokens, fp32 results
    float m = -kInf;
    for (std::size_t i = 0; i < n; ++i) {
      if (kept[i]) m = std::max(m, x[i]);
    }
    double z = 0.0;
    for (std::size_t i = 0; i < n; ++i) z += kept[i] ? std::exp(x[i] - m) : 0.0f;
    Floats p(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      if (kept[i]) p[i] = static_cast<float>(std::exp(x[i] - m) / z);
    }
    return p;
  };
  if (top_p_decimal < 1.0) {
    const Floats p = softmax();
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const float xa = kept[a] ? x[a] : -kInf, xb = kept[b] ? x[b] : -kInf;
      return xa < xb;
    });
    const float threshold = static_cast<float>(1.0 - top_p_decimal);
    double cum = 0.0;
    for (std::size_t j = 0; j + 1 < n; ++j) {
      cum += p[order[j]];
      if (static_cast<float>(cum) <= threshold) kept[order[j]] = false;
    }
  }
  if (min_p > 0.0f) {
    const Floats p = softmax();
    const float scaled = min_p * *std::max_element(p.begin(), p.end());
    for (std::size_t i = 0; i < n; ++i) {
      if (p[i] < scaled) kept[i] = false;
    }
  }
  return kept;
}

struct VocabRow {
  bool peaked;
  float temperature;
  int top_k;
  double top_p;  // as the user wrote it
  float min_p;
};

TEST(SamplerLargeVocab, KeptSetsMatchReferenceAndSumToOne) {
  const VocabRow rows[] = {
      {true, 1.0f, 0, 1.0, 0.0f},    {true, 0.7f, 50, 1.0, 0.0f},   {false, 1.0f, 50, 1.0, 0.0f},
      {false, 1.0f, 5000, 1.0, 0.0f}, {true, 1.0f, 0, 0.9, 0.0f},    {true, 0.6f, 0, 0.95, 0.0f},
      {false, 1.0f, 0, 0.9, 0.0f},   {false, 1.0f, 0, 0.5, 0.0f},   {true, 1.0f, 0, 1.0, 0.05f},
      {false, 1.0f, 0, 1.0, 0.5f},   {true, 0.7f, 20, 0.8, 0.05f},  {true, 1.2f, 0, 0.999, 0.0f},
  };
  for (const VocabRow& row : rows) {
    SCOPED_TRACE(::testing::Message() << "peaked " << row.peaked << " t " << row.temperature
                                      << " k " << row.top_k << " p " << row.top_p << " min_p "
                                      << row.min_p);
    const Floats logits = make_vocab_logits(row.peaked, 99);
    const SamplingParams params = {.temperature = row.temperature, .top_k = row.top_k,
                                   .top_p = static_cast<float>(row.top_p), .min_p = row.min_p};
    ASSERT_TRUE(validate(params).ok());
    const Floats probs = Sampler(params).probabilities(logits, {});
    const std::vector<bool> want =
        reference_kept(logits, row.temperature, row.top_k, row.top_p, row.min_p);
    const double sum = std::accumulate(probs.begin(), probs.end(), 0.0);
    EXPECT_NEAR(sum, 1.0, 1e-5);
    std::size_t kept = 0, want_kept = 0, mismatched = 0;
    for (std::size_t i = 0; i < probs.size(); ++i) {
      kept += probs[i] > 0.0f;
      want_kept += want[i];
      mismatched += (probs[i] > 0.0f) != want[i];
    }
    EXPECT_EQ(kept, want_kept);
    EXPECT_EQ(mismatched, 0u);
    if (row.top_k > 0 && row.top_p == 1.0 && row.min_p == 0.0f) {
      EXPECT_EQ(kept, static_cast<std::size_t>(row.top_k));  // random floats: no ties
    }
    std::printf("  [vocab %zu] peaked=%d t=%.2f top_k=%d top_p=%.3f min_p=%.2f: %zu kept\n",
                probs.size(), row.peaked, static_cast<double>(row.temperature), row.top_k,
                row.top_p, static_cast<double>(row.min_p), kept);
  }
}

// Peaked logits are what a language model gives; flat ones are the worst case for top-p (most of
// the vocabulary sits above the boundary), checked only against a looser bound.
struct TimingRow {
  const char* name;
  bool peaked;
  SamplingParams params;
};

TEST(SamplerLargeVocab, SampleTiming) {
  Ids history(4096);  // a long prompt + answer for the repetition penalty
  std::mt19937_64 gen(5);
  for (TokenId& id : history) id = static_cast<TokenId>(gen() % kQwenVocab);
  const TimingRow rows[] = {
      {"greedy", true, {.temperature = 0.0f}},
      {"temperature only", true, {.temperature = 0.7f}},
      {"top_k 50", true, {.temperature = 0.7f, .top_k = 50}},
      {"top_p 0.9", true, {.temperature = 0.7f, .top_p = 0.9f}},
      {"Qwen defaults + penalty", true,
       {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .repetition_penalty = 1.05f}},
      {"top_p 0.95 + min_p, flat logits", false, {.top_p = 0.95f, .min_p = 0.01f}},
      {"top_p 0.9, flat logits", false, {.top_p = 0.9f}},
  };
#ifdef NDEBUG
  const double limit_ms = 5.0;  // optimized builds: the brief's budget per token
#else
  const double limit_ms = 50.0;  // unoptimized builds: only catch a pathological slowdown
#endif
  for (const TimingRow& row : rows) {
    const Floats logits = make_vocab_logits(row.peaked, 11);
    Sampler sampler(row.params);
    Floats scratch(logits.size());  // [vocab] fp32
    const int reps = 30;
    double total_ms = 0.0, worst_ms = 0.0;
    for (int r = 0; r < reps; ++r) {
      std::copy(logits.begin(), logits.end(), scratch.begin());
      const auto t0 = std::chrono::steady_clock::now();
      const TokenId id = sampler.sample(scratch, history);
      const auto t1 = std::chrono::steady_clock::now();
      ASSERT_GE(id, 0);
      const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      total_ms += ms;
      worst_ms = std::max(worst_ms, ms);
    }
    const double mean_ms = total_ms / reps;
    std::printf("  sample() vocab %zu, %-34s mean %.3f ms, worst %.3f ms\n", logits.size(), row.name,
                mean_ms, worst_ms);
    EXPECT_LT(mean_ms, row.peaked ? limit_ms : 4.0 * limit_ms) << row.name;
  }
}

}  // namespace
}  // namespace cosmos
