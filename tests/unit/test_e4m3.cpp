// The E4M3 codec of the fp8 weight format (cosmos/quant.h): every code against the value of its bit
// fields, encode as the inverse of decode, ties to even and their neighbours, saturation at 448,
// subnormals and underflow, NaN, and a brute-force nearest-code search on random floats. (Part of
// test_quant; the helpers are in quant_test_reference.h.)
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "cosmos/quant.h"
#include "quant_test_reference.h"

namespace cosmos {
namespace {

using quant_test::e4m3_brute_force;
using quant_test::e4m3_reference;

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(E4m3, DecodesEveryCodeFromItsBitFields) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_reference(c);
    const float got = e4m3_to_float(static_cast<std::uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), c >= 0x80) << "code " << c;
  }
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));
}

TEST(E4m3, EncodeInvertsDecodeForEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if (c == 0x7F || c == 0xFF) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<std::uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
}

TEST(E4m3, TiesGoToTheEvenCodeAndNeighboursOfTiesGoTheirWay) {
  for (int c = 0; c < 0x7E; ++c) {  // adjacent finite codes c, c + 1 (subnormal/normal and binade edges)
    for (const int sign : {0, 0x80}) {
      const float lo = e4m3_to_float(static_cast<std::uint8_t>(c | sign));
      const float hi = e4m3_to_float(static_cast<std::uint8_t>((c + 1) | sign));
      const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // 5 significant bits: exact
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
      const int even = (c % 2 == 0 ? c : c + 1) | sign;
      EXPECT_EQ(float_to_e4m3(mid), even) << "tie between codes " << (c | sign) << " and " << ((c + 1) | sign);
      EXPECT_EQ(float_to_e4m3(std::nextafter(mid, lo)), c | sign) << "just inside code " << (c | sign);
      EXPECT_EQ(float_to_e4m3(std::nextafter(mid, hi)), (c + 1) | sign) << "just inside code " << ((c + 1) | sign);
    }
  }
}

TEST(E4m3, SaturatesAt448) {
  for (const float v : {448.0f, 448.5f, 449.0f, 463.99f, 464.0f, 464.01f, 479.0f, 480.0f, 1e6f, 3.4e38f, kInf}) {
    EXPECT_EQ(float_to_e4m3(v), 0x7E) << v;
    EXPECT_EQ(float_to_e4m3(-v), 0xFE) << -v;
  }
  EXPECT_EQ(float_to_e4m3(447.0f), 0x7E);  // rounds to 448 (between 416 and 448)
  EXPECT_EQ(float_to_e4m3(431.0f), 0x7D);  // nearer 416
}

TEST(E4m3, SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.0f, -9);  // smallest subnormal
  EXPECT_EQ(float_to_e4m3(tiny), 0x01);
  EXPECT_EQ(float_to_e4m3(-tiny), 0x81);
  EXPECT_EQ(float_to_e4m3(tiny / 2), 0x00);  // tie with 0: even
  EXPECT_EQ(float_to_e4m3(-tiny / 2), 0x80);
  EXPECT_EQ(float_to_e4m3(std::nextafter(tiny / 2, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::nextafter(tiny / 2, 0.0f)), 0x00);
  for (const float v : {tiny / 4, 1e-20f, std::numeric_limits<float>::denorm_min(), FLT_MIN}) {
    EXPECT_EQ(float_to_e4m3(v), 0x00) << v;
    EXPECT_EQ(float_to_e4m3(-v), 0x80) << v;
  }
  EXPECT_EQ(float_to_e4m3(3 * tiny), 0x03);
  EXPECT_EQ(float_to_e4m3(7.5f * tiny), 0x08);  // tie between 7 and 8 (the smallest normal): even
}

TEST(E4m3, NaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float_to_e4m3(nan), 0x7F);
  EXPECT_TRUE(std::isnan(e4m3_to_float(float_to_e4m3(-nan))));
  EXPECT_TRUE(std::isnan(e4m3_to_float(float_to_e4m3(std::numeric_limits<float>::signaling_NaN()))));
}

TEST(E4m3, MatchesBruteForceNearestCodeOnRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> expo(-14.0f, 10.0f), mant(1.0f, 2.0f);
  for (int i = 0; i < 100000; ++i) {
    float v = std::ldexp(mant(rng), static_cast<int>(std::floor(expo(rng))));
    if (i & 1) v = -v;
    ASSERT_EQ(float_to_e4m3(v), e4m3_brute_force(v)) << "v = " << v;
  }
}

// Every float whose low 16 bits are one of the patterns that decide a rounding (exact, just above or
// below a tie, all ones) with every high half: all exponents and the mantissa bits where E4M3's
// normals and subnormals round. The encoder is branch-free selects (it vectorizes in
// quantize_fp8_row); the brute-force search is the definition.
TEST(E4m3, MatchesBruteForceOnEveryHighHalfWithEdgeLowHalves) {
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (const std::uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      const float v = std::bit_cast<float>(hi << 16 | lo);
      if (std::isnan(v)) {
        ASSERT_EQ(float_to_e4m3(v), 0x7F);
        continue;
      }
      ASSERT_EQ(float_to_e4m3(v), e4m3_brute_force(v)) << std::hex << "bits 0x" << (hi << 16 | lo);
    }
  }
}

}  // namespace
}  // namespace cosmos
