// GPU sampling (kernels/sampling.cu) against the CPU Sampler (cosmos/sampler.h): greedy ids, the
// final distribution (probs_out) for combinations of the processors, ties, NaN / inf rows, the draw
// (support, determinism, chi-square frequencies), a captured CUDA graph, and the time per call.
// Fresh random logits; out_ids and probs_out poisoned before each launch, the workspace too.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/sampler.h"
#include "cuda_upload.h"
#include "kernels/device_info.cuh"
#include "kernels/pdl.cuh"
#include "kernels/sampling.cuh"

namespace cosmos {
namespace {

using testing::upload;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

class GpuSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

struct Row {
  std::vector<float> logits;  // [vocab]
  SamplingParams params;
  std::uint64_t step = 0;
  std::vector<TokenId> history;
};

struct GpuResult {
  std::vector<int> ids;      // [rows]
  std::vector<float> probs;  // [rows * vocab] when asked
  std::size_t bytes = 0;
};

// The host flags as the engine's CUDA backend computes them.
struct Flags {
  bool any_penalty = false, all_greedy = true, need_sort = false, skip_top_k = true, skip_top_p = true;
};

Flags flags_of(const std::vector<Row>& rows) {
  Flags f;
  for (const Row& r : rows) {
    f.any_penalty |= r.params.repetition_penalty != 1.0f;
    f.all_greedy &= r.params.greedy();
    f.need_sort |= !r.params.greedy() && (r.params.top_k > 0 || r.params.top_p < 1.0f);
    f.skip_top_k &= r.params.greedy() || r.params.top_k <= 0;
    f.skip_top_p &= r.params.greedy() || r.params.top_p >= 1.0f;
  }
  return f;
}

kernels::SampleParams to_device(const Row& r) {
  const SamplingParams& p = r.params;
  return kernels::SampleParams{p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty, p.seed, r.step};
}

// Device buffers for a batch of rows; upload() refreshes the logits (the launch modifies them).
struct Batch {
  int rows = 0, vocab = 0;
  float* logits = nullptr;
  kernels::SampleParams* params = nullptr;
  int* history = nullptr;
  int* offsets = nullptr;
  int* out_ids = nullptr;
  float* probs = nullptr;
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
  Flags flags;
  std::vector<float> host_logits;

  Batch(const std::vector<Row>& rs, int v) : rows(static_cast<int>(rs.size())), vocab(v), flags(flags_of(rs)) {
    std::vector<int> hist, off{0};
    std::vector<kernels::SampleParams> ps;
    for (const Row& r : rs) {
      host_logits.insert(host_logits.end(), r.logits.begin(), r.logits.end());
      hist.insert(hist.end(), r.history.begin(), r.history.end());
      off.push_back(static_cast<int>(hist.size()));
      ps.push_back(to_device(r));
    }
    logits = upload(host_logits);
    params = upload(ps);
    history = upload(hist);
    offsets = upload(off);
    EXPECT_EQ(cudaMalloc(&out_ids, static_cast<std::size_t>(rows) * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&probs, host_logits.size() * sizeof(float) + 16), cudaSuccess);
    ws_bytes = kernels::sample_workspace_bytes(rows, vocab);
    EXPECT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(ws, 0xA5, ws_bytes), cudaSuccess);  // nothing may rely on a zeroed workspace
  }
  ~Batch() {
    for (void* p : {static_cast<void*>(logits), static_cast<void*>(params), static_cast<void*>(history),
                    static_cast<void*>(offsets), static_cast<void*>(out_ids), static_cast<void*>(probs), ws})
      cudaFree(p);
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void set_params(const std::vector<Row>& rs) {
    std::vector<kernels::SampleParams> ps;
    for (const Row& r : rs) ps.push_back(to_device(r));
    EXPECT_EQ(cudaMemcpy(params, ps.data(), ps.size() * sizeof(ps[0]), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void refresh_logits(cudaStream_t stream) {
    EXPECT_EQ(cudaMemcpyAsync(logits, host_logits.data(), host_logits.size() * sizeof(float), cudaMemcpyHostToDevice,
                              stream),
              cudaSuccess);
  }
  kernels::SampleArgs args(bool want_probs) const {
    kernels::SampleArgs a;
    a.logits = logits;
    a.rows = rows;
    a.vocab = vocab;
    a.params = params;
    a.history = history;
    a.history_offsets = offsets;
    a.out_ids = out_ids;
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    a.any_penalty = flags.any_penalty;
    a.all_greedy = flags.all_greedy;
    a.need_sort = flags.need_sort;
    a.skip_top_k = flags.skip_top_k;
    a.skip_top_p = flags.skip_top_p;
    a.probs_out = want_probs ? probs : nullptr;
    return a;
  }

  // One launch on fresh logits, outputs poisoned first.
  GpuResult run(bool want_probs) {
    GpuResult r;
    refresh_logits(nullptr);
    EXPECT_EQ(cudaMemset(out_ids, 0xFF, static_cast<std::size_t>(rows) * sizeof(int)), cudaSuccess);  // -1
    EXPECT_EQ(cudaMemset(probs, 0xFF, host_logits.size() * sizeof(float)), cudaSuccess);              // NaN
    r.bytes = kernels::launch_sample(args(want_probs), nullptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_GT(r.bytes, 0u);
    r.ids.resize(static_cast<std::size_t>(rows));
    EXPECT_EQ(cudaMemcpy(r.ids.data(), out_ids, r.ids.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    if (want_probs) {
      r.probs.resize(host_logits.size());
      EXPECT_EQ(cudaMemcpy(r.probs.data(), probs, r.probs.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return r;
  }
};

GpuResult run_gpu(const std::vector<Row>& rows, int vocab, bool want_probs) {
  Batch b(rows, vocab);
  return b.run(want_probs);
}

std::vector<float> cpu_probs(const Row& r) {
  const Sampler s(r.params);
  return s.probabilities(r.logits, r.history);
}

TokenId cpu_sample(const Row& r) {
  Sampler s(r.params);
  std::vector<float> x = r.logits;
  return s.sample(x, r.history);
}

std::vector<float> random_logits(int vocab, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(vocab));
  for (float& v : x) v = normal(rng) * scale;
  return x;
}

// Logits on a coarse grid: many exact ties, so top-k and top-p boundaries fall inside tie groups.
std::vector<float> tied_logits(int vocab, std::mt19937& rng) {
  std::vector<float> x = random_logits(vocab, 2.0f, rng);
  for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
  return x;
}

std::vector<TokenId> random_history(int vocab, int n, std::mt19937& rng) {
  std::uniform_int_distribution<int> id(0, vocab - 1);
  std::vector<TokenId> h;
  for (int i = 0; i < n; ++i) {
    const TokenId t = id(rng);
    h.push_back(t);
    if (i % 3 == 0) h.push_back(t);  // duplicates: penalized once
  }
  h.push_back(-1);     // out of range: ignored
  h.push_back(vocab);  // out of range: ignored
  return h;
}

SamplingParams sp(float t, int k = 0, float p = 1.0f, float min_p = 0.0f, float rp = 1.0f, std::uint64_t seed = 7) {
  SamplingParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = min_p;
  s.repetition_penalty = rp;
  s.seed = seed;
  return s;
}

// GPU probabilities against the CPU's: the same support, each within 2e-6 relative (exp and the
// double sums differ in the last bits), and the drawn id inside the support.
void expect_same_distribution(const std::vector<float>& cpu, const float* gpu, int drawn, const std::string& what) {
  int support_mismatch = 0, value_mismatch = 0, first_bad = -1;
  double sum = 0.0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const float c = cpu[i], g = gpu[i];
    sum += g;
    const bool bad_support = (c > 0.0f) != (g > 0.0f) || std::isnan(g);
    const bool bad_value = !(std::fabs(static_cast<double>(g) - c) <= 2e-6 * c + 1e-30);
    support_mismatch += bad_support;
    value_mismatch += bad_value;
    if ((bad_support || bad_value) && first_bad < 0) first_bad = static_cast<int>(i);
  }
  EXPECT_EQ(support_mismatch, 0) << what;
  EXPECT_EQ(value_mismatch, 0) << what << " first at id " << first_bad << ": cpu "
                               << (first_bad >= 0 ? cpu[static_cast<std::size_t>(first_bad)] : 0.0f) << " gpu "
                               << (first_bad >= 0 ? gpu[first_bad] : 0.0f);
  EXPECT_NEAR(sum, 1.0, 1e-5) << what;
  ASSERT_GE(drawn, 0) << what;
  ASSERT_LT(static_cast<std::size_t>(drawn), cpu.size()) << what;
  EXPECT_GT(cpu[static_cast<std::size_t>(drawn)], 0.0f) << what << ": drew id " << drawn << " outside the support";
}

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

TEST_F(GpuSampling, CapturedGraphMatchesDirectLaunch) {
  std::mt19937 rng(15);
  const int vocab = 152064;
  std::vector<Row> rows;
  rows.push_back({random_logits(vocab, 2.0f, rng), sp(0.8f, 50, 0.9f, 0.0f, 1.1f), 0, random_history(vocab, 100, rng)});
  rows.push_back({random_logits(vocab, 2.0f, rng), sp(0.0f, 0, 1.0f, 0.0f, 1.1f), 0, random_history(vocab, 10, rng)});
  rows.push_back({random_logits(vocab, 2.0f, rng), sp(1.0f, 0, 0.95f, 0.05f), 0, {}});
  rows.push_back({random_logits(vocab, 6.0f, rng), sp(0.7f, 20, 1.0f, 0.1f), 0, {}});
  Batch b(rows, vocab);
  float* pristine = upload(b.host_logits);  // the graph restores the logits first (the launch modifies them)
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (bool pdl : {false, true}) {
    kernels::set_pdl_enabled(pdl);  // programmatic dependent launches between the passes
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(b.logits, pristine, b.host_logits.size() * sizeof(float), cudaMemcpyDeviceToDevice,
                              stream),
              cudaSuccess);
    EXPECT_GT(kernels::launch_sample(b.args(true), stream), 0u);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (std::uint64_t step = 0; step < 5; ++step) {
      for (Row& r : rows) r.step = step;
      b.set_params(rows);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<int> ids(rows.size());
      std::vector<float> probs(b.host_logits.size());
      ASSERT_EQ(cudaMemcpy(ids.data(), b.out_ids, ids.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(probs.data(), b.probs, probs.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      kernels::set_pdl_enabled(false);
      const GpuResult direct = b.run(true);
      kernels::set_pdl_enabled(pdl);
      EXPECT_EQ(ids, direct.ids) << "pdl " << pdl << " step " << step;
      EXPECT_EQ(probs, direct.probs) << "pdl " << pdl << " step " << step;
      EXPECT_EQ(ids[1], cpu_sample(rows[1]));
      if (step == 0) {
        for (std::size_t r = 0; r < rows.size(); ++r)
          expect_same_distribution(cpu_probs(rows[r]), probs.data() + r * static_cast<std::size_t>(vocab), ids[r],
                                   "graph, pdl " + std::to_string(pdl) + " row " + std::to_string(r));
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  kernels::set_pdl_enabled(false);
  cudaStreamDestroy(stream);
  cudaFree(pristine);
}

TEST_F(GpuSampling, RejectsASmallWorkspace) {
  std::mt19937 rng(16);
  std::vector<Row> rows{{random_logits(100, 1.0f, rng), sp(1.0f), 0, {}}};
  Batch b(rows, 100);
  kernels::SampleArgs a = b.args(false);
  a.workspace_bytes = kernels::sample_workspace_bytes(1, 100) - 1;
  EXPECT_EQ(kernels::launch_sample(a, nullptr), 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Time per call for the 7B vocabulary, replaying a captured graph (the logits are restored from a
// copy first, since the launch modifies them; the copy alone is timed and subtracted).
TEST_F(GpuSampling, ReportsTimePerCall) {
  std::mt19937 rng(17);
  const int vocab = 152064;
  struct Case {
    const char* name;
    SamplingParams p;
    int history;
  };
  const std::vector<Case> cases = {
      {"greedy", sp(0.0f), 0},
      {"greedy + penalty (2000 ids)", sp(0.0f, 0, 1.0f, 0.0f, 1.05f), 2000},
      {"t=0.7", sp(0.7f), 0},
      {"t=0.6 top_p=0.95 + penalty", sp(0.6f, 0, 0.95f, 0.0f, 1.05f), 2000},
      {"top_k=50 top_p=0.9 min_p=0.05 + penalty", sp(0.8f, 50, 0.9f, 0.05f, 1.05f), 2000},
  };
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (int n_rows : {1, 4}) {
    for (const Case& c : cases) {
      std::vector<Row> rows;
      for (int r = 0; r < n_rows; ++r)
        rows.push_back({random_logits(vocab, 3.0f, rng), c.p, 0, random_history(vocab, c.history, rng)});
      if (c.history == 0)
        for (Row& r : rows) r.history.clear();
      Batch b(rows, vocab);
      float* pristine = upload(b.host_logits);
      const std::size_t bytes = b.host_logits.size() * sizeof(float);
      auto time_graph = [&](bool with_sample) {
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
        EXPECT_EQ(cudaMemcpyAsync(b.logits, pristine, bytes, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
        if (with_sample) kernels::launch_sample(b.args(false), stream);
        EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
        EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        for (int i = 0; i < 20; ++i) cudaGraphLaunch(exec, stream);
        const int reps = 200;
        cudaEventRecord(e0, stream);
        for (int i = 0; i < reps; ++i) cudaGraphLaunch(exec, stream);
        cudaEventRecord(e1, stream);
        EXPECT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        return 1000.0 * ms / reps;
      };
      const double copy_us = time_graph(false);
      const double plain_us = time_graph(true);
      kernels::set_pdl_enabled(true);
      const double pdl_us = time_graph(true);
      kernels::set_pdl_enabled(false);
      std::printf("[ sampling ] vocab %d rows %d %-42s %6.1f us per call, %6.1f us with pdl (graph replay, minus %.1f us"
                  " copy)\n",
                  vocab, n_rows, c.name, plain_us - copy_us, pdl_us - copy_us, copy_us);
      // The replayed result is still right.
      std::vector<int> ids(rows.size());
      EXPECT_EQ(cudaMemcpy(ids.data(), b.out_ids, ids.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        if (c.p.greedy()) {
          EXPECT_EQ(ids[r], cpu_sample(rows[r])) << c.name;
        } else {
          EXPECT_GT(cpu_probs(rows[r])[static_cast<std::size_t>(ids[r])], 0.0f) << c.name;
        }
      }
      cudaFree(pristine);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
}

// The CPU Sampler's fp32(1 - top_p), from top_p's shortest decimal (sampler.cpp).
float cpu_threshold(float top_p) {
  char buf[64];
  const auto printed = std::to_chars(buf, buf + sizeof buf, top_p);
  double decimal = static_cast<double>(top_p);
  if (printed.ec == std::errc()) std::from_chars(buf, printed.ptr, decimal);
  return static_cast<float>(1.0 - decimal);
}

TEST(SampleTopPThreshold, MatchesTheShortestDecimal) {
  for (int k = 1; k < 1000; ++k) {
    const float p = static_cast<float>(k) / 1000.0f;
    EXPECT_EQ(kernels::sample_top_p_threshold(p), cpu_threshold(p)) << p;
  }
  EXPECT_EQ(kernels::sample_top_p_threshold(0.9f), 0.1f);
  EXPECT_EQ(kernels::sample_top_p_threshold(0.95f), static_cast<float>(1.0 - 0.95));
  std::mt19937 rng(18);
  std::uniform_real_distribution<float> u(0.001f, 1.0f);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    const float p = u(rng);
    mismatches += kernels::sample_top_p_threshold(p) != cpu_threshold(p);
  }
  EXPECT_EQ(mismatches, 0);
  // Below 0.001 the decimal can need more than 12 places: within an ulp.
  std::uniform_real_distribution<float> tiny(1e-7f, 0.001f);
  for (int i = 0; i < 20000; ++i) {
    const float p = tiny(rng);
    const float a = kernels::sample_top_p_threshold(p), b = cpu_threshold(p);
    EXPECT_LE(std::fabs(a - b), std::nextafter(b, 2.0f) - b) << p;
  }
}

}  // namespace
}  // namespace cosmos
