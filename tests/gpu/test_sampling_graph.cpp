// GPU sampling, part 2 of 2 (see test_sampling.cpp): a captured CUDA graph against direct launches,
// a workspace that is too small, the time per call, and the top-p threshold against the shortest
// decimal. Helpers in test_sampling_common.h.
#include "test_sampling_common.h"

#include <charconv>

namespace cosmos {
namespace {

using namespace sampling_test;

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

// All-greedy launches run no prep pass: they rely on stats leaving its ticket counter at zero. One
// workspace, greedy launches (with and without a penalty, one block per row and many) repeated,
// between sampled launches (which run prep), each against the CPU.
TEST_F(GpuSampling, GreedyLaunchesRepeatOnOneWorkspace) {
  std::mt19937 rng(18);
  for (int vocab : {37, 152064}) {
    std::vector<Row> rows;
    rows.push_back({random_logits(vocab, 2.0f, rng), sp(0.0f, 0, 1.0f, 0.0f, 1.3f), 0, random_history(vocab, 50, rng)});
    rows.push_back({random_logits(vocab, 2.0f, rng), sp(0.0f), 0, {}});
    rows.push_back({random_logits(vocab, 2.0f, rng), sp(0.0f, 0, 1.0f, 0.0f, 0.8f), 0, random_history(vocab, 5, rng)});
    Batch b(rows, vocab);
    std::vector<Row> sampled = rows;
    for (Row& r : sampled) r.params = sp(0.9f, 20, 0.9f, 0.0f, 1.1f);
    for (int round = 0; round < 3; ++round) {
      for (int again = 0; again < 2; ++again) {
        const GpuResult g = b.run(round == 1);
        for (std::size_t r = 0; r < rows.size(); ++r)
          EXPECT_EQ(g.ids[r], cpu_sample(rows[r])) << "vocab " << vocab << " round " << round << " row " << r;
      }
      b.flags = flags_of(sampled);
      b.set_params(sampled);
      const GpuResult s = b.run(false);
      for (int id : s.ids) EXPECT_TRUE(id >= 0 && id < vocab);
      b.flags = flags_of(rows);
      b.set_params(rows);
    }
  }
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
    bool dominant = false;  // one token 6 above the rest's max: top-p's whole set (the later passes return)
  };
  const std::vector<Case> cases = {
      {"greedy", sp(0.0f), 0},
      {"greedy + penalty (2000 ids)", sp(0.0f, 0, 1.0f, 0.0f, 1.05f), 2000},
      {"greedy + penalty (8000 ids)", sp(0.0f, 0, 1.0f, 0.0f, 1.05f), 8000},
      {"t=0.7", sp(0.7f), 0},
      {"t=0.6 top_p=0.95 + penalty", sp(0.6f, 0, 0.95f, 0.0f, 1.05f), 2000},
      {"t=0.6 top_p=0.95 + penalty (8000 ids)", sp(0.6f, 0, 0.95f, 0.0f, 1.05f), 8000},
      {"t=0.6 top_p=0.95 + penalty, a dominant token", sp(0.6f, 0, 0.95f, 0.0f, 1.05f), 2000, true},
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
      if (c.dominant)
        for (Row& r : rows) {
          auto top = std::max_element(r.logits.begin(), r.logits.end());
          std::iter_swap(top, r.logits.begin() + 4242);
          r.logits[4242] += 6.0f;
        }
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
        if (c.p.greedy() || c.dominant) {
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
