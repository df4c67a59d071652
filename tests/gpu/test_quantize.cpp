// launch_quantize / launch_dequantize (kernels/quantize.cuh) against the CPU quantizer
// (cosmos::quantize_rows / dequantize_row), which they must equal bit for bit on bf16 sources:
//   - every format x shapes (rows 1..5 x cols 1, 7, 127, 128, 129, 255, 256, 1000, 3584; the vector
//     path and, with every pointer offset by one element, the element path) x value patterns (random
//     normal-ish, zeros of both signs, constant rows, a group of one value, tiny values down to bf16
//     subnormals, huge values up to +-2^126, mixed signs over many magnitudes, exact rounding ties,
//     int4 scales just above a bf16 value);
//     outputs poisoned before each launch (twice, with two poisons, so no unwritten byte can pass
//     by matching the poison), guards before and after every buffer that must stay poisoned, the
//     status poisoned with 0 (a missing reset reads as "row 0, column 0 is bad");
//   - every byte of q and every bit of the scales / minima against quantize_rows; the dequantized
//     bf16 against dequantize_row rounded to nearest even;
//   - dequantization of arbitrary bytes (all E4M3 codes, subnormal scales, random int4 scales and
//     minima: products and sums that an FMA would round differently);
//   - NaN / infinity / beyond-2^126 weights: the smallest bad (row, column) of each kind, the CPU's
//     error being the smaller of the two, and rows before it quantized as on the CPU;
//   - a 4608 x 3584 matrix (with a timing report), and quantizing / dequantizing row ranges through
//     offset pointers, which must equal the whole-matrix launch.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "quantize_test_common.h"

namespace cosmos {
namespace {

using namespace quantize_test;


TEST_P(GpuQuantize, MatchesCpuBitForBit) {
  const auto [kind, pattern] = GetParam();
  std::uint64_t seed = 1;
  for (const std::int64_t cols : {1, 7, 127, 128, 129, 255, 256, 1000, 3584}) {
    for (std::int64_t rows = 1; rows <= 5; ++rows) {
      const std::vector<std::uint16_t> data = make_data(pattern, kind, rows, cols, seed++);
      for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (off ? " misaligned" : " aligned"));
        check_case(kind, data, rows, cols, off);
        if (HasFailure()) return;
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<QuantKind, Pattern>>& info) {
  return std::string(kind_name(std::get<0>(info.param))) + "_" + pattern_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Patterns, GpuQuantize,
                         ::testing::Combine(::testing::Values(QuantKind::int8_row, QuantKind::fp8_row,
                                                             QuantKind::int4_group),
                                            ::testing::Values(Pattern::normal, Pattern::zeros, Pattern::constant,
                                                              Pattern::one_value_group, Pattern::tiny, Pattern::huge,
                                                              Pattern::mixed_signs, Pattern::ties,
                                                              Pattern::scale_edge)),
                         param_name);

}  // namespace
}  // namespace cosmos
