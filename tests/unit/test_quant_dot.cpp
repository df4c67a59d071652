// quant_row_dot (engine/src/quant_dot*.cpp), the CPU backend's one-token product on quantized rows:
// each instruction set's kernel against the dequantized row's dot product in double, the level
// picked per CPU, and int4's prepared input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cosmos/quant.h"
#include "quant_test_reference.h"
#include "quant_test_source.h"

namespace cosmos {
namespace {

using quant_test::bf16_value;
using quant_test::make_source;
using quant_test::name;
using quant_test::quantize_all;
using quant_test::Source;

TEST(Quant, RowDotEqualsTheDequantizedRowDotX) {
  const QuantDotIsa picked = quant_dot_isa();
  for (const QuantDotIsa isa : {QuantDotIsa::portable, QuantDotIsa::avx2, QuantDotIsa::avx512}) {
    if (!set_quant_dot_isa(isa)) {
      std::printf("[ skipped  ] quant_row_dot on %s: this CPU does not run it\n", name(isa));
      continue;
    }
    SCOPED_TRACE(name(isa));
    std::mt19937 rng(77);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    for (const QuantFormat f : {QuantFormat::int8_row, QuantFormat::fp8_row, QuantFormat::int4_group}) {
      for (const std::int64_t cols : {1, 7, 37, 128, 129, 200, 255, 256, 1000, 3584}) {
        SCOPED_TRACE(std::string(name(f)) + " cols " + std::to_string(cols));
        const std::int64_t rows = 5;
        std::vector<float> v(static_cast<std::size_t>(rows * cols)), x(static_cast<std::size_t>(cols));
        for (float& e : v) e = 0.05f * gauss(rng) + (f == QuantFormat::int4_group ? 0.01f : 0.0f);
        for (float& e : x) e = 2.0f * gauss(rng);
        const Source src = make_source(v, DType::bf16);
        const QuantizedMatrix m = quantize_all(src, f, rows, cols);
        const Int4DotInput prep = prepare_int4_dot(x.data(), cols);
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::int64_t r = 0; r < rows; ++r) {
          dequantize_row(m, r, row.data());
          double want = 0.0, mag = 0.0;
          for (std::int64_t c = 0; c < cols; ++c) {
            want += static_cast<double>(row[c]) * x[c];
            double wmag = std::fabs(static_cast<double>(row[c]));
            if (f == QuantFormat::int4_group) {
              const std::size_t k = static_cast<std::size_t>(r * m.groups() + c / kInt4GroupSize);
              const double s = bf16_value(m.group_scale[k]), mn = bf16_value(m.group_min[k]);
              wmag = std::fabs(static_cast<double>(row[c]) - mn) + std::fabs(mn) + std::fabs(s);
            }
            mag += wmag * std::fabs(static_cast<double>(x[c]));
          }
          const double got = quant_row_dot(m, r, x.data(), &prep);
          const double bound = 2.0 * static_cast<double>(cols + 8) * std::ldexp(1.0, -24) * mag;
          EXPECT_LE(std::fabs(got - want), bound) << "row " << r << ": " << got << " vs " << want;
        }
      }
    }
  }
  ASSERT_TRUE(set_quant_dot_isa(picked));
}

// The level picked at the first use is the best this CPU runs, and a level it lacks is refused
// without changing the one in use.
TEST(Quant, RowDotPicksTheBestInstructionSetTheCpuRuns) {
  const QuantDotIsa picked = quant_dot_isa();
  EXPECT_TRUE(quant_dot_isa_supported(QuantDotIsa::portable));
  QuantDotIsa best = QuantDotIsa::portable;
  for (const QuantDotIsa isa : {QuantDotIsa::avx2, QuantDotIsa::avx512})
    if (quant_dot_isa_supported(isa)) best = isa;
  EXPECT_EQ(picked, best) << name(picked) << " in use, " << name(best) << " available";
  if (quant_dot_isa_supported(QuantDotIsa::avx512)) {
    EXPECT_TRUE(quant_dot_isa_supported(QuantDotIsa::avx2));
  }
  for (const QuantDotIsa isa : {QuantDotIsa::avx2, QuantDotIsa::avx512}) {
    if (quant_dot_isa_supported(isa)) continue;
    EXPECT_FALSE(set_quant_dot_isa(isa));
    EXPECT_EQ(quant_dot_isa(), picked);
  }
  std::printf("[ measured ] quant_row_dot runs on %s\n", name(picked));
}

TEST(Quant, Int4DotInputSumsEachGroupAndSplitsTheColumns) {
  std::vector<float> x(301);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const Int4DotInput in = prepare_int4_dot(x.data(), 301);
  ASSERT_EQ(in.group_sum.size(), 3u);
  ASSERT_EQ(in.even.size(), 151u);
  ASSERT_EQ(in.odd.size(), 151u);
  for (int g = 0; g < 3; ++g) {
    double want = 0.0;
    for (int c = 128 * g; c < std::min(301, 128 * (g + 1)); ++c) want += x[static_cast<std::size_t>(c)];
    EXPECT_EQ(in.group_sum[static_cast<std::size_t>(g)], static_cast<float>(want)) << "group " << g;
  }
  for (std::size_t i = 0; i < 151; ++i) {
    EXPECT_EQ(in.even[i], x[2 * i]);
    EXPECT_EQ(in.odd[i], 2 * i + 1 < x.size() ? x[2 * i + 1] : 0.0f);
  }
}

}  // namespace
}  // namespace cosmos
