// The quantized precisions (int8, fp8, int4) on the CUDA backend. The GPU quantizes the same bytes
// as the CPU backend (kernels/quantize.cu is bit-exact, test_gpu_quantize), so:
//   - against the CPU backend at the same precision: every position's logits of a 512-token
//     sequence (prefill: weights dequantized to bf16 for the tensor-core GEMMs, bf16 activations;
//     fp8 on sm_89+: fp8 tensor cores, E4M3 activations) and 48 one-token decode steps (the
//     dequantizing gemv, fp32 activations) agree within the fast path's bf16 bound (kBf16Rel, as
//     test_gpu_cuda_backend uses for bf16 weights; fp8: kFp8ActRel);
//   - against bf16 on the GPU: the model-level quality (largest relative logit error, KL, top-1
//     agreement over 512 teacher-forced steps), printed "[ measured ]" and bounded as on the CPU
//     (test_cpu_quant; the same quantized weights, so the same figures within the bf16 noise);
//   - what memory() reports against the estimator (within 5%), load progress and cancel, and a
//     non-finite weight in the checkpoint refused by name.
// With COSMOS_QUANT_7B=1 (tests/gpu/run.sh --quant-7b) the same quality figures on the random
// 7B-shape model, against its bf16 run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/checkpoint.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/quant_cache.h"
#include "cosmos/safetensors.h"
#include "cosmos/test_model.h"
#include "kernels/device_info.cuh"
#include "logit_compare.h"
#include "score_logits.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

constexpr float kBf16Rel = 3e-2f;  // see test_cuda_backend.cpp
// fp8 on GPUs with fp8 tensor cores: prefill products also round the activations to E4M3 per token
// (W8A8, kernels/quantize_act.cuh: up to 2^-4 relative per element), the CPU keeps them in fp32.
// Measured on the H200 (tiny model): prefill max rel error 0.087, decode (after a W8A8 prefill of
// its prompt) 0.033. Bound: about 1.7x; a wrong scale or buffer gives errors of order 1. The exact
// check of the fp8 products themselves is test_gpu_fp8_gemm (float64 on the same bytes).
constexpr float kFp8ActRel = 0.15f;
constexpr int kSteps = 512;

std::vector<TokenId> prompt_ids() {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_golden.json");
  return nlohmann::json::parse(f)["cases"][0]["ids"].get<std::vector<TokenId>>();
}

using testing::score_logits;

// Greedy continuation of `prompt` by `steps` one-token forward passes (host argmax of the logits);
// returns the prompt plus the tokens, the last one not scored.
std::vector<TokenId> greedy(Backend& b, std::vector<TokenId> ids, int steps) {
  SequenceInput in;
  in.seq = b.kv_cache().create_sequence();
  in.tokens = ids;
  ForwardOutput out;
  for (int s = 0; s < steps; ++s) {
    auto st = b.forward(std::span<const SequenceInput>(&in, 1), out);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    if (!st.ok()) break;
    const auto r = out.row(0);
    const TokenId next = static_cast<TokenId>(std::max_element(r.begin(), r.end()) - r.begin());
    if (s + 1 < steps) ids.push_back(next);
    in.tokens = {next};
  }
  b.kv_cache().free_sequence(in.seq);
  return ids;
}

std::unique_ptr<Backend> make(bool cuda, Precision p, const std::filesystem::path& dir, BackendOptions o = {},
                              int context_tokens = 2048) {
  o.precision = p;
  o.context_tokens = context_tokens;
  auto b = cuda ? create_cuda_backend(dir, o) : create_cpu_backend(dir, o);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

class CudaQuant : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
  // The prompt plus kSteps - 1 greedy tokens of the bf16 model on the GPU (shared by the cases).
  static const std::vector<TokenId>& sequence() {
    static const std::vector<TokenId> seq = [] {
      auto b = make(true, Precision::bf16, testing::tiny_model_dir());
      return b ? greedy(*b, prompt_ids(), kSteps) : std::vector<TokenId>{};
    }();
    return seq;
  }
};

TEST_P(CudaQuant, PrefillAndDecodeMatchTheCpuAtTheSamePrecision) {
  const Precision p = GetParam();
  auto gpu = make(true, p, testing::tiny_model_dir());
  auto cpu = make(false, p, testing::tiny_model_dir());
  ASSERT_TRUE(gpu && cpu);
  EXPECT_EQ(gpu->precision(), p);
  const std::vector<TokenId>& seq = sequence();
  ASSERT_GE(seq.size(), 64u);
  // Prefill: every position.
  const ForwardOutput a = score_logits(*cpu, seq), b = score_logits(*gpu, seq);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  testing::LogitStats prefill;
  for (int r = 0; r < static_cast<int>(seq.size()); ++r) prefill.add(a.row(r), b.row(r));
  // Decode: a short prompt, then one token per pass (the gemv path), against the CPU's rows.
  const int prompt = 16, steps = 48;
  SequenceInput in;
  in.seq = gpu->kv_cache().create_sequence();
  in.tokens.assign(seq.begin(), seq.begin() + prompt);
  testing::LogitStats decode;
  for (int s = 0; s < steps; ++s) {
    ForwardOutput out;
    auto st = gpu->forward(std::span<const SequenceInput>(&in, 1), out);
    ASSERT_TRUE(st.ok()) << st.error().message;
    decode.add(a.row(prompt - 1 + s), out.row(0));
    in.tokens = {seq[prompt + s]};
  }
  std::printf("[ measured ] tiny model, %s, CUDA against CPU: prefill %d positions max rel error %.3g, top-1 %d/%d; "
              "decode %d steps max rel error %.3g, top-1 %d/%d\n",
              std::string(to_string(p)).c_str(), prefill.positions, prefill.max_rel_err, prefill.agree,
              prefill.positions, steps, decode.max_rel_err, decode.agree, steps);
  const float bound = p == Precision::fp8 ? kFp8ActRel : kBf16Rel;
  EXPECT_LT(prefill.max_rel_err, bound);
  EXPECT_LT(decode.max_rel_err, bound);
}

// Prompts of up to 64 tokens (fp8 with fp8 tensor cores: 16) multiply the quantized weights
// directly on tensor cores (kernels/gemm_q_small.cuh, bf16 activations: W8A16 / W4A16), and
// lm_head's rows of any pass do (64 at a time): 12- and 40-token prompts (every product on that
// kernel; fp8 40: W8A8) and a 100-token one (layers on the dequantizing GEMM, lm_head's 100 rows on
// the kernel in two launches; fp8: on fp8 tensor cores), every position's logits against the CPU
// backend's at the same precision.
TEST_P(CudaQuant, ShortPromptsMatchTheCpuAtTheSamePrecision) {
  const Precision p = GetParam();
  auto gpu = make(true, p, testing::tiny_model_dir());
  auto cpu = make(false, p, testing::tiny_model_dir());
  ASSERT_TRUE(gpu && cpu);
  const std::vector<TokenId>& seq = sequence();
  ASSERT_GE(seq.size(), 100u);
  for (const int len : {12, 40, 100}) {
    const std::vector<TokenId> ids(seq.begin(), seq.begin() + len);
    const ForwardOutput a = score_logits(*cpu, ids), b = score_logits(*gpu, ids);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    testing::LogitStats st;
    for (int r = 0; r < len; ++r) st.add(a.row(r), b.row(r));
    std::printf("[ measured ] tiny model, %s, a %d-token prompt, CUDA against CPU: max rel error %.3g, top-1 %d/%d\n",
                std::string(to_string(p)).c_str(), len, st.max_rel_err, st.agree, st.positions);
    EXPECT_LT(st.max_rel_err, p == Precision::fp8 && len > 16 ? kFp8ActRel : kBf16Rel) << len << " tokens";
  }
}

struct Bounds {
  double max_rel_err, mean_kl, min_top1;
};
// test_cpu_quant's bounds (the same quantized weights; the tiny model's flat distributions make
// top-1 fragile, see there), except fp8: on the GPU its prefill is W8A8 (above), measured on the
// H200 against bf16: max rel error 0.120, KL mean 2.58e-3, top-1 422/512 (the CPU's W8A16: 0.106,
// 1.5e-3, 450/512). Bounds about 2x the KL and 0.85x the agreement, as test_cpu_quant's.
Bounds bounds(Precision p) {
  switch (p) {
    case Precision::int8: return {0.03, 1e-4, 0.93};
    case Precision::fp8: return {0.25, 6e-3, 0.70};
    default: return {0.33, 0.02, 0.62};
  }
}

// The random 7B shape, measured on the H200 (tests/gpu/run.sh --quant-7b, 2026-11-30):
//   int8  max rel error 0.0336, KL mean 3.2e-4 nats, top-1 482/512;
//   fp8   max rel error 0.233,  KL mean 1.35e-2,     top-1 299/512 (W8A8 prefill; it was 0.172,
//         9.1e-3, 335/512 with the weights dequantized to bf16 for prefill);
//   int4  max rel error 0.425,  KL mean 0.054,       top-1 139/512; since session 37 (integer dot
//         products on a 16-bit fixed-point input, gemv_quant.cu) 0.435-0.456, 0.0537-0.0541,
//         118-146/512 in two runs (int8's top-1 also moved, 480 -> 472, with its kernels unchanged:
//         the random model's near-ties fall differently from run to run).
// Random weights are uniform, the worst case for a 16-level grid, and the random model's next-token
// distributions are nearly flat (top-1 is decided by tiny margins), so top-1 agreement here says
// little about a trained model; KL is the figure to watch. Bounds: about 2x the measured KL and
// 0.8x the measured agreement; a broken format gives KL ~ 1 nat and agreement near 0.
Bounds bounds_7b(Precision p) {
  switch (p) {
    case Precision::int8: return {0.07, 1e-3, 0.75};
    case Precision::fp8: return {0.45, 0.03, 0.47};
    default: return {0.8, 0.11, 0.18};
  }
}

TEST_P(CudaQuant, QualityAgainstBf16OnTheGpu) {
  const Precision p = GetParam();
  const std::vector<TokenId>& seq = sequence();
  const int prompt = static_cast<int>(prompt_ids().size());
  ASSERT_EQ(static_cast<int>(seq.size()), prompt + kSteps - 1);
  auto ref = make(true, Precision::bf16, testing::tiny_model_dir());
  auto q = make(true, p, testing::tiny_model_dir());
  ASSERT_TRUE(ref && q);
  EXPECT_LT(q->memory().weights, ref->memory().weights);
  const ForwardOutput a = score_logits(*ref, seq), b = score_logits(*q, seq);
  testing::LogitStats st;
  for (int r = prompt - 1; r < static_cast<int>(seq.size()); ++r) st.add(a.row(r), b.row(r));
  std::printf("[ measured ] tiny model on the GPU, %s against bf16 over %d steps: max rel logit error %.4g, KL mean "
              "%.3g max %.3g nats, top-1 agreement %d/%d\n",
              std::string(to_string(p)).c_str(), st.positions, st.max_rel_err, st.kl_mean(), st.kl_max, st.agree,
              st.positions);
  const Bounds bd = bounds(p);
  EXPECT_LT(st.max_rel_err, bd.max_rel_err);
  EXPECT_LT(st.kl_mean(), bd.mean_kl);
  EXPECT_GE(st.top1(), bd.min_top1);
}

TEST_P(CudaQuant, MemoryIsWithin5PercentOfTheEstimate) {
  const Precision p = GetParam();
  auto b = make(true, p, testing::tiny_model_dir());
  ASSERT_TRUE(b);
  EstimateOptions eo;
  eo.context_tokens = 2048;
  const MemoryEstimate e = estimate_memory(b->config(), p, eo);
  const BackendMemory m = b->memory();
  std::printf("[ measured ] tiny model, %s: weights %llu bytes (estimate %llu), KV cache %llu (estimate %llu)\n",
              std::string(to_string(p)).c_str(), static_cast<unsigned long long>(m.weights),
              static_cast<unsigned long long>(e.weights()), static_cast<unsigned long long>(m.kv_cache),
              static_cast<unsigned long long>(e.kv_cache));
  EXPECT_NEAR(static_cast<double>(m.weights), static_cast<double>(e.weights()), 0.05 * e.weights());
  EXPECT_NEAR(static_cast<double>(m.kv_cache), static_cast<double>(e.kv_cache), 0.05 * e.kv_cache);
  EXPECT_EQ(m.host, e.host);  // the embedding, in pinned host memory
  EXPECT_GT(m.host, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaQuant, ::testing::Values(Precision::int8, Precision::fp8, Precision::int4),
                         [](const ::testing::TestParamInfo<Precision>& i) { return std::string(to_string(i.param)); });

class CudaQuantLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_F(CudaQuantLoad, ReportsProgressAndCanBeCancelled) {
  std::vector<double> seen;
  BackendOptions o;
  o.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  ASSERT_TRUE(make(true, Precision::int4, testing::tiny_model_dir(), o));
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  int calls = 0;
  o.progress = [&](double) { return ++calls < 5; };
  o.precision = Precision::int8;
  auto cancelled = create_cuda_backend(testing::tiny_model_dir(), o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, "load.cancelled");
}

TEST_F(CudaQuantLoad, ANonFiniteWeightIsRefusedByName) {
  const auto dir = std::filesystem::temp_directory_path() / ("cosmos_nan_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(testing::tiny_model_dir(), dir, std::filesystem::copy_options::recursive);
  const std::string name = "model.layers.1.mlp.down_proj.weight";
  bool poked = false;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".safetensors") continue;
    std::uint64_t offset = 0, cols = 0;
    {
      auto file = SafetensorsFile::open(f.path());
      ASSERT_TRUE(file.ok()) << file.error().message;
      for (const TensorInfo& t : file->tensors())
        if (t.name == name) {
          offset = t.offset;
          cols = static_cast<std::uint64_t>(t.shape[1]);
        }
    }
    if (cols == 0) continue;
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(offset + (3 * cols + 17) * 2));
    const unsigned char nan_bf16[2] = {0xC0, 0x7F};  // 0x7FC0 little-endian
    io.write(reinterpret_cast<const char*>(nan_bf16), 2);
    poked = true;
  }
  ASSERT_TRUE(poked);
  BackendOptions o;
  o.precision = Precision::int8;
  auto b = create_cuda_backend(dir, o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, "quant.non_finite");
  EXPECT_NE(b.error().message.find(name), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("row 3, column 17"), std::string::npos) << b.error().message;
  std::filesystem::remove_all(dir);
}

// The quantized-weight cache is shared with the CPU backend: the GPU writes the file, the CPU reads
// it and gets exactly the logits of its own quantization (the GPU quantizer is bit-exact); a file
// whose lm_head was zeroed gives zero logits on the GPU, so the GPU really reads it.
TEST_F(CudaQuantLoad, TheQuantizedWeightCacheIsSharedWithTheCpu) {
  const auto cache = std::filesystem::temp_directory_path() / ("cosmos_qcache_gpu_" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  const std::vector<TokenId> ids = {9707, 1879, 0, 5, 151644, 100};
  BackendOptions o;
  o.quant_cache_dir = cache;
  {
    auto g = make(true, Precision::int4, testing::tiny_model_dir(), o);
    ASSERT_TRUE(g);
  }
  auto ckpt = Checkpoint::open(testing::tiny_model_dir());
  ASSERT_TRUE(ckpt.ok());
  auto fp = checkpoint_fingerprint(*ckpt);
  ASSERT_TRUE(fp.ok());
  const auto file = quant_cache_path(cache, *fp, Precision::int4);
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  auto from_cache = make(false, Precision::int4, testing::tiny_model_dir(), o);
  auto own = make(false, Precision::int4, testing::tiny_model_dir());
  ASSERT_TRUE(from_cache && own);
  const ForwardOutput a = score_logits(*from_cache, ids), b = score_logits(*own, ids);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_TRUE(std::equal(a.logits.begin(), a.logits.end(), b.logits.begin())) << "the GPU's file differs from the CPU's quantization";
  // Zero lm_head in the file: the GPU, reading it, gives zero logits.
  auto m = read_quant_cache(file, Precision::int4, *fp);
  ASSERT_TRUE(m.ok()) << m.error().message;
  QuantizedMatrix& lm = m->at("lm_head.weight");
  std::fill(lm.q.begin(), lm.q.end(), 0);
  std::fill(lm.group_scale.begin(), lm.group_scale.end(), 0);
  std::fill(lm.group_min.begin(), lm.group_min.end(), 0);
  std::vector<std::pair<std::string, const QuantizedMatrix*>> all;
  for (const auto& [name, q] : *m) all.emplace_back(name, &q);
  ASSERT_TRUE(write_quant_cache(file, Precision::int4, *fp, all).ok());
  auto g = make(true, Precision::int4, testing::tiny_model_dir(), o);
  ASSERT_TRUE(g);
  const ForwardOutput z = score_logits(*g, ids);
  EXPECT_TRUE(std::all_of(z.logits.begin(), z.logits.end(), [](float v) { return v == 0.0f; }));
  std::filesystem::remove_all(cache);
}

// The random 7B-shape model (COSMOS_QUANT_7B=1): its config in a temporary folder, random weights.
class CudaQuant7B : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv("COSMOS_QUANT_7B")) GTEST_SKIP() << "set COSMOS_QUANT_7B=1 (tests/gpu/run.sh --quant-7b)";
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
    dir = std::filesystem::temp_directory_path() / ("cosmos_7b_cfg_" + std::to_string(::getpid()));
    ASSERT_TRUE(write_test_config("cosmos-reason1-7b", dir).ok());
    o.random_weights = 7;
  }
  void TearDown() override {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  BackendOptions o;
};

// Each quantized precision against bf16, 512 teacher-forced steps after a 32-token prompt (about
// 40 GB of GPU memory at the peak).
TEST_F(CudaQuant7B, QualityAgainstBf16) {
  std::vector<TokenId> prompt;
  for (int i = 0; i < 32; ++i) prompt.push_back(static_cast<TokenId>((i * 7919 + 13) % 150000));
  std::vector<TokenId> seq;
  ForwardOutput ref;
  {
    auto b = make(true, Precision::bf16, dir, o);
    ASSERT_TRUE(b);
    seq = greedy(*b, prompt, kSteps);
    ref = score_logits(*b, seq);
  }
  for (Precision p : {Precision::int8, Precision::fp8, Precision::int4}) {
    auto b = make(true, p, dir, o);
    ASSERT_TRUE(b);
    const ForwardOutput out = score_logits(*b, seq);
    testing::LogitStats st;
    for (int r = static_cast<int>(prompt.size()) - 1; r < static_cast<int>(seq.size()); ++r) st.add(ref.row(r), out.row(r));
    const MemoryEstimate e = estimate_memory(b->config(), p, EstimateOptions{2048, 1, 2048});
    std::printf("[ measured ] random 7B on the GPU, %s against bf16 over %d steps: max rel logit error %.4g, KL mean "
                "%.3g max %.3g nats, top-1 agreement %d/%d; weights %.3f GB (estimate %.3f GB)\n",
                std::string(to_string(p)).c_str(), st.positions, st.max_rel_err, st.kl_mean(), st.kl_max, st.agree,
                st.positions, b->memory().weights / 1e9, e.weights() / 1e9);
    EXPECT_NEAR(static_cast<double>(b->memory().weights), static_cast<double>(e.weights()), 0.05 * e.weights());
    const Bounds bd = bounds_7b(p);
    EXPECT_LT(st.max_rel_err, bd.max_rel_err);
    EXPECT_LT(st.kl_mean(), bd.mean_kl);
    EXPECT_GE(st.top1(), bd.min_top1);
  }
}

// Decode steps past a long-context threshold replay graphs of their own (CudaBackend::kLongContext
// for int4: o's wide kernel and the attention's kernels::kDecodeAttentionLongSplits splits;
// kLongSplitsContext for bf16: the splits only; for int8 past kLongSplitsContext and fp8 past
// kLongContext: the splits, the attention's sums and the o kernel that divides them, at 1 row per
// item up to kLongSplitsContext and 2 past it: CudaBackend::context_tier): teacher-forced one-token steps from `prompt`
// tokens on, 64 of them across the threshold, against the prefill's logits of the same tokens. The
// steps past it must agree with the prefill as closely as the ones before it (the same weights,
// other kernels or splits); a wrong kernel, graph or buffer there gives errors of order 1
// (COSMOS_QUANT_7B=1).
void check_long_context_steps(const std::filesystem::path& dir, const BackendOptions& o, Precision p, int prompt, int threshold) {
  constexpr int kLongSteps = 64;
  auto b = make(true, p, dir, o, std::max(2048, prompt + kLongSteps));
  ASSERT_TRUE(b);
  std::vector<TokenId> seq;
  for (int i = 0; i < prompt + kLongSteps; ++i) seq.push_back(static_cast<TokenId>((i * 7919 + 13) % 150000));
  const ForwardOutput ref = score_logits(*b, seq);
  ASSERT_EQ(ref.logits.size(), static_cast<std::size_t>(prompt + kLongSteps) * ref.vocab);

  SequenceInput in;
  in.seq = b->kv_cache().create_sequence();
  in.tokens.assign(seq.begin(), seq.begin() + prompt);
  testing::LogitStats before, after;
  ForwardOutput out;
  for (int s = 0; s < kLongSteps; ++s) {
    const auto st = b->forward(std::span<const SequenceInput>(&in, 1), out);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const int r = prompt - 1 + s;  // the position whose logits this pass returned; its context is r + 1
    (r + 1 >= threshold ? after : before).add(ref.row(r), out.row(0));
    in.tokens = {seq[prompt + s]};
  }
  b->kv_cache().free_sequence(in.seq);
  std::printf("[ measured ] random 7B, %s one-token steps against the prefill: contexts < %d: max rel error %.3g, "
              "KL mean %.3g, top-1 %d/%d; >= %d: %.3g, %.3g, %d/%d\n",
              std::string(to_string(p)).c_str(), threshold, before.max_rel_err, before.kl_mean(), before.agree,
              before.positions, threshold, after.max_rel_err, after.kl_mean(), after.agree, after.positions);
  ASSERT_EQ(before.positions, threshold - prompt);
  ASSERT_EQ(after.positions, kLongSteps - (threshold - prompt));
  // The steps before the threshold against the prefill, the same weights on other kernels (the
  // one-token ones keep the MLP's activations in bf16, as the prefill's GEMMs do): measured int4
  // 0.0125 / 4.9e-5, fp8 0.12-0.126 / 4.5-5.5e-3 (max rel error / KL mean; fp8's prefill is W8A8).
  // A wrong kernel or buffer gives errors of order 1.
  EXPECT_LT(before.max_rel_err, 0.25);
  EXPECT_LT(before.kl_mean(), 0.02);
  EXPECT_LT(after.max_rel_err, 1.5 * before.max_rel_err + 1e-3);
  EXPECT_LT(after.kl_mean(), 1.5 * before.kl_mean() + 1e-4);
  // Top-1 agreement over 24-40 positions is a noisy rate where decode and prefill differ more (fp8:
  // bf16 activations in decode, E4M3 in prefill, KL ~5e-3; measured 22/24 before and 31/40 after
  // the threshold with the same KL, session 44): allowed to fall by 0.1 or by three standard
  // deviations of the difference of two binomial rates, whichever is more. A wrong kernel gives
  // errors of order 1 in the two bounds above.
  const double p1 = before.top1();
  const double spread = 3.0 * std::sqrt(p1 * (1.0 - p1) * (1.0 / before.positions + 1.0 / after.positions));
  EXPECT_GE(after.top1(), p1 - std::max(0.1, spread));
}

TEST_F(CudaQuant7B, Int4DecodePastTheLongContextThresholdMatchesThePrefill) {
  check_long_context_steps(dir, o, Precision::int4, 1000, 1024);
}

TEST_F(CudaQuant7B, Bf16DecodePastTheLongSplitsThresholdMatchesThePrefill) {
  check_long_context_steps(dir, o, Precision::bf16, 4073, 4097);
}

TEST_F(CudaQuant7B, Int8DecodePastTheLongSplitsThresholdMatchesThePrefill) {
  check_long_context_steps(dir, o, Precision::int8, 4073, 4097);
}

TEST_F(CudaQuant7B, Fp8DecodePastTheLongContextThresholdMatchesThePrefill) {
  check_long_context_steps(dir, o, Precision::fp8, 1001, 1025);
}

// fp8's second long tier (CudaBackend::context_tier: o's kSums kernel at 2 rows per item instead of 1).
TEST_F(CudaQuant7B, Fp8DecodePastTheLongSplitsThresholdMatchesThePrefill) {
  check_long_context_steps(dir, o, Precision::fp8, 4073, 4097);
}

}  // namespace
}  // namespace cosmos
