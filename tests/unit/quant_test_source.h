// Source matrices and whole-matrix helpers shared by the quantization tests (test_quant.cpp,
// test_quant_dot.cpp): a matrix in bf16 / f16 / f32 with the exact values it holds, quantized or
// dequantized in one call.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cosmos/quant.h"
#include "quant_test_reference.h"

namespace cosmos::quant_test {

// A source matrix in one dtype and the exact values it holds (the inputs rounded to that dtype).
struct Source {
  DType dtype;
  std::vector<std::byte> bytes;
  std::vector<float> w;
};

inline Source make_source(const std::vector<float>& v, DType dtype) {
  Source s{dtype, std::vector<std::byte>(v.size() * (dtype == DType::f32 ? 4 : 2)), v};
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(s.bytes.data() + 4 * i, &v[i], 4);
    } else if (dtype == DType::bf16) {
      const std::uint16_t b = bf16_bits_rne(v[i]);
      std::memcpy(s.bytes.data() + 2 * i, &b, 2);
      s.w[i] = bf16_value(b);
    } else {
      const auto h = static_cast<_Float16>(v[i]);
      std::memcpy(s.bytes.data() + 2 * i, &h, 2);
      s.w[i] = static_cast<float>(h);
    }
  }
  return s;
}

inline QuantizedMatrix quantize_all(const Source& src, QuantFormat f, std::int64_t rows, std::int64_t cols) {
  QuantizedMatrix m = make_quantized(f, rows, cols);
  const Status st = quantize_rows(src.bytes.data(), src.dtype, m, 0, rows);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return m;
}

inline std::vector<float> dequantize_all(const QuantizedMatrix& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) dequantize_row(m, r, out.data() + r * m.cols);
  return out;
}

inline const char* name(QuantFormat f) {
  return f == QuantFormat::int8_row ? "int8" : f == QuantFormat::fp8_row ? "fp8" : "int4";
}

}  // namespace cosmos::quant_test
