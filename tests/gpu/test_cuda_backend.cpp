// The CUDA backend on the tiny model: logits against transformers' float32 golden data and against
// the CPU backend, 64 greedy tokens equal to transformers', batching and chunked prefill equal to
// single runs. Tolerance 2e-4 as for the CPU (fp32 arithmetic on both sides; see test_cpu_backend).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "cosmos/test_model.h"
#include "kernels/device_info.cuh"
#include "tiny_model.h"

namespace cosmos {
namespace {

constexpr float kTol = 2e-4f;

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
  static std::unique_ptr<Backend> gpu(int context = 2048) {
    BackendOptions o;
    o.context_tokens = context;
    auto b = create_cuda_backend(testing::tiny_model_dir(), o);
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
    return b.ok() ? std::move(*b) : nullptr;
  }
  static ForwardOutput run(Backend& b, const std::vector<TokenId>& ids) {
    SequenceInput in;
    in.seq = b.kv_cache().create_sequence();
    in.tokens = ids;
    in.all_logits = true;
    ForwardOutput out;
    auto st = b.forward(std::span<const SequenceInput>(&in, 1), out);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    b.kv_cache().free_sequence(in.seq);
    return out;
  }
  static nlohmann::json golden() {
    std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_golden.json");
    return nlohmann::json::parse(f);
  }
};

TEST_F(CudaBackendTest, LogitsMatchHuggingFaceAndTheCpu) {
  auto b = gpu();
  ASSERT_TRUE(b);
  BackendOptions o;
  auto cpu = create_cpu_backend(testing::tiny_model_dir(), o);
  ASSERT_TRUE(cpu.ok());
  float worst_hf = 0, worst_cpu = 0;
  const auto g = golden();  // keep the document alive for the loop
  ASSERT_GE(g["cases"].size(), 4u);
  std::size_t compared = 0;
  for (const auto& c : g["cases"]) {
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    const ForwardOutput out = run(*b, ids);
    ASSERT_EQ(out.logits.size(), ids.size() * 152064);
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const auto row = out.row(static_cast<int>(p));
      for (std::size_t k = 0; k < 20; ++k) {
        const float want = c["fp32"]["top_logits"][p][k].get<float>();
        const float got = row[c["fp32"]["top_ids"][p][k].get<int>()];
        worst_hf = std::max(worst_hf, std::fabs(got - want));
        ++compared;
        ASSERT_NEAR(got, want, kTol) << "position " << p << " rank " << k;
      }
    }
    SequenceInput in;
    in.seq = (*cpu)->kv_cache().create_sequence();
    in.tokens = ids;
    in.all_logits = true;
    ForwardOutput ref;
    ASSERT_TRUE((*cpu)->forward(std::span<const SequenceInput>(&in, 1), ref).ok());
    for (std::size_t i = 0; i < ref.logits.size(); ++i) worst_cpu = std::max(worst_cpu, std::fabs(ref.logits[i] - out.logits[i]));
    (*cpu)->kv_cache().free_sequence(in.seq);
  }
  EXPECT_GT(compared, 200u);
  EXPECT_LT(worst_cpu, kTol);
  std::printf("largest |cuda - HF fp32| %.3g, |cuda - cpu| %.3g\n", worst_hf, worst_cpu);
}

TEST_F(CudaBackendTest, GreedyEqualsHuggingFaceFor64Tokens) {
  auto model = load_model(testing::tiny_model_dir(), Device::cuda, BackendOptions{});
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_EQ(model->backend->name(), "cuda");
  const auto g = golden();
  ASSERT_GE(g["cases"].size(), 4u);
  for (const auto& c : g["cases"]) {
    for (auto [key, penalty] : {std::pair{"greedy", 1.0f}, std::pair{"greedy_penalty_1_05", 1.05f}}) {
      Session s(*model->backend, *model->tokenizer);
      GenerateOptions o;
      o.sampling.temperature = 0;
      o.sampling.repetition_penalty = penalty;
      o.max_new_tokens = 64;
      o.stop_tokens = {-1};
      auto r = s.generate(c["ids"].get<std::vector<TokenId>>(), o);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->token_ids, c["fp32"][key].get<std::vector<TokenId>>()) << key << ": " << c["prompt"];
    }
  }
}

TEST_F(CudaBackendTest, BatchAndChunksEqualSingleRuns) {
  auto b = gpu();
  ASSERT_TRUE(b);
  const std::vector<std::vector<TokenId>> seqs = {{9707, 1879, 0, 5}, {151644}, {100, 200, 300, 400, 500, 600, 700}};
  std::vector<ForwardOutput> single;
  for (const auto& s : seqs) single.push_back(run(*b, s));
  std::vector<SequenceInput> batch(3);
  for (int i = 0; i < 3; ++i) {
    batch[i].seq = b->kv_cache().create_sequence();
    batch[i].tokens = seqs[i];
    batch[i].all_logits = true;
  }
  ForwardOutput out;
  ASSERT_TRUE(b->forward(batch, out).ok());
  for (int i = 0; i < 3; ++i)
    for (std::size_t r = 0; r < seqs[i].size(); ++r)
      for (std::size_t v = 0; v < 152064; v += 61)
        ASSERT_NEAR(out.row(out.first_row[i] + static_cast<int>(r))[v], single[i].row(static_cast<int>(r))[v], 1e-4f);
  // Decode steps one token at a time after a prefill equal the whole sequence's logits.
  std::vector<TokenId> ids;
  for (int i = 0; i < 24; ++i) ids.push_back(2000 + 31 * i);
  const ForwardOutput whole = run(*b, ids);
  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  in.all_logits = true;
  for (std::size_t p = 0; p < ids.size(); p += (p < 16 ? 16 : 1)) {
    const std::size_t end = p < 16 ? 16 : p + 1;
    in.tokens.assign(ids.begin() + p, ids.begin() + end);
    ForwardOutput part;
    ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), part).ok());
    for (std::size_t r = 0; r < in.tokens.size(); ++r)
      for (std::size_t v = 0; v < 152064; v += 53)
        ASSERT_NEAR(part.row(static_cast<int>(r))[v], whole.row(static_cast<int>(p + r))[v], 1e-4f) << "position " << p + r;
  }
}

TEST_F(CudaBackendTest, ErrorsAreClearAndLeaveTheCacheUnchanged) {
  auto b = gpu(64);
  ASSERT_TRUE(b);
  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  in.tokens = {1, 2, 3};
  ForwardOutput out;
  ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), out).ok());
  in.tokens = {4, 999999};
  auto bad = b->forward(std::span<const SequenceInput>(&in, 1), out);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "backend.token");
  in.tokens.assign(80, 5);
  auto full = b->forward(std::span<const SequenceInput>(&in, 1), out);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, "kv_cache.full");
  EXPECT_EQ(b->kv_cache().length(in.seq), 3);
  BackendOptions o;
  o.precision = Precision::int8;
  auto q8 = create_cuda_backend(testing::tiny_model_dir(), o);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.error().code, "backend.precision");
}

// The 7B attention shape (head_dim 128, grouped heads) on two narrow layers: prefill, then decode
// steps through the captured graph and the flash-decoding attention, against the CPU backend.
TEST_F(CudaBackendTest, DecodeAttentionPathMatchesTheCpu) {
  const auto dir = std::filesystem::temp_directory_path() / ("cosmos_hd128_" + std::to_string(::getpid()));
  TestModelOptions mo;
  mo.preset = "tiny-hd128";
  mo.seed = 3;
  mo.shards = 1;
  mo.out_dir = dir;
  ASSERT_TRUE(make_test_model(mo).ok());
  BackendOptions o;
  o.context_tokens = 1024;
  auto gpu_b = create_cuda_backend(dir, o);
  auto cpu_b = create_cpu_backend(dir, o);
  ASSERT_TRUE(gpu_b.ok()) << gpu_b.error().message;
  ASSERT_TRUE(cpu_b.ok()) << cpu_b.error().message;
  std::vector<TokenId> ids;
  for (int i = 0; i < 150; ++i) ids.push_back(1000 + 17 * i);
  SequenceInput gs, cs;
  gs.seq = (*gpu_b)->kv_cache().create_sequence();
  cs.seq = (*cpu_b)->kv_cache().create_sequence();
  float worst = 0;
  for (int step = 0; step < 12; ++step) {
    gs.tokens = cs.tokens = step == 0 ? ids : std::vector<TokenId>{static_cast<TokenId>(500 + 31 * step)};
    ForwardOutput go, co;
    ASSERT_TRUE((*gpu_b)->forward(std::span<const SequenceInput>(&gs, 1), go).ok());
    ASSERT_TRUE((*cpu_b)->forward(std::span<const SequenceInput>(&cs, 1), co).ok());
    ASSERT_EQ(go.logits.size(), co.logits.size());
    for (std::size_t v = 0; v < co.logits.size(); ++v) worst = std::max(worst, std::fabs(go.logits[v] - co.logits[v]));
  }
  EXPECT_LT(worst, kTol);
  std::printf("tiny-hd128: largest |cuda - cpu| over prefill + 11 decode steps: %.3g\n", worst);
  std::filesystem::remove_all(dir);
}

TEST_F(CudaBackendTest, LoadReportsProgressAndCanBeCancelled) {
  std::vector<double> seen;
  BackendOptions o;
  o.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  ASSERT_TRUE(create_cuda_backend(testing::tiny_model_dir(), o).ok());
  ASSERT_GE(seen.size(), 10u);  // one step per tensor
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 1.0);
  int calls = 0;
  o.progress = [&](double) { return ++calls < 5; };  // cancel part-way
  auto cancelled = create_cuda_backend(testing::tiny_model_dir(), o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, "load.cancelled");
  // The GPU memory of the cancelled load was given back: a full load still fits and works.
  auto again = create_cuda_backend(testing::tiny_model_dir(), BackendOptions{});
  ASSERT_TRUE(again.ok());
}

}  // namespace
}  // namespace cosmos
