// GPU sampling (kernels/sampling.cu) against the CPU Sampler (cosmos/sampler.h): greedy ids, the
// final distribution (probs_out) for combinations of the processors, ties, NaN / inf rows, the draw
// (support, determinism, chi-square frequencies), a captured CUDA graph, and the time per call.
// Fresh random logits; out_ids and probs_out poisoned before each launch, the workspace too.
// Part 1 of 2 (greedy, distributions, ties, the draw, NaN / inf); helpers in test_sampling_common.h.
#include "test_sampling_common.h"

namespace cosmos {
namespace {

using namespace sampling_test;

TEST_F(GpuSampling, GreedyMatchesCpuArgmax) {
  std::mt19937 rng(11);
  for (int vocab : {37, 1000, 152064}) {
    std::vector<Row> rows;
    // Plain argmax.
    rows.push_back({random_logits(vocab, 3.0f, rng), sp(0.0f), 0, {}});
    // Penalty on the argmax (and duplicates, out-of-range ids).
    {
      Row r{random_logits(vocab, 3.0f, rng), sp(0.0f, 0, 1.0f, 0.0f, 1.3f), 0, random_history(vocab, 20, rng)};
      const auto top = std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin();
      r.history.push_back(static_cast<TokenId>(top));
      r.history.push_back(static_cast<TokenId>(top));
      rows.push_back(r);
    }
    // Ties at the max: the lowest id wins; a penalty < 1 on negative logits.
    {
      Row r{random_logits(vocab, 3.0f, rng), sp(0.0f, 0, 1.0f, 0.0f, 0.7f), 0, {}};
      r.logits[static_cast<std::size_t>(vocab - 1)] = 100.0f;
      r.logits[static_cast<std::size_t>(vocab / 2)] = 100.0f;
      r.logits[static_cast<std::size_t>(vocab / 3)] = -0.0f;
      r.history = {vocab / 3, vocab / 5, vocab / 5};
      rows.push_back(r);
    }
    // All negative logits, penalty: v < 0 -> v * p.
    {
      Row r{random_logits(vocab, 1.0f, rng), sp(-1.0f, 0, 1.0f, 0.0f, 2.0f), 0, random_history(vocab, 30, rng)};
      for (float& v : r.logits) v = -std::fabs(v) - 0.1f;
      rows.push_back(r);
    }
    const GpuResult g = run_gpu(rows, vocab, true);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const TokenId want = cpu_sample(rows[r]);
      EXPECT_EQ(g.ids[r], want) << "vocab " << vocab << " row " << r;
      const std::vector<float> p = cpu_probs(rows[r]);
      for (std::size_t i = 0; i < p.size(); ++i)
        ASSERT_EQ(g.probs[r * static_cast<std::size_t>(vocab) + i], p[i]) << "vocab " << vocab << " row " << r;
    }
    // The same greedy rows beside a sampled row (not all_greedy, need_sort on): unchanged ids.
    std::vector<Row> mixed = rows;
    mixed.push_back({random_logits(vocab, 1.0f, rng), sp(1.0f, 5, 0.9f), 0, {}});
    const GpuResult m = run_gpu(mixed, vocab, false);
    for (std::size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(m.ids[r], g.ids[r]) << "mixed, vocab " << vocab;
  }
}

TEST_F(GpuSampling, DistributionMatchesCpu) {
  std::mt19937 rng(12);
  const std::vector<SamplingParams> sets = {
      sp(1.0f),
      sp(0.7f),
      sp(1.5f, 50),
      sp(0.8f, 0, 0.9f),
      sp(1.0f, 40, 0.8f, 0.05f),
      sp(1.0f, 0, 1.0f, 0.1f),
      sp(0.9f, 0, 0.95f, 0.0f, 1.2f),
      sp(1.0f, 1),
      sp(1.0f, 0, 0.001f),
      sp(1.0f, 0, 1e-8f),  // fp32(1 - top_p) = 1: only the top token
      sp(1.0f, 0, 0.6f),
      sp(2.0f, 5, 0.5f, 0.2f, 0.8f),
      sp(0.5f, 2000, 0.99f, 0.01f, 1.1f),
  };
  for (int vocab : {37, 1000, 152064}) {
    for (int variant = 0; variant < 3; ++variant) {  // flat, peaked, tied logits
      std::vector<Row> rows;
      for (const SamplingParams& p : sets) {
        Row r;
        r.logits = variant == 2 ? tied_logits(vocab, rng) : random_logits(vocab, variant == 0 ? 1.0f : 5.0f, rng);
        r.params = p;
        r.step = rows.size();
        if (p.repetition_penalty != 1.0f) r.history = random_history(vocab, 40, rng);
        if (p.top_k == 2000 && vocab > 2000) r.params.top_k = vocab - 1;
        rows.push_back(r);
      }
      // All rows in one launch, then each row alone (its own flags).
      const GpuResult all = run_gpu(rows, vocab, true);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::string what = "vocab " + std::to_string(vocab) + " variant " + std::to_string(variant) +
                                 " set " + std::to_string(r);
        const std::vector<float> cpu = cpu_probs(rows[r]);
        expect_same_distribution(cpu, all.probs.data() + r * static_cast<std::size_t>(vocab), all.ids[r],
                                 what + " (batched)");
        const GpuResult one = run_gpu({rows[r]}, vocab, true);
        expect_same_distribution(cpu, one.probs.data(), one.ids[0], what + " (alone)");
        EXPECT_EQ(one.ids[0], all.ids[r]) << what << ": same seed + step, same draw";
      }
    }
  }
}

// Top-k / top-p boundaries inside large groups of equal logits: the CPU (HF's stable sort) removes
// the lowest ids of the group first.
TEST_F(GpuSampling, TiesAtTheTopPBoundaryRemoveLowIdsFirst) {
  const int vocab = 152064;
  std::vector<Row> rows;
  for (float top_p : {0.3f, 0.5f, 0.77f, 0.9f}) {
    Row r;
    r.logits.assign(static_cast<std::size_t>(vocab), 0.0f);  // one huge tie group...
    for (int i = 0; i < vocab; i += 97) r.logits[static_cast<std::size_t>(i)] = 3.0f;  // ...and a smaller one
    r.logits[5] = 6.0f;
    r.params = sp(1.0f, 0, top_p);
    rows.push_back(r);
  }
  {
    Row r = rows[0];
    r.params = sp(1.0f, 10, 0.9f);  // top-k boundary inside the 3.0 group: all ties kept
    rows.push_back(r);
  }
  const GpuResult g = run_gpu(rows, vocab, true);
  for (std::size_t r = 0; r < rows.size(); ++r)
    expect_same_distribution(cpu_probs(rows[r]), g.probs.data() + r * static_cast<std::size_t>(vocab), g.ids[r],
                             "row " + std::to_string(r));
}

// A token holding more than top_p of the mass is top-p's whole set: stats finds it and the later
// passes return at once. Rows whose top token holds a hair less and a hair more than top_p, with a
// temperature, top-k, min-p and a penalty on the top token; a tie at the maximum, where HF keeps the
// tied pair's highest id (top_p 0.3) or both (0.9), never just the first.
TEST_F(GpuSampling, ADominantTokenIsTopPsWholeSet) {
  std::mt19937 rng(23);
  for (int vocab : {1000, 152064}) {
    // The rest near 0 (random, so the sums are not trivial); the top token at `top` (and `tie`, when
    // >= 0) with the logit that gives the top tokens together probability q at temperature t.
    auto row = [&](float q, const SamplingParams& p, int top, int tie = -1) {
      Row r;
      r.logits = random_logits(vocab, 0.01f, rng);
      const float t = p.temperature;
      double rest = 0.0;
      for (int i = 0; i < vocab; ++i)
        if (i != top && i != tie) rest += std::exp(static_cast<double>(r.logits[static_cast<std::size_t>(i)]) / t);
      const double each = q * rest / (1.0 - q) / (tie >= 0 ? 2.0 : 1.0);
      r.logits[static_cast<std::size_t>(top)] = static_cast<float>(t * std::log(each));
      if (tie >= 0) r.logits[static_cast<std::size_t>(tie)] = r.logits[static_cast<std::size_t>(top)];
      r.params = p;
      return r;
    };
    std::vector<Row> rows;
    std::vector<int> sure;  // rows whose only candidate is the top token
    for (float q : {0.5f, 0.9f, 0.9495f, 0.95f, 0.9505f, 0.96f, 0.999f}) {
      if (q > 0.9505f) sure.push_back(static_cast<int>(rows.size()));
      rows.push_back(row(q, sp(1.0f, 0, 0.95f), vocab / 3));
    }
    sure.push_back(static_cast<int>(rows.size()));
    rows.push_back(row(0.99f, sp(0.6f, 0, 0.95f), 7));
    {  // the app's default: the penalty lowers the top token, which still holds ~98%
      sure.push_back(static_cast<int>(rows.size()));
      Row r = row(0.99f, sp(0.6f, 0, 0.95f, 0.0f, 1.05f), vocab - 1);
      r.history = random_history(vocab, 40, rng);
      r.history.push_back(vocab - 1);
      rows.push_back(r);
    }
    sure.push_back(static_cast<int>(rows.size()));
    rows.push_back(row(0.995f, sp(1.0f, 20, 0.95f, 0.05f), 11));
    sure.push_back(static_cast<int>(rows.size()));
    rows.push_back(row(0.6f, sp(1.0f, 0, 0.5f), 5));  // top alone (0.6 > 0.5), but others >= 0.5: all passes
    sure.push_back(static_cast<int>(rows.size()));
    rows.push_back(row(0.8f, sp(1.0f, 0, 0.5f), 5));
    rows.push_back(row(0.9f, sp(1.0f, 0, 0.3f), 2, vocab / 2));  // a tie: HF keeps the highest id
    rows.push_back(row(0.99f, sp(1.0f, 0, 0.9f), 2, vocab / 2));  // a tie: both kept
    for (int step = 0; step < 2; ++step) {
      for (std::size_t r = 0; r < rows.size(); ++r) rows[r].step = r + 100 * static_cast<std::size_t>(step);
      const GpuResult g = run_gpu(rows, vocab, true);
      const GpuResult ids_only = run_gpu(rows, vocab, false);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::string what = "vocab " + std::to_string(vocab) + " row " + std::to_string(r);
        expect_same_distribution(cpu_probs(rows[r]), g.probs.data() + r * static_cast<std::size_t>(vocab), g.ids[r], what);
        EXPECT_EQ(ids_only.ids[r], g.ids[r]) << what << ": with and without probs_out";
      }
      for (int r : sure) {
        const auto top = std::max_element(rows[r].logits.begin(), rows[r].logits.end()) - rows[r].logits.begin();
        EXPECT_EQ(g.ids[static_cast<std::size_t>(r)], top) << "vocab " << vocab << " row " << r;
      }
    }
  }
}

TEST_F(GpuSampling, DrawIsDeterministicAndFollowsTheDistribution) {
  const int vocab = 8, rows_per_launch = 2000, launches = 10;
  const std::vector<float> logits = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f};
  for (const SamplingParams& p : {sp(1.0f), sp(0.8f, 5, 0.9f), sp(1.2f, 0, 1.0f, 0.2f)}) {
    Row proto{logits, p, 0, {}};
    const std::vector<float> want = cpu_probs(proto);
    std::vector<Row> rows(static_cast<std::size_t>(rows_per_launch), proto);
    Batch b(rows, vocab);
    std::vector<long> counts(static_cast<std::size_t>(vocab), 0);
    std::vector<int> first_ids;
    for (int l = 0; l < launches; ++l) {
      for (int r = 0; r < rows_per_launch; ++r)
        rows[static_cast<std::size_t>(r)].step = static_cast<std::uint64_t>(l * rows_per_launch + r);
      b.set_params(rows);
      const GpuResult g = b.run(false);
      for (int id : g.ids) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, vocab);
        ++counts[static_cast<std::size_t>(id)];
      }
      if (l == 0) first_ids = g.ids;
    }
    // Same seed + step: the same ids again.
    for (int r = 0; r < rows_per_launch; ++r) rows[static_cast<std::size_t>(r)].step = static_cast<std::uint64_t>(r);
    b.set_params(rows);
    EXPECT_EQ(b.run(false).ids, first_ids);
    // Another seed: other draws.
    for (Row& r : rows) r.params.seed = 12345;
    b.set_params(rows);
    EXPECT_NE(b.run(false).ids, first_ids);

    const double n = static_cast<double>(rows_per_launch) * launches;
    double chi2 = 0.0;
    int bins = 0;
    for (int i = 0; i < vocab; ++i) {
      const double e = n * want[static_cast<std::size_t>(i)];
      if (e == 0.0) {
        EXPECT_EQ(counts[static_cast<std::size_t>(i)], 0) << "drew id " << i << " outside the support";
        continue;
      }
      const double d = static_cast<double>(counts[static_cast<std::size_t>(i)]) - e;
      chi2 += d * d / e;
      ++bins;
    }
    // At most 7 degrees of freedom: P(chi2 > 40) < 1e-6. The seeds are fixed, so this is stable.
    EXPECT_LT(chi2, 40.0) << "bins " << bins << " temperature " << p.temperature << " top_k " << p.top_k;
  }
}

TEST_F(GpuSampling, LargeVocabDrawDependsOnSeedAndStepOnly) {
  std::mt19937 rng(13);
  const int vocab = 152064;
  std::vector<Row> rows;
  for (int r = 0; r < 8; ++r) rows.push_back({random_logits(vocab, 1.0f, rng), sp(1.0f, 0, 0.95f), 100, {}});
  Batch b(rows, vocab);
  const GpuResult a = b.run(false);
  const GpuResult again = b.run(false);
  EXPECT_EQ(a.ids, again.ids);
  for (Row& r : rows) r.step = 101;
  b.set_params(rows);
  const GpuResult next = b.run(false);
  int same = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) same += next.ids[r] == a.ids[r];
  EXPECT_LT(same, 3) << "the step must change the draw";
}

TEST_F(GpuSampling, NanAndInfRows) {
  const int vocab = 1000;
  std::mt19937 rng(14);
  std::vector<Row> rows;
  rows.push_back({std::vector<float>(vocab, kNaN), sp(0.0f), 0, {}});               // all NaN, greedy: 0
  rows.push_back({std::vector<float>(vocab, -kInf), sp(1.0f, 0, 0.9f), 0, {}});     // all -inf, sampled: 0
  rows.push_back({std::vector<float>(vocab, kNaN), sp(0.7f, 3, 0.9f, 0.1f), 0, {}});  // all NaN, sampled: 0
  {
    Row r{std::vector<float>(vocab, kNaN), sp(1.0f, 0, 0.95f), 0, {}};  // NaN except a few
    for (int i = 3; i < vocab; i += 50) r.logits[static_cast<std::size_t>(i)] = static_cast<float>(i % 7);
    rows.push_back(r);
  }
  {
    Row r{random_logits(vocab, 1.0f, rng), sp(0.5f, 10, 0.5f), 0, {}};  // +inf tokens: uniform over them
    r.logits[17] = r.logits[400] = r.logits[999] = kInf;
    r.logits[18] = kNaN;
    rows.push_back(r);
  }
  {
    Row r{random_logits(vocab, 1.0f, rng), sp(0.0f), 0, {}};  // +inf, greedy: the first one
    r.logits[600] = r.logits[30] = kInf;
    rows.push_back(r);
  }
  {
    Row r{random_logits(vocab, 1e30f, rng), sp(1e-10f, 0, 0.9f), 0, {}};  // max / t overflows: argmax
    rows.push_back(r);
  }
  {
    Row r{random_logits(vocab, 1.0f, rng), sp(1.0f, 0, 1.0f, 0.0f, 1.5f), 0, {}};  // the penalty makes -inf
    r.logits.assign(static_cast<std::size_t>(vocab), -kInf);
    r.logits[42] = 2.0f;
    r.logits[43] = -2.0f;
    r.history = {42, 43, 42, 44};
    rows.push_back(r);
  }
  const GpuResult g = run_gpu(rows, vocab, true);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::vector<float> cpu = cpu_probs(rows[r]);
    const float* gp = g.probs.data() + r * static_cast<std::size_t>(vocab);
    expect_same_distribution(cpu, gp, g.ids[r], "row " + std::to_string(r));
    const int support = static_cast<int>(std::count_if(cpu.begin(), cpu.end(), [](float v) { return v > 0.0f; }));
    if (support == 1) {
      EXPECT_EQ(g.ids[r], cpu_sample(rows[r])) << "row " << r;
    }
  }
  EXPECT_EQ(g.ids[0], 0);
  EXPECT_EQ(g.ids[1], 0);
  EXPECT_EQ(g.ids[2], 0);
  EXPECT_EQ(g.ids[5], 30);
  const float* inf_row = g.probs.data() + 4 * static_cast<std::size_t>(vocab);
  EXPECT_FLOAT_EQ(inf_row[17], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(inf_row[999], 1.0f / 3.0f);
}

}  // namespace
}  // namespace cosmos
