// Quantized weight layouts on the GPU: the very bytes of cosmos/quant.h (engine), so files of the
// quantized-weight cache upload as they are and the CPU backend is the reference:
//   int8_row   q [rows][cols] int8, w ~ q * row_scale[r] (fp32 [rows])
//   fp8_row    q [rows][cols] E4M3 bits, w ~ e4m3(q) * row_scale[r] (fp32 [rows])
//   int4_group q [rows][(cols + 1) / 2], column 2i in the low nibble of byte i, 2i + 1 in the high
//              nibble; per group of 128 columns of a row (the last may be shorter) bf16 scale s and
//              bf16 minimum m ([rows][groups] each): w ~ q * s + m
// The kernels library does not depend on the engine, so the format enum is repeated here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cosmos::kernels {

enum class QuantKind : int { int8_row = 0, fp8_row = 1, int4_group = 2 };

inline constexpr int kQuantGroup = 128;

// One quantized [rows, cols] matrix in device memory.
struct QuantMatrix {
  QuantKind kind = QuantKind::int8_row;
  const std::uint8_t* q = nullptr;             // see above
  const float* row_scale = nullptr;            // int8 / fp8: [rows] fp32
  const std::uint16_t* group_scale = nullptr;  // int4: [rows][groups] bf16 bits
  const std::uint16_t* group_min = nullptr;    // int4: [rows][groups] bf16 bits
};

inline constexpr std::int64_t quant_groups(std::int64_t cols) { return (cols + kQuantGroup - 1) / kQuantGroup; }
// Bytes of q per row: cols (int8, fp8) or (cols + 1) / 2 (int4).
inline constexpr std::int64_t quant_row_bytes(QuantKind k, std::int64_t cols) {
  return k == QuantKind::int4_group ? (cols + 1) / 2 : cols;
}

}  // namespace cosmos::kernels
