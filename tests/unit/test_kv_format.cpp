// The int8 KV cache's rows (cosmos/kv_format.h): quantize_kv_row against its stated error bound on
// rows of different shapes, its edge rows (zero, non-finite), the names, and the bytes per token.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/kv_format.h"
#include "cosmos/model_config.h"

namespace cosmos {
namespace {

struct Row {
  const char* name;
  int n;
  float spread;   // values uniform in [-spread, spread]
  float outlier;  // one value of this size at index n / 3 (0: none)
};

class KvRow : public ::testing::TestWithParam<Row> {};

// Every value comes back within half a step (scale / 2) of itself, the largest one exactly up to
// rounding, and the scale is max|x| / 127: a wrong scale, rounding or clamp breaks one of these.
TEST_P(KvRow, RoundTripsWithinHalfAStep) {
  const Row r = GetParam();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-r.spread, r.spread);
  std::vector<float> x(r.n);
  for (float& v : x) v = u(rng);
  if (r.outlier != 0.0f) x[r.n / 3] = r.outlier;
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  std::vector<std::int8_t> q(r.n, 99);
  const float scale = quantize_kv_row(x.data(), r.n, q.data());
  EXPECT_FLOAT_EQ(scale, amax / 127.0f);
  std::vector<float> back(r.n);
  dequantize_kv_row(q.data(), r.n, scale, back.data());
  for (int i = 0; i < r.n; ++i) {
    EXPECT_LE(std::fabs(back[i] - x[i]), scale * 0.5f * 1.0001f) << "element " << i << " of " << x[i];
    EXPECT_GE(q[i], -127);  // symmetric: -128 is never used
  }
  int at_max = 0;
  for (int i = 0; i < r.n; ++i) at_max += std::fabs(x[i]) == amax ? (std::abs(q[i]) == 127) : 0;
  EXPECT_GE(at_max, 1) << "the largest value maps to +-127";
}

INSTANTIATE_TEST_SUITE_P(Rows, KvRow,
                         ::testing::Values(Row{"head128", 128, 3.0f, 0.0f}, Row{"head64", 64, 0.01f, 0.0f},
                                           Row{"outlier", 128, 1.0f, -250.0f}, Row{"tiny_values", 128, 1e-30f, 0.0f},
                                           Row{"one", 1, 5.0f, 0.0f}),
                         [](const ::testing::TestParamInfo<Row>& p) { return std::string(p.param.name); });

TEST(KvRowEdges, AZeroRowHasScaleZeroAndZeroValues) {
  std::vector<float> x(128, 0.0f);
  std::vector<std::int8_t> q(128, 5);
  EXPECT_EQ(quantize_kv_row(x.data(), 128, q.data()), 0.0f);
  for (std::int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(KvRowEdges, ANonFiniteValueGivesANanScale) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(128, 1.0f);
    x[77] = bad;
    std::vector<std::int8_t> q(128, 5);
    EXPECT_TRUE(std::isnan(quantize_kv_row(x.data(), 128, q.data()))) << bad;
    for (std::int8_t v : q) EXPECT_EQ(v, 0);
  }
}

TEST(KvFormatNames, RoundTrip) {
  for (KvFormat f : {KvFormat::full, KvFormat::int8}) EXPECT_EQ(kv_format_from_string(to_string(f)), f);
  EXPECT_FALSE(kv_format_from_string("fp8"));
  EXPECT_FALSE(kv_format_from_string(""));
}

// The 7B: 28 layers x 4 KV heads x 128 values, K and V.
TEST(KvFormatBytes, PerTokenOfThe7B) {
  const ModelConfig c = cosmos_reason1_7b_config();
  EXPECT_EQ(kv_bytes_per_token(c, KvFormat::full, 2), 57344u);      // 28 x 2 x 4 x 128 x 2
  EXPECT_EQ(kv_bytes_per_token(c, KvFormat::full, 4), 114688u);
  EXPECT_EQ(kv_bytes_per_token(c, KvFormat::int8, 2), 29568u);      // 28 x 2 x 4 x (128 + 4)
  EXPECT_EQ(kv_bytes_per_token(c, KvFormat::int8, 4), 29568u);      // the full size does not matter
}

}  // namespace
}  // namespace cosmos
