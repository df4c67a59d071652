// Shared by the test_gpu_sampling sources (test_sampling.cpp, test_sampling_graph.cpp; one test
// binary): the fixture, the batch runner and the CPU comparisons of the GPU sampling tests.
// Everything here is inline (or a class, a struct or a constant), so both sources can include it.
#pragma once

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


namespace cosmos::sampling_test {


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

inline Flags flags_of(const std::vector<Row>& rows) {
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

inline kernels::SampleParams to_device(const Row& r) {
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
  int* next_ids = nullptr;  // the second copy of the ids (SampleArgs::next_ids): equal to out_ids
  int hist_len = 0;         // history entries (a spare one follows)
  static constexpr int kSpare = -7;
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
    hist_len = static_cast<int>(hist.size());
    hist.push_back(kSpare);  // one spare entry: one-row batches append their id there (history_append)
    history = upload(hist);
    offsets = upload(off);
    EXPECT_EQ(cudaMalloc(&out_ids, static_cast<std::size_t>(rows) * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&next_ids, static_cast<std::size_t>(rows) * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&probs, host_logits.size() * sizeof(float) + 16), cudaSuccess);
    ws_bytes = kernels::sample_workspace_bytes(rows, vocab);
    EXPECT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
    // Nothing but the ticket counters may rely on initial values (sample_workspace_init).
    EXPECT_EQ(cudaMemset(ws, 0xA5, ws_bytes), cudaSuccess);
    EXPECT_EQ(kernels::sample_workspace_init(ws, rows, vocab, nullptr), cudaSuccess);
  }
  ~Batch() {
    for (void* p : {static_cast<void*>(logits), static_cast<void*>(params), static_cast<void*>(history),
                    static_cast<void*>(offsets), static_cast<void*>(out_ids), static_cast<void*>(probs), ws,
                    static_cast<void*>(next_ids)})
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
    a.next_ids = next_ids;
    a.history_append = rows == 1 ? history : nullptr;
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
    EXPECT_EQ(cudaMemset(next_ids, 0xFE, static_cast<std::size_t>(rows) * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMemset(probs, 0xFF, host_logits.size() * sizeof(float)), cudaSuccess);              // NaN
    r.bytes = kernels::launch_sample(args(want_probs), nullptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_GT(r.bytes, 0u);
    r.ids.resize(static_cast<std::size_t>(rows));
    EXPECT_EQ(cudaMemcpy(r.ids.data(), out_ids, r.ids.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<int> next(r.ids.size());
    EXPECT_EQ(cudaMemcpy(next.data(), next_ids, next.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(next, r.ids) << "next_ids must repeat out_ids";
    if (rows == 1) {  // the id appended after the history, which is otherwise unchanged
      std::vector<int> h(static_cast<std::size_t>(hist_len) + 1);
      EXPECT_EQ(cudaMemcpy(h.data(), history, h.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(h.back(), r.ids[0]) << "history_append";
      EXPECT_EQ(cudaMemcpy(history + hist_len, &kSpare, sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
    }
    if (want_probs) {
      r.probs.resize(host_logits.size());
      EXPECT_EQ(cudaMemcpy(r.probs.data(), probs, r.probs.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return r;
  }
};

inline GpuResult run_gpu(const std::vector<Row>& rows, int vocab, bool want_probs) {
  Batch b(rows, vocab);
  return b.run(want_probs);
}

inline std::vector<float> cpu_probs(const Row& r) {
  const Sampler s(r.params);
  return s.probabilities(r.logits, r.history);
}

inline TokenId cpu_sample(const Row& r) {
  Sampler s(r.params);
  std::vector<float> x = r.logits;
  return s.sample(x, r.history);
}

inline std::vector<float> random_logits(int vocab, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(vocab));
  for (float& v : x) v = normal(rng) * scale;
  return x;
}

// Logits on a coarse grid: many exact ties, so top-k and top-p boundaries fall inside tie groups.
inline std::vector<float> tied_logits(int vocab, std::mt19937& rng) {
  std::vector<float> x = random_logits(vocab, 2.0f, rng);
  for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
  return x;
}

inline std::vector<TokenId> random_history(int vocab, int n, std::mt19937& rng) {
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

inline SamplingParams sp(float t, int k = 0, float p = 1.0f, float min_p = 0.0f, float rp = 1.0f, std::uint64_t seed = 7) {
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
inline void expect_same_distribution(const std::vector<float>& cpu, const float* gpu, int drawn, const std::string& what) {
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

}  // namespace cosmos::sampling_test
