// Decode launch tuning on the GPU (engine/src/cuda/cuda_decode_tuning.cpp, cosmos/decode_tuner.h):
// - every one-knob variant of every product is either taken, and then the decode steps run and
//   give the automatic plan's logits within accumulation tolerance, or refused as
//   tuning.inconsistent (the knobs in force unchanged, and the variant not offered as a candidate);
// - bad specs are refused (tuning.spec), bf16 has no knobs (tuning.unsupported);
// - a tuning saved for the backend's identity is applied at the next load, and not applied when
//   the file is damaged, made for another identity, or COSMOS_DECODE_TUNING=0;
// - a second backend's knobs do not leak into the first one's steps;
// - tune_decode with measure_decode runs on the GPU and returns a spec the backend takes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/cuda_backend.h"
#include "cosmos/decode_tuner.h"
#include "cosmos/tune_cache.h"
#include "kernels/device_info.cuh"
#include "logit_compare.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

// A variant changes the order of each row's fp32 sums (rows per item, loads per step, integer dot
// products or tensor cores for int4): ~1e-6 relative per product. A variant that computed another
// product, or skipped one, is off by O(1).
constexpr double kTolerance = 2e-3;

std::unique_ptr<Backend> make(Precision precision, const fs::path& tune_dir = {}) {
  BackendOptions o;
  o.context_tokens = 1024;
  o.precision = precision;
  o.tune_cache_dir = tune_dir;
  auto b = create_cuda_backend(testing::tiny_hd128_model_dir(), o);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

using testing::rel_l2;

// A 9-token prompt, then 4 one-token steps with logits back; every step's logits in order. A failed
// forward() fails the test and returns what ran.
std::vector<std::vector<float>> decode(Backend& b) {
  std::vector<std::vector<float>> rows;
  const SeqId seq = b.kv_cache().create_sequence();
  std::vector<TokenId> tokens = {11, 4096, 77, 150000, 3, 9000, 12345, 42, 600};
  for (int step = 0; step < 5; ++step) {
    SequenceInput in;
    in.seq = seq;
    in.tokens = tokens;
    ForwardOutput out;
    auto st = b.forward(std::span<const SequenceInput>(&in, 1), out);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    if (!st.ok()) break;
    const auto row = out.row(0);
    rows.emplace_back(row.begin(), row.end());
    tokens = {static_cast<TokenId>((step * 7919 + 101) % 150000)};
  }
  b.kv_cache().free_sequence(seq);
  return rows;
}

// Every single-knob spec the grammar allows for every product of the model.
std::vector<std::string> every_variant(const Backend& b) {
  const ModelConfig& c = b.config();
  const int shapes[][2] = {{c.q_dim() + 2 * c.kv_dim(), c.hidden_size},
                           {c.hidden_size, c.q_dim()},
                           {2 * c.intermediate_size, c.hidden_size},
                           {c.hidden_size, c.intermediate_size},
                           {c.vocab_size, c.hidden_size}};
  const char* values[] = {"rows=1", "rows=2", "rows=4", "loads=4", "loads=7", "loads=8", "pipeline=0", "pipeline=1",
                          "stage=0", "stage=1", "l2=0", "l2=1", "wide=0", "wide=1", "mma=0", "mma=2", "mma=4"};
  std::vector<std::string> out;
  for (const auto& s : shapes)
    for (const char* v : values) out.push_back(std::to_string(s[0]) + "x" + std::to_string(s[1]) + "/" + v);
  return out;
}

class DecodeTuning : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
    unsetenv("COSMOS_QGEMV_TUNING");
    unsetenv("COSMOS_DECODE_TUNING");
    dir_ = fs::temp_directory_path() / ("cosmos_decode_tuning_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_P(DecodeTuning, EveryVariantIsTakenWithTheSameLogitsOrRefused) {
  auto b = make(GetParam());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->decode_tuning(), "");
  const auto want = decode(*b);
  ASSERT_EQ(want.size(), 5u);
  const std::vector<std::string> candidates = b->decode_tuning_candidates();
  EXPECT_FALSE(candidates.empty());
  int taken = 0;
  for (const std::string& spec : every_variant(*b)) {
    SCOPED_TRACE(spec);
    auto st = b->set_decode_tuning(spec);
    if (!st) {
      EXPECT_EQ(st.error().code, "tuning.inconsistent") << st.error().message;
      EXPECT_EQ(b->decode_tuning(), "");
      EXPECT_EQ(std::count(candidates.begin(), candidates.end(), spec), 0);
      continue;
    }
    ++taken;
    EXPECT_EQ(b->decode_tuning(), spec);
    const auto got = decode(*b);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LT(rel_l2(got[i], want[i]), kTolerance) << "step " << i;
    ASSERT_TRUE(b->set_decode_tuning(""));
  }
  // Every candidate is one of the variants taken.
  EXPECT_GE(taken, static_cast<int>(candidates.size()));
  // Several products at once.
  if (candidates.size() >= 2) {
    const std::string both = candidates.front() + ";" + candidates.back();
    ASSERT_TRUE(b->set_decode_tuning(both));
    const auto got = decode(*b);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LT(rel_l2(got[i], want[i]), kTolerance) << "step " << i;
  }
}

TEST_P(DecodeTuning, BadSpecsAreRefusedAndChangeNothing) {
  auto b = make(GetParam());
  ASSERT_TRUE(b);
  const auto candidates = b->decode_tuning_candidates();
  ASSERT_FALSE(candidates.empty());
  ASSERT_TRUE(b->set_decode_tuning(candidates.front()));
  for (const char* bad : {"qkv/rows=3", "nonsense", "o/colour=1", "12x/rows=1"}) {
    auto st = b->set_decode_tuning(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, "tuning.spec");
    EXPECT_EQ(b->decode_tuning(), candidates.front());
  }
}

TEST_P(DecodeTuning, SavedTuningIsAppliedAtTheNextLoadWhenItMatches) {
  std::string spec, identity;
  fs::path file;
  {
    auto b = make(GetParam(), dir_);
    ASSERT_TRUE(b);
    const auto candidates = b->decode_tuning_candidates();
    ASSERT_FALSE(candidates.empty());
    spec = candidates.back();
    identity = b->decode_tuning_identity();
    file = b->decode_tuning_file();
    EXPECT_NE(identity.find(b->device_name()), std::string::npos);
    EXPECT_EQ(file.parent_path(), dir_);
  }
  ASSERT_TRUE(write_decode_tune(file, identity, DecodeTuneRecord{spec, {{0, 100.0, 95.0}}}));
  {
    auto b = make(GetParam(), dir_);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->decode_tuning(), spec);
    EXPECT_EQ(decode(*b).size(), 5u);
  }
  setenv("COSMOS_DECODE_TUNING", "0", 1);
  {
    auto b = make(GetParam(), dir_);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->decode_tuning(), "");
  }
  unsetenv("COSMOS_DECODE_TUNING");
  // Another identity (another GPU, or plans a kernel change moved): not applied.
  ASSERT_TRUE(write_decode_tune(file, identity + " elsewhere", DecodeTuneRecord{spec, {}}));
  {
    auto b = make(GetParam(), dir_);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->decode_tuning(), "");
  }
  // A damaged file: not applied, and the load still succeeds.
  std::ofstream(file, std::ios::trunc) << "cosmos-decode-tune 1\nidentity x\nspec y\nxxh3 0\n";
  {
    auto b = make(GetParam(), dir_);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->decode_tuning(), "");
  }
}

// The knobs are process-wide in the kernels: a second backend that loads (automatic plan) must not
// change the first one's steps, and the first must not leave its knobs in the second's.
TEST_P(DecodeTuning, TwoBackendsKeepTheirOwnKnobs) {
  auto a = make(GetParam());
  ASSERT_TRUE(a);
  const auto candidates = a->decode_tuning_candidates();
  ASSERT_FALSE(candidates.empty());
  ASSERT_TRUE(a->set_decode_tuning(candidates.front()));
  const auto want_a = decode(*a);
  auto b = make(GetParam());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->decode_tuning(), "");
  const auto want_b = decode(*b);
  const auto again_a = decode(*a);
  const auto again_b = decode(*b);
  ASSERT_EQ(again_a.size(), want_a.size());
  ASSERT_EQ(again_b.size(), want_b.size());
  // The same plan replays the same kernels: equal bit for bit.
  for (std::size_t i = 0; i < want_a.size(); ++i) {
    EXPECT_EQ(again_a[i], want_a[i]) << "step " << i;
    EXPECT_EQ(again_b[i], want_b[i]) << "step " << i;
  }
  EXPECT_EQ(a->decode_tuning(), candidates.front());
}

TEST_P(DecodeTuning, TunerRunsOnTheGpuAndItsChoiceIsTaken) {
  auto b = make(GetParam());
  ASSERT_TRUE(b);
  const int free_blocks = b->kv_cache().free_blocks();
  auto candidates = b->decode_tuning_candidates();
  ASSERT_FALSE(candidates.empty());
  candidates.resize(std::min<std::size_t>(candidates.size(), 4));
  DecodeTuneOptions o;
  o.depths = {0, 300};
  o.rounds = 1;
  const auto measure = [&](const std::string& spec, int depth) { return measure_decode(*b, spec, depth, 16, 2); };
  auto r = tune_decode(candidates, measure, o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->base_us.size(), 2u);
  ASSERT_EQ(r->tuned_us.size(), 2u);
  for (double us : r->base_us) EXPECT_GT(us, 0.0);
  EXPECT_GE(r->measurements, static_cast<int>(candidates.size()) + 2);
  EXPECT_TRUE(b->set_decode_tuning(r->spec)) << r->spec;
  EXPECT_EQ(b->kv_cache().free_blocks(), free_blocks);  // every timing's sequence freed
}

TEST(DecodeTuningBf16, HasNoKnobs) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  auto b = make(Precision::bf16, fs::temp_directory_path());
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->decode_tuning_candidates().empty());
  EXPECT_TRUE(b->decode_tuning_file().empty());
  EXPECT_TRUE(b->set_decode_tuning(""));
  auto st = b->set_decode_tuning("qkv/rows=1");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, "tuning.unsupported");
}

INSTANTIATE_TEST_SUITE_P(Quantized, DecodeTuning, ::testing::Values(Precision::int8, Precision::fp8, Precision::int4),
                         [](const ::testing::TestParamInfo<Precision>& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace cosmos
