// The decode launch tuner (cosmos/decode_tuner.h): its decisions on a fake measure with a known cost
// model (which variant truly is faster, at which depth, with what noise or drift), and
// measure_decode on the CPU backend with the tiny test model.
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/cpu_backend.h"
#include "cosmos/decode_tuner.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

// A GPU made up: A costs base(depth); each entry of a spec ("P1/a=1;P2/b=1") changes it by its
// fraction at that depth; whole specs may add an interaction term (a pair that clashes).
struct FakeGpu {
  std::map<std::string, std::map<int, double>> delta;  // entry -> depth -> fraction (-0.05: 5% faster)
  std::map<std::string, double> interaction;           // whole spec -> extra fraction
  std::map<std::string, double> fluke_first;           // entry -> fraction on its first timing only
  double noise = 0;                                    // relative sigma of a seeded normal noise
  double drift = 0;                                    // added fraction of base per call made before
  double decay = 1;                                    // times multiplied by decay^(calls made before)
  int sleep_ms = 0;
  std::string fail_spec = "\x01";                      // a spec whose timing fails
  int fail_depth = -1;                                 // ... at this depth (-1: any)
  std::mt19937_64 rng{12345};
  std::vector<std::pair<std::string, int>> calls;
  std::map<std::string, int> timed;

  static double base(int depth) { return 1000.0 + 0.1 * depth; }

  double truth(const std::string& spec, int depth) const {
    double f = 0;
    std::size_t pos = 0;
    while (!spec.empty() && pos <= spec.size()) {
      const std::size_t end = std::min(spec.find(';', pos), spec.size());
      const auto it = delta.find(spec.substr(pos, end - pos));
      if (it != delta.end() && it->second.count(depth)) f += it->second.at(depth);
      pos = end + 1;
    }
    if (auto it = interaction.find(spec); it != interaction.end()) f += it->second;
    return base(depth) * (1 + f);
  }

  DecodeMeasure measure() {
    return [this](const std::string& spec, int depth) -> Result<double> {
      if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      const double drifted = base(depth) * drift * static_cast<double>(calls.size());
      calls.emplace_back(spec, depth);
      if (spec == fail_spec && (fail_depth < 0 || depth == fail_depth))
        return make_error(ErrorCategory::internal, "fake.failed", "the fake GPU fell over");
      double us = truth(spec, depth) + drifted;
      if (auto it = fluke_first.find(spec); it != fluke_first.end() && timed[spec] == 0) us += base(depth) * it->second;
      ++timed[spec];
      us *= std::pow(decay, static_cast<double>(calls.size() - 1));
      if (noise > 0) us *= 1 + std::normal_distribution<double>(0, noise)(rng);
      return us;
    };
  }
};

std::vector<const DecodeTuneRow*> rows_of(const DecodeTuneResult& r, const std::string& stage) {
  std::vector<const DecodeTuneRow*> out;
  for (const auto& row : r.rows)
    if (row.stage == stage) out.push_back(&row);
  return out;
}

std::set<std::string> specs_of(const DecodeTuneResult& r, const std::string& stage) {
  std::set<std::string> out;
  for (const auto* row : rows_of(r, stage)) out.insert(row->spec);
  return out;
}

const std::vector<std::string> kCandidates = {"P1/a=1", "P1/a=2", "P2/b=1", "P2/b=2", "P3/c=1", "P3/c=2", "P4/d=1"};

TEST(DecodeTuner, PicksTheTrulyFasterVariant) {
  FakeGpu gpu;
  gpu.delta["P2/b=2"] = {{0, -0.05}, {4096, -0.04}};
  gpu.noise = 0.002;
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P2/b=2");
  ASSERT_EQ(r->base_us.size(), 2u);
  ASSERT_EQ(r->tuned_us.size(), 2u);
  EXPECT_NEAR(r->tuned_us[0] / r->base_us[0], 0.95, 0.01);
  EXPECT_NEAR(r->tuned_us[1] / r->base_us[1], 0.96, 0.01);
  EXPECT_EQ(specs_of(*r, "confirm"), std::set<std::string>{"P2/b=2"});
  EXPECT_TRUE(rows_of(*r, "combine").empty());
  EXPECT_EQ(rows_of(*r, "screen").size(), kCandidates.size());
}

// A variant 0.5% faster (under the 1% margin) and one that was fast once by chance are not kept:
// the second one wins the screen, and confirmation's repeated pairs find it out.
TEST(DecodeTuner, RejectsVariantsWithinTheNoise) {
  FakeGpu gpu;
  gpu.delta["P1/a=2"] = {{0, -0.005}, {4096, -0.005}};
  gpu.fluke_first["P3/c=1"] = -0.05;
  gpu.noise = 0.001;
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "");
  EXPECT_EQ(specs_of(*r, "confirm"), std::set<std::string>{"P3/c=1"});  // the fluke got that far ...
  for (const auto* row : rows_of(*r, "confirm")) EXPECT_FALSE(row->kept);  // ... and no further
  // Nothing kept: A per depth, the tuned times equal to it.
  ASSERT_EQ(r->base_us.size(), 2u);
  EXPECT_NEAR(r->base_us[0], FakeGpu::base(0), 5.0);
  EXPECT_NEAR(r->base_us[1], FakeGpu::base(4096), 5.0);
  EXPECT_EQ(r->tuned_us, r->base_us);
}

// Faster at depth 0 but 5% slower at 4096: rejected, though its depth-0 gain is the largest; a
// variant 0.5% behind at 4096 (within the margin) is fine.
TEST(DecodeTuner, RejectsAVariantThatLosesAtALongerContext) {
  FakeGpu gpu;
  gpu.delta["P1/a=1"] = {{0, -0.06}, {4096, 0.05}};
  gpu.delta["P2/b=1"] = {{0, -0.03}, {4096, 0.005}};
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P2/b=1");
  bool saw = false;
  for (const auto* row : rows_of(*r, "confirm"))
    if (row->spec == "P1/a=1") {
      saw = true;
      EXPECT_FALSE(row->kept);
    }
  EXPECT_TRUE(saw);
  // Each confirmation times every depth, `rounds` pairs each.
  int p1_at_4096 = 0;
  for (const auto& [spec, depth] : gpu.calls) p1_at_4096 += spec == "P1/a=1" && depth == 4096;
  EXPECT_EQ(p1_at_4096, 3);
}

TEST(DecodeTuner, CombinesWinnersOfDifferentProducts) {
  FakeGpu gpu;
  gpu.delta["P3/c=2"] = {{0, -0.04}, {4096, -0.04}};
  gpu.delta["P1/a=1"] = {{0, -0.03}, {4096, -0.02}};
  gpu.noise = 0.001;
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P1/a=1;P3/c=2");  // the backend's candidate order
  EXPECT_NEAR(r->tuned_us[0] / r->base_us[0], 0.93, 0.01);
  EXPECT_NEAR(r->tuned_us[1] / r->base_us[1], 0.94, 0.01);
  const auto combine = rows_of(*r, "combine");
  ASSERT_EQ(combine.size(), 2u);
  EXPECT_TRUE(combine[0]->kept);
  EXPECT_EQ(combine[0]->spec, "P1/a=1;P3/c=2");
}

TEST(DecodeTuner, TakesTheBestSingleWhenTheCombinationLoses) {
  FakeGpu gpu;
  gpu.delta["P3/c=2"] = {{0, -0.03}, {4096, -0.03}};
  gpu.delta["P1/a=1"] = {{0, -0.04}, {4096, -0.02}};
  gpu.interaction["P1/a=1;P3/c=2"] = 0.10;  // together 3% slower than A
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P1/a=1");
  ASSERT_EQ(rows_of(*r, "combine").size(), 2u);
  EXPECT_FALSE(rows_of(*r, "combine")[0]->kept);
  // The result's times are the chosen variant's confirmation.
  EXPECT_NEAR(r->tuned_us[0] / r->base_us[0], 0.96, 1e-9);
  EXPECT_NEAR(r->tuned_us[1] / r->base_us[1], 0.98, 1e-9);
}

// The best single is the best in confirmation, not in the screen: P1/a=1 screened 7% faster (one
// lucky timing) but confirms at 2%; P3/c=1 screened and confirms at 4%.
TEST(DecodeTuner, TheBestSingleIsTheBestConfirmed) {
  FakeGpu gpu;
  gpu.delta["P1/a=1"] = {{0, -0.02}, {4096, -0.02}};
  gpu.fluke_first["P1/a=1"] = -0.05;
  gpu.delta["P3/c=1"] = {{0, -0.04}, {4096, -0.04}};
  gpu.interaction["P1/a=1;P3/c=1"] = 0.10;
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto confirm = rows_of(*r, "confirm");
  ASSERT_EQ(confirm.size(), 4u);
  EXPECT_EQ(confirm[0]->spec, "P1/a=1");  // confirmed first: the screen's best
  EXPECT_TRUE(confirm[0]->kept);
  EXPECT_EQ(r->spec, "P3/c=1");
  EXPECT_NEAR(r->tuned_us[0] / r->base_us[0], 0.96, 1e-9);
}

TEST(DecodeTuner, ConfirmsOnlyTheBestVariantOfEachProduct) {
  FakeGpu gpu;
  const std::vector<std::string> cands = {"P1/a=1", "P1/a=2", "P1/a=3", "P2/b=1"};
  gpu.delta["P1/a=1"] = {{0, -0.03}, {4096, -0.03}};
  gpu.delta["P1/a=2"] = {{0, -0.05}, {4096, -0.05}};
  gpu.delta["P1/a=3"] = {{0, -0.04}, {4096, -0.04}};
  auto r = tune_decode(cands, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P1/a=2");
  EXPECT_EQ(specs_of(*r, "confirm"), std::set<std::string>{"P1/a=2"});
  EXPECT_EQ(gpu.timed["P1/a=1"], 1);  // screened only
  EXPECT_EQ(gpu.timed["P1/a=3"], 1);
  EXPECT_EQ(gpu.timed["P1/a=2"], 1 + 2 * 3);
}

TEST(DecodeTuner, ConfirmsAtMostMaxConfirmBestFirst) {
  FakeGpu gpu;
  gpu.delta["P1/a=1"] = {{0, -0.02}, {4096, -0.02}};
  gpu.delta["P2/b=1"] = {{0, -0.05}, {4096, -0.05}};
  gpu.delta["P3/c=1"] = {{0, -0.04}, {4096, -0.04}};
  DecodeTuneOptions o;
  o.max_confirm = 2;
  auto r = tune_decode(kCandidates, gpu.measure(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto confirm = rows_of(*r, "confirm");
  ASSERT_EQ(confirm.size(), 4u);
  EXPECT_EQ(confirm[0]->spec, "P2/b=1");
  EXPECT_EQ(confirm[2]->spec, "P3/c=1");
  EXPECT_EQ(r->spec, "P2/b=1;P3/c=1");
}

// Two variants of one product, equally fast: the first in the backend's order is confirmed.
TEST(DecodeTuner, TiesKeepTheCandidatesOrder) {
  FakeGpu gpu;
  gpu.delta["P2/b=2"] = {{0, -0.05}, {4096, -0.05}};
  gpu.delta["P2/b=1"] = {{0, -0.05}, {4096, -0.05}};
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P2/b=1");
  EXPECT_EQ(specs_of(*r, "confirm"), std::set<std::string>{"P2/b=1"});
}

// The clock slows steadily (0.3% of A per call) and no variant is faster: compared with one early or
// one late A the candidates would look slower or faster by up to ~5%; against the A timings around
// their group (every 6) none moves by more than 2.5 calls' worth, under the margin.
TEST(DecodeTuner, DriftDoesNotMakeWinners) {
  FakeGpu gpu;
  gpu.drift = 0.003;
  std::vector<std::string> cands;
  for (int i = 0; i < 17; ++i) cands.push_back("P" + std::to_string(i) + "/x=1");
  auto r = tune_decode(cands, gpu.measure(), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "");
  EXPECT_TRUE(rows_of(*r, "confirm").empty());
  // The screen's A: first, after every 6 candidates, and closing the last (partial) group.
  std::vector<std::size_t> a_calls;
  for (std::size_t i = 0; i < gpu.calls.size(); ++i)
    if (gpu.calls[i].first.empty() && gpu.calls[i].second == 0) a_calls.push_back(i);
  EXPECT_EQ(a_calls, (std::vector<std::size_t>{0, 7, 14, 20}));
  // Each candidate against the mean of the A just before and just after its group.
  const auto screen = rows_of(*r, "screen");
  ASSERT_EQ(screen.size(), 17u);
  auto a_at = [&](std::size_t call) { return FakeGpu::base(0) * (1 + gpu.drift * static_cast<double>(call)); };
  EXPECT_NEAR(screen[0]->base_us, (a_at(0) + a_at(7)) / 2, 1e-9);
  EXPECT_NEAR(screen[5]->base_us, (a_at(0) + a_at(7)) / 2, 1e-9);
  EXPECT_NEAR(screen[6]->base_us, (a_at(7) + a_at(14)) / 2, 1e-9);
  EXPECT_NEAR(screen[16]->base_us, (a_at(14) + a_at(20)) / 2, 1e-9);
  // Nothing kept: one A timing at 4096 after the screen.
  EXPECT_EQ(gpu.calls.back(), (std::pair<std::string, int>{"", 4096}));
  EXPECT_EQ(r->measurements, 22);
}

// The clock speeds up by 1.5% per call (times falling) and no variant is faster. The screen's last
// candidate of each group looks ~1.5% faster than its A's, so it reaches confirmation; there the
// order alternates (A B, B A, A B, B A: both at the same mean position), whereas A always first
// would put B a call later, 1.5% "faster" at every depth, and keep it.
TEST(DecodeTuner, AlternatingPairsCancelDriftInConfirmation) {
  FakeGpu gpu;
  gpu.decay = 0.985;
  DecodeTuneOptions o;
  o.rounds = 4;
  o.recheck_every = 3;
  auto r = tune_decode({"P1/a=1", "P2/b=1", "P3/c=1"}, gpu.measure(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(rows_of(*r, "confirm").empty());  // drift made a screen winner
  EXPECT_EQ(r->spec, "");
  // A, B, B, A, A, B, B, A at the first depth.
  std::vector<std::string> order;
  for (std::size_t i = 5; i < 13; ++i) order.push_back(gpu.calls[i].first);
  const std::string b = gpu.calls[5].first.empty() ? gpu.calls[6].first : gpu.calls[5].first;
  EXPECT_EQ(order, (std::vector<std::string>{"", b, b, "", "", b, b, ""}));
}

TEST(DecodeTuner, BudgetStopsTheScreenButStillTimesTheClosingA) {
  FakeGpu gpu;
  gpu.sleep_ms = 20;
  std::vector<std::string> cands;
  for (int i = 0; i < 12; ++i) cands.push_back("P" + std::to_string(i) + "/x=1");
  DecodeTuneOptions o;
  o.budget_s = 0.05;  // the first A takes 20 ms: at least one candidate starts, far from all 12
  auto r = tune_decode(cands, gpu.measure(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->budget_hit);
  const auto screen = rows_of(*r, "screen");
  ASSERT_GE(screen.size(), 1u);
  ASSERT_LT(screen.size(), 6u);
  // Calls: A, the screened candidates, the closing A, then A at 4096 (nothing kept).
  ASSERT_EQ(gpu.calls.size(), screen.size() + 3);
  EXPECT_EQ(gpu.calls[screen.size() + 1], (std::pair<std::string, int>{"", 0}));
  EXPECT_EQ(gpu.calls[screen.size()].first, cands[screen.size() - 1]);

  FakeGpu unlimited;
  auto full = tune_decode(cands, unlimited.measure(), {});
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->budget_hit);
  EXPECT_EQ(rows_of(*full, "screen").size(), 12u);
}

TEST(DecodeTuner, ProgressReturningFalseCancels) {
  FakeGpu gpu;
  std::vector<std::string> lines;
  DecodeTuneOptions o;
  o.progress = [&](const std::string& line) {
    lines.push_back(line);
    return lines.size() < 3;
  };
  auto r = tune_decode(kCandidates, gpu.measure(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().category, ErrorCategory::cancelled);
  EXPECT_EQ(r.error().code, "tuning.cancelled");
  EXPECT_EQ(gpu.calls.size(), 3u);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "screen A @0: 1,000.0 us");
  EXPECT_EQ(lines[1], "screen P1/a=1 @0: 1,000.0 us");
}

TEST(DecodeTuner, AFailingMeasurementNamesItsSpecAndDepth) {
  FakeGpu gpu;
  gpu.fail_spec = "P2/b=1";
  auto r = tune_decode(kCandidates, gpu.measure(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "fake.failed");
  EXPECT_NE(r.error().message.find("P2/b=1"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("the fake GPU fell over"), std::string::npos);
  EXPECT_EQ(gpu.calls.back().first, "P2/b=1");

  // A's timing at 4096 in confirmation.
  FakeGpu deep;
  deep.delta["P1/a=1"] = {{0, -0.05}, {4096, -0.05}};
  deep.fail_spec = "";
  deep.fail_depth = 4096;
  auto d = tune_decode(kCandidates, deep.measure(), {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, "fake.failed");
  EXPECT_NE(d.error().message.find("depth 4096"), std::string::npos) << d.error().message;
  EXPECT_NE(d.error().message.find("automatic plan"), std::string::npos) << d.error().message;
}

TEST(DecodeTuner, BadOptionsAreRejectedBeforeAnyTiming) {
  FakeGpu gpu;
  DecodeTuneOptions no_depths;
  no_depths.depths.clear();
  DecodeTuneOptions no_rounds;
  no_rounds.rounds = 0;
  DecodeTuneOptions no_recheck;
  no_recheck.recheck_every = 0;
  for (const auto& o : {no_depths, no_rounds, no_recheck}) {
    auto r = tune_decode(kCandidates, gpu.measure(), o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "tuning.options");
    EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  }
  EXPECT_TRUE(gpu.calls.empty());
}

// Every measurement counted, every variant summarized: 3 depths, 2 kept variants, a combination.
TEST(DecodeTuner, CountsEveryMeasurementAndSummarizesEveryVariant) {
  FakeGpu gpu;
  gpu.delta["P1/a=2"] = {{0, -0.04}, {512, -0.04}, {4096, -0.04}};
  gpu.delta["P4/d=1"] = {{0, -0.03}, {512, -0.03}, {4096, -0.03}};
  gpu.noise = 0.001;
  DecodeTuneOptions o;
  o.depths = {0, 512, 4096};
  o.rounds = 2;
  o.recheck_every = 3;
  int progress_calls = 0;
  o.progress = [&](const std::string&) { return ++progress_calls > 0; };
  auto r = tune_decode(kCandidates, gpu.measure(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "P1/a=2;P4/d=1");
  // Screen: 7 candidates + A at the start and after groups of 3, 3, 1; then 3 confirmations
  // (2 variants + the pair) of 3 depths x 2 rounds x 2 timings.
  EXPECT_EQ(r->measurements, 7 + 4 + 3 * 3 * 2 * 2);
  EXPECT_EQ(r->measurements, static_cast<int>(gpu.calls.size()));
  EXPECT_EQ(progress_calls, r->measurements);
  EXPECT_EQ(rows_of(*r, "screen").size(), 7u);
  EXPECT_EQ(rows_of(*r, "confirm").size(), 6u);
  EXPECT_EQ(rows_of(*r, "combine").size(), 3u);
  ASSERT_EQ(r->base_us.size(), 3u);
  ASSERT_EQ(r->tuned_us.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r->base_us[i], FakeGpu::base(o.depths[i]), 5.0);
}

TEST(DecodeTuner, NoCandidatesTimesAAtEveryDepth) {
  FakeGpu gpu;
  DecodeTuneOptions o;
  o.depths = {0, 1024, 4096};
  auto r = tune_decode({}, gpu.measure(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec, "");
  EXPECT_EQ(r->base_us, (std::vector<double>{FakeGpu::base(0), FakeGpu::base(1024), FakeGpu::base(4096)}));
  EXPECT_EQ(r->tuned_us, r->base_us);
  EXPECT_EQ(r->measurements, 3);
  EXPECT_FALSE(r->budget_hit);
}

// --- measure_decode on the CPU backend -----------------------------------------------------------

std::unique_ptr<Backend> tiny_backend(int context) {
  BackendOptions o;
  o.context_tokens = context;
  o.threads = 2;
  auto b = create_cpu_backend(testing::tiny_model_dir(), o);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

TEST(MeasureDecode, TimesTheCpuBackendAndFreesItsSequence) {
  auto b = tiny_backend(256);
  ASSERT_TRUE(b);
  const int free_before = b->kv_cache().free_blocks();
  for (int depth : {0, 40}) {
    auto us = measure_decode(*b, "", depth, 4, 1);
    ASSERT_TRUE(us.ok()) << us.error().message;
    EXPECT_GT(*us, 0.0);
    EXPECT_EQ(b->kv_cache().free_blocks(), free_before) << "depth " << depth;
  }
  EXPECT_FALSE(b->kv_cache().valid(0));
}

TEST(MeasureDecode, ASpecOnTheCpuBackendIsUnsupported) {
  auto b = tiny_backend(256);
  ASSERT_TRUE(b);
  const int free_before = b->kv_cache().free_blocks();
  auto us = measure_decode(*b, "64x64/loads=4", 0, 2, 0);
  ASSERT_FALSE(us.ok());
  EXPECT_EQ(us.error().code, "tuning.unsupported");
  EXPECT_EQ(b->kv_cache().free_blocks(), free_before);
}

TEST(MeasureDecode, AContextTooSmallSaysHowManyTokensItNeeds) {
  auto b = tiny_backend(64);
  ASSERT_TRUE(b);
  const int free_before = b->kv_cache().free_blocks();
  auto us = measure_decode(*b, "", 100, 8, 2);
  ASSERT_FALSE(us.ok());
  EXPECT_EQ(us.error().code, "tuning.context");
  EXPECT_EQ(us.error().category, ErrorCategory::bad_input);
  EXPECT_NE(us.error().message.find("110"), std::string::npos) << us.error().message;
  EXPECT_EQ(b->kv_cache().free_blocks(), free_before);
}

// A backend that samples on the device (emulated over the CPU backend) and can fail its n-th
// forward: measure_decode asks for greedy device sampling, and frees its sequence on a failure.
class DeviceSamplingBackend : public Backend {
 public:
  explicit DeviceSamplingBackend(Backend& inner) : inner_(inner) {}
  std::string_view name() const override { return "fake-device"; }
  std::string device_name() const override { return "fake"; }
  Precision precision() const override { return inner_.precision(); }
  const ModelConfig& config() const override { return inner_.config(); }
  KvCache& kv_cache() override { return inner_.kv_cache(); }
  BackendMemory memory() const override { return inner_.memory(); }
  bool samples_on_device() const override { return true; }
  Status forward(std::span<const SequenceInput> batch, ForwardOutput& out) override {
    ++forwards;
    if (forwards == fail_at) return make_error(ErrorCategory::internal, "fake.forward", "the fake device failed");
    std::vector<SequenceInput> plain(batch.begin(), batch.end());
    for (auto& in : plain) {
      if (!in.sampling || !in.sampling->greedy()) ++not_greedy;
      in.sampling = nullptr;
    }
    if (auto st = inner_.forward(plain, out); !st) return st;
    const auto row = out.row(0);
    out.sampled = {static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin())};
    out.logits.clear();
    return ok_status();
  }
  int forwards = 0;
  int fail_at = -1;
  int not_greedy = 0;

 private:
  Backend& inner_;
};

TEST(MeasureDecode, SamplesOnTheDeviceAndFreesTheSequenceOnErrors) {
  auto cpu = tiny_backend(256);
  ASSERT_TRUE(cpu);
  DeviceSamplingBackend b(*cpu);
  const int free_before = b.kv_cache().free_blocks();
  auto us = measure_decode(b, "", 20, 3, 2);
  ASSERT_TRUE(us.ok()) << us.error().message;
  EXPECT_EQ(b.forwards, 1 + 2 + 3);  // the prompt, the warmup, the timed steps
  EXPECT_EQ(b.not_greedy, 0);
  EXPECT_EQ(b.kv_cache().free_blocks(), free_before);

  for (int fail_at : {3, 5}) {  // a warmup step, then a timed one
    b.forwards = 0;
    b.fail_at = fail_at;
    auto failed = measure_decode(b, "", 20, 3, 2);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code, "fake.forward");
    EXPECT_NE(failed.error().message.find("depth 20"), std::string::npos) << failed.error().message;
    EXPECT_EQ(b.kv_cache().free_blocks(), free_before);
  }
}

}  // namespace
}  // namespace cosmos
