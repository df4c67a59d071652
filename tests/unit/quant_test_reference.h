// Reference helpers for the quantization tests (test_quant.cpp, test_e4m3.cpp), written
// independently of the engine: bf16 rounding and stepping, and the E4M3 code values from their bit
// fields with a brute-force nearest-code search.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace cosmos::quant_test {

inline std::uint16_t bf16_bits_rne(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_value(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
// The next bf16 value above the one with bits b (b finite).
inline float bf16_next_up(std::uint16_t b) {
  if (b == 0x8000u) return bf16_value(0x0001u);  // -0 -> smallest positive
  return bf16_value(static_cast<std::uint16_t>((b & 0x8000u) ? b - 1 : b + 1));
}

// The value of E4M3 code c from its sign, exponent and mantissa fields (NaN for S.1111.111).
inline double e4m3_reference(int c) {
  const int sign = c >> 7, e = (c >> 3) & 15, mant = c & 7;
  if (e == 15 && mant == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(mant / 8.0, -6) : std::ldexp(1.0 + mant / 8.0, e - 7);
  return sign ? -mag : mag;
}

// Nearest finite E4M3 code by exhaustive search, ties to the even code, beyond 448 saturating.
inline std::uint8_t e4m3_brute_force(float v) {
  const double a = std::fabs(static_cast<double>(v));
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(e4m3_reference(c) - a), db = std::fabs(e4m3_reference(best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<std::uint8_t>(best | (std::signbit(v) ? 0x80 : 0));
}

}  // namespace cosmos::quant_test
