// The GPU memory estimator: exact byte counts from the model shape.
#include <gtest/gtest.h>

#include "cosmos/memory_estimate.h"

namespace cosmos {
namespace {

// Linear parameters of the 7B text model: per layer q,o 3584^2, k,v 512x3584, MLP 3 x 18944x3584.
constexpr std::uint64_t kLayerLinear = 2ull * 3584 * 3584 + 2ull * 512 * 3584 + 3ull * 18944 * 3584;
constexpr std::uint64_t kLinear = 28 * kLayerLinear;
constexpr std::uint64_t kVocabRows = 152064ull * 3584;

TEST(MemoryEstimate, Bf16WeightsAreTwoBytesPerParameter) {
  const auto e = estimate_memory(cosmos_reason1_7b_config(), Precision::bf16);
  EXPECT_EQ(e.linear_weights, kLinear * 2);
  EXPECT_EQ(e.lm_head, kVocabRows * 2);
  EXPECT_EQ(e.embedding, kVocabRows * 2);
  // norms 2 per layer + final, biases q/k/v
  EXPECT_EQ(e.small, (28ull * (2 * 3584 + 3584 + 512 + 512) + 3584) * 2);
  EXPECT_NEAR(static_cast<double>(e.weights()) / 1e9, 15.23, 0.01);  // DESIGN.md §4: ~15.2 GB
}

TEST(MemoryEstimate, QuantizedFormatsCarryTheirScales) {
  const ModelConfig c = cosmos_reason1_7b_config();
  const auto i8 = estimate_memory(c, Precision::int8);
  const auto f8 = estimate_memory(c, Precision::fp8);
  const auto i4 = estimate_memory(c, Precision::int4);
  const std::uint64_t rows_per_layer = 3584 + 512 + 512 + 3584 + 18944 + 18944 + 3584;
  EXPECT_EQ(i8.linear_weights, kLinear + 28 * rows_per_layer * 4);
  EXPECT_EQ(f8.linear_weights, i8.linear_weights);
  // int4: half a byte per weight + 4 bytes per group of 128.
  EXPECT_EQ(i4.linear_weights, kLinear / 2 + kLinear / 128 * 4);
  EXPECT_EQ(i4.lm_head, kVocabRows / 2 + kVocabRows / 128 * 4);
  EXPECT_EQ(i4.embedding + i4.host, kVocabRows * 2);  // embedding stays bf16 (on the GPU: in host memory)
  EXPECT_LT(i4.weights(), i8.weights());
  EXPECT_LT(i8.weights(), estimate_memory(c, Precision::fp16).weights());
}

class KvCache : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(KvCache, Is56KiBPerTokenPerSequence) {
  const auto [context, batch] = GetParam();
  EstimateOptions o;
  o.context_tokens = context;
  o.batch = batch;
  const auto e = estimate_memory(cosmos_reason1_7b_config(), Precision::bf16, o);
  // 28 layers x (K + V) x 4 KV heads x 128 dims x 2 bytes = 57,344 bytes per token.
  EXPECT_EQ(e.kv_cache, 57344ull * context * batch);
}

INSTANTIATE_TEST_SUITE_P(Rows, KvCache,
                         ::testing::Values(std::pair{1, 1}, std::pair{4096, 1}, std::pair{8192, 1},
                                           std::pair{32768, 1}, std::pair{2048, 8}));

TEST(MemoryEstimate, Int4At8kFitsAnEightGigabyteCard) {
  EstimateOptions o;
  o.context_tokens = 8192;
  const auto e = estimate_memory(cosmos_reason1_7b_config(), Precision::int4, o);
  EXPECT_LT(e.total(), 6ull * 1000 * 1000 * 1000);  // DESIGN.md §5: <= 6 GB total
}

// On the GPU a quantized format keeps the embedding in pinned host memory (not in total()) and
// needs a bf16 buffer of the gate/up matrix for prefill GEMMs and the small-batch kernel's partial
// sums (16 column splits x 64 tokens x q/k/v's 4,608 rows, fp32); the CPU backend none of them.
TEST(MemoryEstimate, QuantizedFormatsOnTheGpuKeepTheEmbeddingInHostMemory) {
  const ModelConfig c = cosmos_reason1_7b_config();
  const std::uint64_t embedding = static_cast<std::uint64_t>(c.vocab_size) * c.hidden_size * 2;
  const std::uint64_t gpu_only = 2ull * c.intermediate_size * c.hidden_size * 2 + 16ull * 64 * 4608 * 4;
  EstimateOptions gpu, cpu;
  cpu.gpu = false;
  for (Precision p : {Precision::int8, Precision::fp8, Precision::int4}) {
    const auto g = estimate_memory(c, p, gpu), h = estimate_memory(c, p, cpu);
    EXPECT_EQ(g.host, embedding);
    EXPECT_EQ(g.embedding, 0u);
    EXPECT_EQ(h.host, 0u);
    EXPECT_EQ(h.embedding, embedding);
    EXPECT_EQ(g.workspace, h.workspace + gpu_only);
    EXPECT_EQ(h.kv_cache, 2 * g.kv_cache);  // the CPU's cache is fp32
    EXPECT_EQ(g.total() - g.kv_cache + embedding, h.total() - h.kv_cache + gpu_only);
  }
  const auto b = estimate_memory(c, Precision::bf16, gpu);
  EXPECT_EQ(b.host, 0u);
  EXPECT_EQ(b.embedding, embedding);
}

// The KV cache of the 7B at 8,192 tokens: 28 layers x K, V x 4 heads x 128 values per token, bf16
// on the GPU (0.44 GiB), fp32 on the CPU, and int8 with an fp32 scale per 128 values on either
// (1 + 4 / 128 bytes per value).
TEST(MemoryEstimate, KvCacheByFormatAndDevice) {
  const ModelConfig c = cosmos_reason1_7b_config();
  const std::uint64_t values = 8192ull * 28 * 2 * 4 * 128;
  for (bool gpu : {true, false}) {
    EstimateOptions full, int8;
    full.gpu = int8.gpu = gpu;
    int8.kv_format = KvFormat::int8;
    const auto f = estimate_memory(c, Precision::int4, full), q = estimate_memory(c, Precision::int4, int8);
    EXPECT_EQ(f.kv_cache, values * (gpu ? 2 : 4));
    EXPECT_EQ(q.kv_cache, values + 8192ull * 28 * 2 * 4 * 4);
    // The GPU also keeps one layer's K and V in bf16 for the prefill attention; nothing else changes.
    EXPECT_EQ(q.workspace, f.workspace + (gpu ? 8192ull * 2 * 4 * 128 * 2 : 0));
    EXPECT_EQ(f.weights(), q.weights());
  }
}

// "auto": the most accurate candidate whose estimate fits the budget.
TEST(MemoryEstimate, MostAccurateThatFits) {
  const ModelConfig c = cosmos_reason1_7b_config();
  EstimateOptions o;
  o.context_tokens = 8192;
  auto total = [&](Precision p) { return estimate_memory(c, p, o).total(); };
  static constexpr Precision kCpu[] = {Precision::bf16, Precision::int8, Precision::fp8, Precision::int4};
  static constexpr Precision kGpu[] = {Precision::bf16, Precision::fp16};
  EXPECT_EQ(most_accurate_that_fits(c, o, total(Precision::bf16), kCpu), Precision::bf16);  // exactly fits
  EXPECT_EQ(most_accurate_that_fits(c, o, total(Precision::bf16) - 1, kCpu), Precision::int8);
  EXPECT_EQ(most_accurate_that_fits(c, o, total(Precision::fp8) - 1, kCpu), Precision::int4);
  EXPECT_EQ(most_accurate_that_fits(c, o, total(Precision::int4) - 1, kCpu), std::nullopt);
  EXPECT_EQ(most_accurate_that_fits(c, o, total(Precision::bf16) - 1, kGpu), std::nullopt);  // fp16 is as big
  EXPECT_EQ(most_accurate_that_fits(c, o, ~0ull, kPrecisionsByAccuracy), Precision::bf16);
  // A longer context can push a precision out.
  EstimateOptions longer = o;
  longer.context_tokens = 131072;
  EXPECT_EQ(most_accurate_that_fits(c, longer, total(Precision::bf16), kCpu), Precision::int8);
}

TEST(Precision, NamesRoundTrip) {
  for (Precision p : kAllPrecisions) EXPECT_EQ(precision_from_string(to_string(p)), p);
  EXPECT_FALSE(precision_from_string("int3").has_value());
}

}  // namespace
}  // namespace cosmos
