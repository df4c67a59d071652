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

// ---- quantization by its definition, one weight at a time ------------------------------------
// What quantize_rows must produce, bit for bit (docs/DESIGN.md section 4): the engine vectorizes,
// this reference does not. Minima and maxima keep the first of equal values (a group whose minimum
// is a zero stores -0 exactly when its first zero is -0); rounding is std::nearbyint (ties to even).

// The largest bf16 <= x (x finite).
inline std::uint16_t bf16_floor_bits(float x) {
  auto b = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16);  // toward zero
  if (bf16_value(b) > x) ++b;  // x negative: one step further from zero
  return b;
}
// The smallest bf16 >= v (v > 0, far below bf16's largest value), compared in double.
inline std::uint16_t bf16_ceil_bits(double v) {
  auto b = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
  while (static_cast<double>(bf16_value(b)) < v) ++b;
  while (b > 0 && static_cast<double>(bf16_value(static_cast<std::uint16_t>(b - 1))) >= v) --b;
  return b;
}

inline float clamp_ref(float x, float lo, float hi) { return x < lo ? lo : (hi < x ? hi : x); }

// int8 / fp8: one row's codes and scale.
inline void quantize_row_ref(bool fp8, const float* w, std::int64_t cols, std::uint8_t* q, float& scale) {
  float absmax = 0.0f;
  for (std::int64_t c = 0; c < cols; ++c) absmax = std::fabs(w[c]) > absmax ? std::fabs(w[c]) : absmax;
  scale = absmax / (fp8 ? 448.0f : 127.0f);
  for (std::int64_t c = 0; c < cols; ++c) {
    if (scale == 0.0f) q[c] = 0;
    else if (fp8) q[c] = e4m3_brute_force(w[c] / scale);
    else q[c] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::nearbyint(clamp_ref(w[c] / scale, -127.0f, 127.0f))));
  }
}

// int4: one group [c0, c1) of a row; q holds the row's bytes (column c in byte c / 2, low nibble
// for even c).
inline void quantize_group_ref(const float* w, std::int64_t c0, std::int64_t c1, std::uint8_t* q,
                               std::uint16_t& scale_bits, std::uint16_t& min_bits) {
  float lo = w[c0], hi = w[c0];
  for (std::int64_t c = c0 + 1; c < c1; ++c) {
    if (w[c] < lo) lo = w[c];
    if (hi < w[c]) hi = w[c];
  }
  min_bits = bf16_floor_bits(lo);
  const float m = bf16_value(min_bits);
  const double span = (static_cast<double>(hi) - static_cast<double>(m)) / 15.0;
  scale_bits = span > 0.0 ? bf16_ceil_bits(span) : std::uint16_t{0};
  const float s = bf16_value(scale_bits);
  for (std::int64_t c = c0; c < c1; ++c) {
    const auto n = s == 0.0f ? 0u : static_cast<unsigned>(std::nearbyint(clamp_ref((w[c] - m) / s, 0.0f, 15.0f)));
    std::uint8_t& byte = q[c / 2];
    byte = static_cast<std::uint8_t>(c % 2 ? (byte & 0x0Fu) | (n << 4) : (byte & 0xF0u) | n);
  }
}

}  // namespace cosmos::quant_test
