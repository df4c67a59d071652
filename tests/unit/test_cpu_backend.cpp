// The CPU reference backend against Hugging Face transformers (golden data from
// tests/golden/make_golden.py on the tiny model, float32), and its batching / cache invariants.
//
// Tolerance: |ours - HF| <= 2e-4 per logit. Both sides compute in fp32 from the same bf16 weights;
// they differ only in summation order (HF on the GPU, ours on the CPU), which moves logits of
// magnitude ~1 by ~1e-6. A real mistake (rope pairing, a missing bias, the wrong norm) moves them
// by 1e-2 or more.
#include <cmath>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/cpu_backend.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "score_logits.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

constexpr float kTol = 2e-4f;

nlohmann::json golden() {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_golden.json");
  return nlohmann::json::parse(f);
}

std::unique_ptr<Backend> tiny_backend(int context = 2048) {
  BackendOptions o;
  o.context_tokens = context;
  auto b = create_cpu_backend(testing::tiny_model_dir(), o);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

ForwardOutput run(Backend& b, const std::vector<TokenId>& ids, bool all_logits) {
  return testing::score_logits(b, ids, all_logits);
}

TEST(CpuBackend, LogitsOfEveryPositionMatchHuggingFace) {
  auto b = tiny_backend();
  ASSERT_TRUE(b);
  const auto g = golden();
  ASSERT_GE(g["cases"].size(), 3u);
  std::ifstream blob(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_last_logits.f32", std::ios::binary);
  float worst = 0.0f;
  for (const auto& c : g["cases"]) {
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    const ForwardOutput out = run(*b, ids, true);
    ASSERT_EQ(out.logits.size(), ids.size() * 152064);
    const auto& top_ids = c["fp32"]["top_ids"];
    const auto& top_logits = c["fp32"]["top_logits"];
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const auto row = out.row(static_cast<int>(p));
      for (std::size_t k = 0; k < top_ids[p].size(); ++k) {
        const float want = top_logits[p][k].get<float>();
        const float got = row[top_ids[p][k].get<int>()];
        worst = std::max(worst, std::fabs(got - want));
        ASSERT_NEAR(got, want, kTol) << "position " << p << " rank " << k << " of " << c["prompt"];
      }
      const auto argmax = std::max_element(row.begin(), row.end()) - row.begin();
      EXPECT_EQ(argmax, top_ids[p][0].get<int>()) << "position " << p;
    }
    std::vector<float> last(152064);
    blob.read(reinterpret_cast<char*>(last.data()), static_cast<std::streamsize>(last.size() * 4));
    ASSERT_TRUE(blob.good());
    const auto row = out.row(static_cast<int>(ids.size() - 1));
    for (std::size_t v = 0; v < last.size(); ++v) {
      worst = std::max(worst, std::fabs(row[v] - last[v]));
      ASSERT_NEAR(row[v], last[v], kTol) << "vocab " << v;
    }
  }
  std::printf("largest |cpu - HF fp32| logit difference: %.3g\n", worst);
}

class GreedyParity : public ::testing::TestWithParam<std::pair<const char*, float>> {};

TEST_P(GreedyParity, SixtyFourTokensEqualHuggingFace) {
  const auto [key, penalty] = GetParam();
  auto model = load_model(testing::tiny_model_dir(), Device::cpu, BackendOptions{});
  ASSERT_TRUE(model.ok()) << model.error().message;
  const auto g = golden();
  for (const auto& c : g["cases"]) {
    Session session(*model->backend, *model->tokenizer);
    GenerateOptions o;
    o.sampling.temperature = 0.0f;
    o.sampling.repetition_penalty = penalty;
    o.max_new_tokens = 64;
    o.stop_tokens = {-1};  // HF ran with min_new_tokens=64: no early stop
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    auto r = session.generate(ids, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->token_ids, c["fp32"][key].get<std::vector<TokenId>>()) << c["prompt"];
    EXPECT_EQ(r->stats.stop, StopReason::max_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Penalties, GreedyParity,
                         ::testing::Values(std::pair{"greedy", 1.0f}, std::pair{"greedy_penalty_1_05", 1.05f}));

TEST(CpuBackend, BatchOfThreeEqualsThreeSingleRuns) {
  auto b = tiny_backend();
  ASSERT_TRUE(b);
  const std::vector<std::vector<TokenId>> seqs = {{9707, 1879, 0, 5}, {151644, 872}, {100, 200, 300, 400, 500, 600, 700}};
  std::vector<ForwardOutput> single;
  for (const auto& s : seqs) single.push_back(run(*b, s, true));
  std::vector<SequenceInput> batch(3);
  for (int i = 0; i < 3; ++i) {
    batch[i].seq = b->kv_cache().create_sequence();
    batch[i].tokens = seqs[i];
    batch[i].all_logits = i != 1;  // mixed: sequence 1 asks for its last row only
  }
  ForwardOutput out;
  ASSERT_TRUE(b->forward(batch, out).ok());
  for (int i = 0; i < 3; ++i) {
    const int rows = batch[i].all_logits ? static_cast<int>(seqs[i].size()) : 1;
    for (int r = 0; r < rows; ++r) {
      const int single_row = batch[i].all_logits ? r : static_cast<int>(seqs[i].size()) - 1;
      const auto a = out.row(out.first_row[i] + r);
      const auto s = single[i].row(single_row);
      for (std::size_t v = 0; v < a.size(); v += 97) ASSERT_NEAR(a[v], s[v], 1e-5f) << "seq " << i << " row " << r;
    }
    EXPECT_EQ(b->kv_cache().length(batch[i].seq), static_cast<int>(seqs[i].size()));
  }
}

TEST(CpuBackend, CachedPrefixPlusRestEqualsWholeSequence) {
  auto b = tiny_backend();
  ASSERT_TRUE(b);
  std::vector<TokenId> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1000 + 37 * i);
  const ForwardOutput whole = run(*b, ids, true);
  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  ForwardOutput part;
  for (std::size_t begin : {0, 17, 18, 33}) {  // chunks of 17, 1, 15, 7 tokens
    const std::size_t end = begin == 33 ? ids.size() : (begin == 0 ? 17 : (begin == 17 ? 18 : 33));
    in.tokens.assign(ids.begin() + begin, ids.begin() + end);
    in.all_logits = true;
    ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), part).ok());
    for (std::size_t r = 0; r < in.tokens.size(); ++r) {
      const auto a = part.row(static_cast<int>(r));
      const auto w = whole.row(static_cast<int>(begin + r));
      for (std::size_t v = 0; v < a.size(); v += 101) ASSERT_NEAR(a[v], w[v], 1e-5f) << "position " << begin + r;
    }
  }
}

TEST(CpuBackend, EmbeddingsInPlaceOfIdsGiveTheSameLogits) {
  auto b = tiny_backend();
  ASSERT_TRUE(b);
  const std::vector<TokenId> ids = {151644, 872, 198, 9707};
  const ForwardOutput ref = run(*b, ids, false);
  // Row 872 of the embedding, as the vision tower would supply it.
  auto ckpt = Checkpoint::open(testing::tiny_model_dir());
  ASSERT_TRUE(ckpt.ok());
  const auto* embed = ckpt->find("model.embed_tokens.weight");
  const auto bytes = ckpt->data(*embed);
  std::vector<float> row(64);
  for (int i = 0; i < 64; ++i) {
    std::uint16_t h;
    std::memcpy(&h, bytes.data() + (872 * 64 + i) * 2, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    std::memcpy(&row[i], &bits, 4);
  }
  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  in.tokens = {151644, 151655 /* image pad, replaced */, 198, 9707};
  in.embedding_rows = {-1, 0, -1, -1};
  in.embeddings = row;
  ForwardOutput out;
  ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), out).ok());
  for (std::size_t v = 0; v < 152064; v += 31) ASSERT_NEAR(out.row(0)[v], ref.row(0)[v], 1e-5f);
}

TEST(CpuBackend, ErrorsLeaveTheCacheUnchanged) {
  auto b = tiny_backend(64);
  ASSERT_TRUE(b);
  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  in.tokens = {1, 2, 3};
  ForwardOutput out;
  ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), out).ok());
  in.tokens = {4, 200000};
  auto bad = b->forward(std::span<const SequenceInput>(&in, 1), out);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "backend.token");
  EXPECT_EQ(b->kv_cache().length(in.seq), 3);
  in.tokens.assign(70, 5);  // 73 tokens > 64 slots
  auto full = b->forward(std::span<const SequenceInput>(&in, 1), out);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, "kv_cache.full");
  EXPECT_EQ(full.error().category, ErrorCategory::out_of_memory);
  EXPECT_EQ(b->kv_cache().length(in.seq), 3);
}

TEST(CpuBackend, RefusesPrecisionsItDoesNotRun) {
  BackendOptions o;
  o.precision = Precision::fp16;  // the quantized precisions: test_cpu_quant.cpp
  auto b = create_cpu_backend(testing::tiny_model_dir(), o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, "backend.precision");
  // --device cuda on a machine where the GPU cannot be used is an error naming the reason; auto
  // falls back to the CPU and says why.
  auto cuda = load_model(testing::tiny_model_dir(), Device::cuda, BackendOptions{});
  if (!cuda.ok()) {
    EXPECT_EQ(cuda.error().code, "backend.cuda_unavailable");
    EXPECT_NE(cuda.error().message.find("--device cpu"), std::string::npos);
    auto any = load_model(testing::tiny_model_dir(), Device::auto_select, BackendOptions{});
    ASSERT_TRUE(any.ok());
    EXPECT_EQ(any->backend->name(), "cpu");
    EXPECT_EQ(any->device_note.rfind("using the CPU: ", 0), 0u) << any->device_note;
  } else {
    EXPECT_EQ(cuda->backend->name(), "cuda");
  }
}

}  // namespace
}  // namespace cosmos

namespace cosmos {
namespace {

TEST(CpuBackend, LoadReportsProgressAndCanBeCancelled) {
  std::vector<double> seen;
  BackendOptions o;
  o.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  auto ok = create_cpu_backend(testing::tiny_model_dir(), o);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 1.0);
  o.progress = [](double) { return false; };
  auto cancelled = create_cpu_backend(testing::tiny_model_dir(), o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, "load.cancelled");
  EXPECT_EQ(cancelled.error().category, ErrorCategory::cancelled);
}

}  // namespace
}  // namespace cosmos
