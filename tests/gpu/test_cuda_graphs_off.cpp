// COSMOS_CUDA_GRAPHS=0 (engine/src/cuda/cuda_backend.cpp): decode steps launched kernel by kernel
// instead of replaying their captured graph, for tools and traces that look at each launch (built
// for racecheck's host memory, which it turned out not to keep down: docs/PERFORMANCE.md, session
// 70). The same steps on a backend with graphs (the default) and one without give the same logits
// and ids, and only the graph backend runs a step ahead (which needs the next step's graph).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/cuda_backend.h"
#include "kernels/device_info.cuh"
#include "logit_compare.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

// Same kernels both ways; the eager step plans the decode attention's splits for the context it
// has rather than the cache's capacity, so sums may be added in another order (~1e-6 relative).
// A step that skipped or misordered a kernel is off by O(1).
constexpr double kTolerance = 1e-3;

std::unique_ptr<Backend> make(bool graphs, Precision precision) {
  if (graphs)
    unsetenv("COSMOS_CUDA_GRAPHS");
  else
    setenv("COSMOS_CUDA_GRAPHS", "0", 1);  // read when the backend loads
  BackendOptions o;
  o.context_tokens = 2048;
  o.precision = precision;
  auto b = create_cuda_backend(testing::tiny_hd128_model_dir(), o);
  unsetenv("COSMOS_CUDA_GRAPHS");
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

using testing::rel_l2;

TokenId argmax(std::span<const float> row) {
  return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

using Param = std::tuple<Precision, int>;  // precision, sequences per step

class GraphsOff : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

// S prompts, then 12 steps of one token per sequence (logits back), the ids fed back from the graph
// backend's rows: every row of the eager backend equals the graph backend's.
TEST_P(GraphsOff, DecodeStepsEqualGraphReplay) {
  const auto [precision, S] = GetParam();
  auto with = make(true, precision), without = make(false, precision);
  ASSERT_TRUE(with && without);
  std::vector<SeqId> sw(S), so(S);
  std::vector<TokenId> next(S);
  for (int s = 0; s < S; ++s) {
    std::vector<TokenId> prompt(3 + 11 * s);
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>((i * 7919 + s * 131 + 5) % 150000);
    ForwardOutput a, b;
    SequenceInput in;
    in.tokens = prompt;
    in.seq = sw[s] = with->kv_cache().create_sequence();
    ASSERT_TRUE(with->forward(std::span<const SequenceInput>(&in, 1), a).ok());
    in.seq = so[s] = without->kv_cache().create_sequence();
    ASSERT_TRUE(without->forward(std::span<const SequenceInput>(&in, 1), b).ok());
    EXPECT_LT(rel_l2(b.row(0), a.row(0)), kTolerance) << "prompt " << s;
    next[s] = argmax(a.row(0));
  }
  double worst = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<SequenceInput> bw(S), bo(S);
    for (int s = 0; s < S; ++s) {
      bw[s].seq = sw[s];
      bo[s].seq = so[s];
      bw[s].tokens = bo[s].tokens = {next[s]};
    }
    ForwardOutput a, b;
    ASSERT_TRUE(with->forward(bw, a).ok());
    ASSERT_TRUE(without->forward(bo, b).ok());
    ASSERT_EQ(a.logits.size(), b.logits.size());
    for (int s = 0; s < S; ++s) {
      const double e = rel_l2(b.row(b.first_row[s]), a.row(a.first_row[s]));
      worst = std::max(worst, e);
      ASSERT_LT(e, kTolerance) << "sequence " << s << " step " << step;
      next[s] = argmax(a.row(a.first_row[s]));
    }
  }
  for (int s = 0; s < S; ++s) EXPECT_EQ(with->kv_cache().length(sw[s]), without->kv_cache().length(so[s]));
  std::printf("[ info     ] %s, %d sequences: largest relative L2 error of an eager row against graph replay %.2e\n",
              std::string(to_string(precision)).c_str(), S, worst);
}

INSTANTIATE_TEST_SUITE_P(Steps, GraphsOff,
                         ::testing::Values(Param{Precision::bf16, 1}, Param{Precision::bf16, 5},
                                           Param{Precision::int8, 1}, Param{Precision::fp8, 1},
                                           Param{Precision::int4, 1}, Param{Precision::int4, 5}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::string(to_string(std::get<0>(i.param))) + "_" +
                                  std::to_string(std::get<1>(i.param));
                         });

// Greedy ids sampled on the device, fed back for 20 steps: equal both ways; the graph backend runs
// the steps after the first ahead, the eager one never does.
TEST(GraphsOffSampling, DeviceSampledIdsEqualAndNothingRunsAhead) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  auto with = make(true, Precision::bf16), without = make(false, Precision::bf16);
  ASSERT_TRUE(with && without);
  SamplingParams greedy;
  greedy.temperature = 0;
  const SeqId sw = with->kv_cache().create_sequence(), so = without->kv_cache().create_sequence();
  std::vector<TokenId> tokens = {9707, 1879, 0, 5, 151644, 100, 42};
  int ahead_with = 0, ahead_without = 0;
  for (int i = 0; i <= 20; ++i) {
    SequenceInput a, b;
    a.seq = sw;
    b.seq = so;
    a.tokens = b.tokens = tokens;
    a.sampling = b.sampling = &greedy;
    a.sample_step = b.sample_step = static_cast<std::uint64_t>(i);
    ForwardOutput oa, ob;
    ASSERT_TRUE(with->forward(std::span<const SequenceInput>(&a, 1), oa).ok());
    ASSERT_TRUE(without->forward(std::span<const SequenceInput>(&b, 1), ob).ok());
    ASSERT_EQ(oa.sampled.size(), 1u);
    ASSERT_EQ(ob.sampled, oa.sampled) << "step " << i;
    ahead_with += oa.ran_ahead ? 1 : 0;
    ahead_without += ob.ran_ahead ? 1 : 0;
    tokens = {oa.sampled[0]};
  }
  EXPECT_EQ(ahead_without, 0);
  EXPECT_GT(ahead_with, 0) << "with graphs, the steps after the first run ahead";
}

}  // namespace
}  // namespace cosmos
