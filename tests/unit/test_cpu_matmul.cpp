// The CPU backend's matrix product (engine/src/cpu/cpu_ops.cpp: one token row by row, several
// tokens in blocks of 4 rows x 6 tokens with AVX-512 or 4 x 4 with the portable kernel, over chunks
// of 1,024 columns) and the int4 rows it dequantizes in group-split order (cosmos/quant.h), against
// a float64 reference on the same weights: every format, both kernels, token counts around the
// block sizes, shapes whose rows, tokens and columns end inside a block, a group, a 16-column vector
// or a chunk.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cosmos/quant.h"
#include "cpu/cpu_ops.h"

namespace cosmos {
namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// bf16 bits of v (round to nearest even), as the checkpoint stores weights.
std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    out[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  return out;
}

TEST(CpuMatmul, GroupSplitOrderPutsEachGroupsEvenColumnsFirst) {
  // 301 columns: groups of 128, 128 and 45 (23 even columns, then 22 odd ones).
  std::vector<float> x(301), split(301);
  for (int c = 0; c < 301; ++c) x[c] = static_cast<float>(c);
  split_group_order(x.data(), 301, split.data());
  EXPECT_EQ(split[0], 0.0f);
  EXPECT_EQ(split[63], 126.0f);
  EXPECT_EQ(split[64], 1.0f);
  EXPECT_EQ(split[127], 127.0f);
  EXPECT_EQ(split[128], 128.0f);
  EXPECT_EQ(split[256], 256.0f);
  EXPECT_EQ(split[256 + 22], 300.0f);
  EXPECT_EQ(split[256 + 23], 257.0f);
  EXPECT_EQ(split[300], 299.0f);
  std::vector<float> tiny = {5.0f, 6.0f, 7.0f}, tiny_split(3);
  split_group_order(tiny.data(), 3, tiny_split.data());
  EXPECT_EQ(tiny_split, (std::vector<float>{5.0f, 7.0f, 6.0f}));
}

// load_row's bf16 and fp16 loops (vectorized) against the scalar conversions, for every 16-bit
// pattern (NaNs: both NaN), in rows of 65,536 + 5 columns (a vector tail).
TEST(CpuMatmul, LoadRowConvertsEveryBf16AndFp16Pattern) {
  constexpr std::int64_t kCols = 65536 + 5;
  std::vector<std::uint16_t> bits(kCols);
  for (std::int64_t c = 0; c < kCols; ++c) bits[c] = static_cast<std::uint16_t>(c);
  std::vector<float> row(kCols);
  for (const DType dt : {DType::bf16, DType::f16}) {
    const cpu::WeightView w{reinterpret_cast<const std::byte*>(bits.data()), dt, 1, kCols, nullptr};
    cpu::load_row(w, 0, row.data());
    for (std::int64_t c = 0; c < kCols; ++c) {
      _Float16 h;
      std::memcpy(&h, &bits[c], 2);
      const float want = dt == DType::bf16 ? std::bit_cast<float>(static_cast<std::uint32_t>(bits[c]) << 16) : static_cast<float>(h);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(row[c])) << dtype_name(dt) << " bits " << bits[c];
      } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(row[c]), std::bit_cast<std::uint32_t>(want)) << dtype_name(dt) << " bits " << bits[c];
      }
    }
  }
}

TEST(CpuMatmul, SplitRowsAreTheDequantizedRowsInSplitOrder) {
  for (const std::int64_t cols : {1, 2, 3, 128, 129, 300, 301, 3584}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const std::int64_t rows = 3;
    const auto w = to_bf16(random_values(static_cast<std::size_t>(rows * cols), 7));
    for (const QuantFormat format : {QuantFormat::int4_group, QuantFormat::int8_row, QuantFormat::fp8_row}) {
      QuantizedMatrix m = make_quantized(format, rows, cols);
      ASSERT_TRUE(quantize_rows(reinterpret_cast<const std::byte*>(w.data()), DType::bf16, m, 0, rows).ok());
      std::vector<float> row(cols), expected(cols), got(cols);
      for (std::int64_t r = 0; r < rows; ++r) {
        dequantize_row(m, r, row.data());
        if (format == QuantFormat::int4_group) split_group_order(row.data(), cols, expected.data());
        else expected = row;
        dequantize_row_split(m, r, got.data());
        for (std::int64_t c = 0; c < cols; ++c) {
          // the same product and sum, maybe contracted to one fused multiply-add in one of them
          ASSERT_NEAR(got[c], expected[c], 2e-7f * (std::fabs(expected[c]) + 1.0f)) << "row " << r << " position " << c;
        }
      }
    }
  }
}

struct MatmulCase {
  const char* format;  // "bf16" (in place) or a quantized format
  std::int64_t out, in;
  int n;
  bool bias;
};

void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << c.format << " " << c.out << " x " << c.in << ", " << c.n << " tokens" << (c.bias ? ", bias" : "");
}

class CpuMatmulShapes : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(CpuMatmulShapes, EqualsTheFloat64ProductOfTheSameWeights) {
  const MatmulCase tc = GetParam();
  const auto w16 = to_bf16(random_values(static_cast<std::size_t>(tc.out * tc.in), 11));
  const auto x = random_values(static_cast<std::size_t>(tc.n) * tc.in, 12);
  const auto bias = random_values(static_cast<std::size_t>(tc.out), 13);
  cpu::WeightView view;
  view.data = reinterpret_cast<const std::byte*>(w16.data());
  view.dtype = DType::bf16;
  view.rows = tc.out;
  view.cols = tc.in;
  QuantizedMatrix m;
  const std::string format = tc.format;
  if (format != "bf16") {
    const QuantFormat f = format == "int8" ? QuantFormat::int8_row : format == "fp8" ? QuantFormat::fp8_row : QuantFormat::int4_group;
    m = make_quantized(f, tc.out, tc.in);
    ASSERT_TRUE(quantize_rows(view.data, DType::bf16, m, 0, tc.out).ok());
    view.quant = &m;
  }
  // The reference: the weights the product stands for (load_row: bf16, or dequantize_row) times x,
  // in float64, and the sum of |w x| for the bound.
  std::vector<double> ref(static_cast<std::size_t>(tc.n) * tc.out), mag(ref.size());  // [n, out]
  std::vector<float> row(static_cast<std::size_t>(tc.in));
  for (std::int64_t o = 0; o < tc.out; ++o) {
    cpu::load_row(view, o, row.data());
    for (int t = 0; t < tc.n; ++t) {
      double sum = tc.bias ? bias[o] : 0.0, abs_sum = tc.bias ? std::fabs(bias[o]) : 0.0;
      for (std::int64_t c = 0; c < tc.in; ++c) {
        const double p = static_cast<double>(row[c]) * x[static_cast<std::size_t>(t * tc.in + c)];
        sum += p;
        abs_sum += std::fabs(p);
      }
      ref[static_cast<std::size_t>(t * tc.out + o)] = sum;
      mag[static_cast<std::size_t>(t * tc.out + o)] = abs_sum;
    }
  }
  // Both kernels of several tokens (the widest this CPU runs, and the portable one). The bound:
  // fp32 sums of at most in / 4 + 16 terms in sequence (vector lanes of 4 or more, then the lanes
  // and the chunks), each rounding relative to the sum of |w x|.
  for (const cpu::BlockKernel kernel : {cpu::BlockKernel::best, cpu::BlockKernel::portable}) {
    SCOPED_TRACE(kernel == cpu::BlockKernel::best ? "best kernel" : "portable kernel");
    std::vector<float> y(static_cast<std::size_t>(tc.n) * tc.out, NAN);
    cpu::matmul(x.data(), view, tc.bias ? bias.data() : nullptr, y.data(), tc.n, 2, kernel);
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double tol = static_cast<double>(tc.in / 4 + 16) * 0x1p-24 * mag[i];
      ASSERT_NEAR(y[i], ref[i], tol) << "token " << i / tc.out << " row " << i % tc.out;
    }
  }
  // bf16: each token alone gets the bits it gets in the batch (several answers generated at once
  // equal each one alone). AVX-512 one-token steps read the bf16 rows directly for the same sums;
  // the portable kernel's agree with a row-by-row dot product only for rows of one chunk or less.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  const bool avx512 = false;
#endif
  if (format == "bf16" && (avx512 || tc.in <= 1024)) {
    std::vector<float> batch(static_cast<std::size_t>(tc.n) * tc.out), one(static_cast<std::size_t>(tc.out));
    cpu::matmul(x.data(), view, tc.bias ? bias.data() : nullptr, batch.data(), tc.n, 2);
    for (int t = 0; t < tc.n; ++t) {
      cpu::matmul(x.data() + static_cast<std::size_t>(t) * tc.in, view, tc.bias ? bias.data() : nullptr, one.data(), 1, 2);
      for (std::int64_t o = 0; o < tc.out; ++o)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(one[o]), std::bit_cast<std::uint32_t>(batch[static_cast<std::size_t>(t * tc.out + o)]))
            << "token " << t << " row " << o << ": " << one[o] << " alone, " << batch[static_cast<std::size_t>(t * tc.out + o)] << " in the batch";
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<MatmulCase>& info) {
  const MatmulCase& c = info.param;
  return std::string(c.format) + "_" + std::to_string(c.out) + "x" + std::to_string(c.in) + "_n" + std::to_string(c.n) +
         (c.bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuMatmulShapes,
    ::testing::Values(
        // one token (row by row), then blocks of tokens ending inside a block of 4
        MatmulCase{"bf16", 9, 300, 1, true}, MatmulCase{"bf16", 9, 300, 2, false}, MatmulCase{"bf16", 9, 300, 5, true},
        MatmulCase{"bf16", 4, 1, 3, false}, MatmulCase{"bf16", 1, 7, 4, true},
        // columns across the 1,024-column chunks; rows ending inside a block of 4
        MatmulCase{"bf16", 7, 2051, 6, false}, MatmulCase{"int8", 7, 2051, 6, true}, MatmulCase{"fp8", 5, 1100, 7, false},
        MatmulCase{"int4", 5, 1100, 7, true}, MatmulCase{"int4", 6, 2051, 9, false},
        // int4 with a last group of odd length, one and several tokens
        MatmulCase{"int4", 3, 301, 1, false}, MatmulCase{"int4", 3, 301, 2, true}, MatmulCase{"int4", 11, 301, 17, false},
        MatmulCase{"int8", 3, 301, 4, false}, MatmulCase{"fp8", 3, 301, 1, true},
        // AVX-512's blocks of 6 tokens: whole (12), ending after 1, 2, 5 tokens (13, 8, 11, 17); rows
        // past a block of 16 ending inside a block of 4 (21, 23, 37); columns ending inside a 16-wide
        // vector (300, 1100, 2051: 12, 12 and 3 past one) or short of one (7)
        MatmulCase{"bf16", 37, 1100, 13, true}, MatmulCase{"bf16", 21, 7, 12, false}, MatmulCase{"bf16", 23, 300, 11, true},
        MatmulCase{"int8", 23, 300, 11, false}, MatmulCase{"int8", 37, 2051, 8, true}, MatmulCase{"int8", 21, 1100, 12, false},
        MatmulCase{"fp8", 37, 2051, 8, true}, MatmulCase{"fp8", 21, 300, 13, false}, MatmulCase{"fp8", 23, 1100, 17, true},
        MatmulCase{"int4", 23, 1100, 12, false}, MatmulCase{"int4", 37, 300, 13, true}, MatmulCase{"int4", 21, 2051, 11, false},
        MatmulCase{"int4", 17, 129, 8, true}),
    case_name);

}  // namespace
}  // namespace cosmos
