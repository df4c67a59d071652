// The CUDA backend on the tiny models. Reference math (fp32 KV cache, fp32 matmuls): logits against
// transformers' float32 golden data and the CPU backend, 64 greedy tokens (sampled on the GPU)
// equal to transformers', batching and chunked prefill equal to single runs; tolerance 2e-4 as for
// the CPU (fp32 arithmetic on both sides; see test_cpu_backend). The fast path (bf16 KV cache,
// tensor-core GEMMs and flash attention; bf16 and fp16 weights) against reference math within a
// bound scaled to bf16; random weights generated on the GPU equal the files; device sampling; the
// GEMM tuning cache.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "cosmos/test_model.h"
#include "kernels/device_info.cuh"
#include "kernels/gemm_swiglu.cuh"
#include "score_logits.h"
#include "step_compare.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

constexpr float kTol = 2e-4f;
// Fast path against reference math: bf16 rounds activations before each GEMM and K/V in the cache
// (relative 2^-9 each); over a few layers the logits move by well under 3% of the largest logit.
constexpr float kBf16Rel = 3e-2f;

// Largest |a - b| over all values, and the largest |b|.
std::pair<float, float> max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0, m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return {d, m};
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
  static std::unique_ptr<Backend> gpu(int context = 2048, bool reference = true) {
    BackendOptions o;
    o.context_tokens = context;
    o.reference_math = reference;
    auto b = create_cuda_backend(testing::tiny_model_dir(), o);
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
    return b.ok() ? std::move(*b) : nullptr;
  }
  static ForwardOutput run(Backend& b, const std::vector<TokenId>& ids) { return testing::score_logits(b, ids); }
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
  BackendOptions bo;
  bo.reference_math = true;
  auto model = load_model(testing::tiny_model_dir(), Device::cuda, bo);
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
  o.reference_math = true;  // the fp32 reference runs bf16 weights only
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
  auto cpu_b = create_cpu_backend(dir, o);
  ASSERT_TRUE(cpu_b.ok()) << cpu_b.error().message;
  // Reference math within fp32 tolerance; the fast path (flash prefill attention, bf16 KV cache,
  // tensor-core GEMMs) within the bf16 bound of FastPathStaysWithinBf16OfReferenceMath.
  for (bool reference : {true, false}) {
    o.reference_math = reference;
    auto gpu_b = create_cuda_backend(dir, o);
    ASSERT_TRUE(gpu_b.ok()) << gpu_b.error().message;
    const auto [worst, scale] = testing::prefill_then_decode_diff(**gpu_b, **cpu_b);
    if (reference)
      EXPECT_LT(worst, kTol);
    else
      EXPECT_LT(worst, kBf16Rel * scale);
    std::printf("tiny-hd128 %s: largest |cuda - cpu| over prefill + 11 decode steps: %.3g (max |logit| %.3g)\n",
                reference ? "reference math" : "fast path", worst, scale);
  }
  std::filesystem::remove_all(dir);
}

// The GEMM tuning cache: the first prompt of 256+ tokens tunes and writes the file; a second
// backend restores it and does not tune (so does not rewrite the file); a damaged file is tuned
// again and rewritten, with the same logits.
TEST_F(CudaBackendTest, TuningCacheIsWrittenAndRestored) {
  const fs::path dir = fs::temp_directory_path() / ("cosmos_tune_cache_gpu_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<TokenId> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(1000 + 7 * i);
  auto make = [&] {
    BackendOptions o;
    o.context_tokens = 1024;
    o.tune_cache_dir = dir;
    auto b = create_cuda_backend(testing::tiny_model_dir(), o);
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
    return b.ok() ? std::move(*b) : nullptr;
  };
  auto files = [&] {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
    return out;
  };
  ForwardOutput first;
  {
    auto b = make();
    ASSERT_TRUE(b);
    first = run(*b, ids);
  }
  auto written = files();
  ASSERT_EQ(written.size(), 1u);
  const fs::path file = written[0];
  const auto stamp = fs::last_write_time(file);
  const std::string text = [&] {
    std::ifstream f(file);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  EXPECT_NE(text.find("cosmos-gemm-tune 1"), std::string::npos);
  {
    auto b = make();
    ASSERT_TRUE(b);
    const ForwardOutput again = run(*b, ids);
    EXPECT_EQ(again.logits, first.logits);
  }
  EXPECT_EQ(fs::last_write_time(file), stamp) << "a restored cache must not be tuned and written again";
  {
    std::ofstream f(file, std::ios::trunc);
    f << "damaged";
  }
  {
    auto b = make();
    ASSERT_TRUE(b);
    const ForwardOutput again = run(*b, ids);
    const auto [d, m] = max_diff(again.logits, first.logits);
    EXPECT_LE(d, 1e-3f * m);  // a re-tuning may pick another algorithm: fp32 accumulation order
  }
  std::ifstream f(file);
  const std::string rewritten(std::istreambuf_iterator<char>(f), {});
  EXPECT_NE(rewritten.find("cosmos-gemm-tune 1"), std::string::npos);
  fs::remove_all(dir);
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

TEST_F(CudaBackendTest, FastPathStaysWithinBf16OfReferenceMath) {
  auto ref = gpu(2048, true);
  ASSERT_TRUE(ref);
  const auto g = golden();
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    BackendOptions o;
    o.precision = p;
    auto fast = create_cuda_backend(testing::tiny_model_dir(), o);
    ASSERT_TRUE(fast.ok()) << fast.error().message;
    EXPECT_EQ((*fast)->precision(), p);
    int agree = 0, total = 0;
    float worst_rel = 0;
    for (const auto& c : g["cases"]) {
      const auto ids = c["ids"].get<std::vector<TokenId>>();
      const ForwardOutput a = run(**fast, ids), b = run(*ref, ids);
      ASSERT_EQ(a.logits.size(), b.logits.size());
      const auto [d, m] = max_diff(a.logits, b.logits);
      worst_rel = std::max(worst_rel, d / m);
      for (std::size_t r = 0; r < ids.size(); ++r) {
        const auto ra = a.row(static_cast<int>(r)), rb = b.row(static_cast<int>(r));
        agree += std::max_element(ra.begin(), ra.end()) - ra.begin() == std::max_element(rb.begin(), rb.end()) - rb.begin();
        ++total;
      }
    }
    std::printf("fast path %s vs reference math: largest |diff| / max|logit| %.3g, top-1 agreement %d/%d\n",
                std::string(to_string(p)).c_str(), worst_rel, agree, total);
    EXPECT_LT(worst_rel, kBf16Rel);
  }
}

// Passes of many tokens with the gate/up product and SwiGLU fused (kernels/gemm_swiglu.cuh, on sm_90,
// from 768 tokens) against the two kernels (COSMOS_FUSED_SWIGLU=0): the fused kernel rounds g and u
// once less, so the last position's logits differ, by far less than the fast path's bf16 tolerance.
TEST_F(CudaBackendTest, FusedGateUpSwigluMatchesTheTwoKernels) {
  if (!kernels::gemm_swiglu_available()) GTEST_SKIP() << "the fused kernel needs an sm_90 GPU and a build for it";
  ASSERT_TRUE(kernels::gemm_swiglu_supports(128, 64));  // the tiny model's intermediate and hidden sizes
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    BackendOptions o;
    o.precision = p;
    auto fused = create_cuda_backend(testing::tiny_model_dir(), o);
    ASSERT_TRUE(fused.ok()) << fused.error().message;
    setenv("COSMOS_FUSED_SWIGLU", "0", 1);
    auto two = create_cuda_backend(testing::tiny_model_dir(), o);
    unsetenv("COSMOS_FUSED_SWIGLU");
    ASSERT_TRUE(two.ok()) << two.error().message;
    float worst_rel = 0, any_diff = 0;
    for (const int n : {1024, 1500}) {  // 8 and 12 token tiles (the last partial)
      std::vector<TokenId> ids(n);
      for (int i = 0; i < n; ++i) ids[i] = static_cast<TokenId>((i * 7919 + 13) % 150000);
      const ForwardOutput a = testing::score_logits(**fused, ids, false), b = testing::score_logits(**two, ids, false);
      ASSERT_EQ(a.logits.size(), b.logits.size());
      const auto [d, m] = max_diff(a.logits, b.logits);
      worst_rel = std::max(worst_rel, d / m);
      any_diff = std::max(any_diff, d);
    }
    std::printf("fused gate/up + SwiGLU %s vs two kernels: largest |diff| / max|logit| %.3g\n",
                std::string(to_string(p)).c_str(), worst_rel);
    EXPECT_GT(any_diff, 0.0f) << "identical logits: the fused kernel did not run";
    EXPECT_LT(worst_rel, kBf16Rel / 3);
  }
}

TEST_F(CudaBackendTest, RandomWeightsOnTheGpuEqualTheFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("cosmos_cfg_only_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_test_config("tiny", dir).ok());
  BackendOptions o;
  o.reference_math = true;
  o.random_weights = 1;  // the seed of testing::tiny_model_dir()
  auto generated = create_cuda_backend(dir, o);
  ASSERT_TRUE(generated.ok()) << generated.error().message;
  auto files = gpu(2048, true);
  ASSERT_TRUE(files);
  const std::vector<TokenId> ids = {9707, 1879, 0, 5, 151644, 100};
  const ForwardOutput a = run(**generated, ids), b = run(*files, ids);
  const auto [d, m] = max_diff(a.logits, b.logits);
  EXPECT_EQ(d, 0.0f) << "max |logit| " << m;  // the same bf16 weights, the same kernels
  std::filesystem::remove_all(dir);
}

TEST_F(CudaBackendTest, DeviceSamplingIsSeededAndStaysInTheKeptSet) {
  BackendOptions bo;
  auto model = load_model(testing::tiny_model_dir(), Device::cuda, bo);
  ASSERT_TRUE(model.ok()) << model.error().message;
  ASSERT_TRUE(model->backend->samples_on_device());
  const std::vector<TokenId> prompt = {9707, 1879, 0, 5};
  auto generate = [&](std::uint64_t seed, int top_k) {
    Session s(*model->backend, *model->tokenizer);
    GenerateOptions o;
    o.sampling.temperature = 0.8f;
    o.sampling.top_k = top_k;
    o.sampling.top_p = 0.9f;
    o.sampling.seed = seed;
    o.max_new_tokens = 32;
    o.stop_tokens = {-1};
    auto r = s.generate(prompt, o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->token_ids : std::vector<TokenId>{};
  };
  const auto a = generate(42, 0), b = generate(42, 0), c = generate(43, 0);
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a, b);  // same seed, same tokens
  EXPECT_NE(a, c);  // another seed draws differently (32 draws from a spread distribution)
  // top_k = 1 is greedy whatever the temperature: equal to the reference greedy run.
  Session s(*model->backend, *model->tokenizer);
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 32;
  o.stop_tokens = {-1};
  auto greedy = s.generate(prompt, o);
  ASSERT_TRUE(greedy.ok());
  EXPECT_EQ(generate(7, 1), greedy->token_ids);
}

}  // namespace
}  // namespace cosmos
