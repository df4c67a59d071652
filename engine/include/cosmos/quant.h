// Quantized weight formats (DESIGN.md §4), the bytes every backend shares: the CPU backend computes
// with them directly and the CUDA backend lays the same values out for its kernels. The sizes match
// memory_estimate.h's linear_weight_bytes():
//   int8 (W8A16)  symmetric per output row: q = round(w / s) clamped to [-127, 127], w ~ q * s,
//                 s = max|w| / 127 (fp32);
//   fp8  (E4M3)   per output row: q = e4m3(w / s), w ~ e4m3_to_float(q) * s, s = max|w| / 448 (fp32);
//   int4 (W4A16)  per group of 128 columns of a row (the last group may be shorter), asymmetric:
//                 q = round((w - m) / s) clamped to [0, 15], w ~ q * s + m, with m and s bf16:
//                 m = the group's minimum rounded down to bf16 (the largest bf16 <= min) and
//                 s = (max - m) / 15 rounded up to bf16 (the smallest bf16 >= it). Every weight then
//                 lies in [m, m + 15 s] and q is computed against the stored m and s, so their
//                 rounding costs nothing beyond q's own: |error| <= s / 2 (plus fp32 rounding).
//                 (Rounding m and s to nearest instead would let the rounding of m, up to 2^-9 |min|,
//                 push weights out of range when the group's span is small next to its magnitude.)
// round() is to nearest, ties to even, throughout. A row or group of zeros has s = 0 and
// dequantizes to exact zeros; an int4 group of one value that bf16 holds has s = 0, m = that value
// and is exact too. A row whose fp32 scale underflows to 0 (max|w| < ~1e-43) stores q = 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cosmos/dtype.h"
#include "cosmos/error.h"
#include "cosmos/precision.h"

namespace cosmos {

enum class QuantFormat { int8_row, fp8_row, int4_group };

inline constexpr int kInt4GroupSize = 128;

// The format a precision stores its linear weights in; nullopt for bf16 / fp16 (not quantized).
std::optional<QuantFormat> quant_format_for(Precision p);

// One quantized [rows, cols] weight matrix (row-major, output rows first, like the checkpoint).
struct QuantizedMatrix {
  QuantFormat format = QuantFormat::int8_row;
  std::int64_t rows = 0, cols = 0;
  // int8: [rows][cols] two's complement; fp8: [rows][cols] E4M3 bits; int4: [rows][(cols + 1) / 2],
  // column 2i in the low nibble of byte i, column 2i + 1 in the high nibble (a last odd column's
  // high nibble is 0).
  std::vector<std::uint8_t> q;
  std::vector<float> row_scale;            // int8, fp8: [rows] fp32
  std::vector<std::uint16_t> group_scale;  // int4: [rows][groups] bf16 bits, groups = ceil(cols / 128)
  std::vector<std::uint16_t> group_min;    // int4: [rows][groups] bf16 bits
  std::int64_t groups() const { return (cols + kInt4GroupSize - 1) / kInt4GroupSize; }
  // Bytes held (q values and scales): linear_weight_bytes(rows, cols, precision) for its format.
  std::uint64_t bytes() const;
};

// An empty matrix of the given format and shape with every buffer sized (zeros).
QuantizedMatrix make_quantized(QuantFormat format, std::int64_t rows, std::int64_t cols);

// Quantizes rows [row0, row1) of the source matrix W (m.rows x m.cols elements of `dtype`, bf16,
// f16 or f32, row-major at `data`) into m; rows are independent, so callers may split the range
// over threads. A NaN or infinite weight is a bad_input error "quant.non_finite" naming its row and
// column (nothing sensible to store), a finite one beyond +-2^126 (8.5e37: a corrupt checkpoint,
// whose steps would overflow fp32) "quant.range"; another dtype is "quant.dtype", rows outside
// 0 <= row0 <= row1 <= m.rows (or buffers not sized by make_quantized) "quant.rows" / "quant.shape",
// both internal errors.
Status quantize_rows(const std::byte* data, DType dtype, QuantizedMatrix& m, std::int64_t row0, std::int64_t row1);

// dst[0, cols) = the fp32 values row `row` of m stands for.
void dequantize_row(const QuantizedMatrix& m, std::int64_t row, float* dst);

// As dequantize_row, but an int4 row's columns in group-split order: in each group of 128 columns
// (or the last, shorter one) its even columns, then its odd ones; the low nibbles, then the high ones,
// so the loop runs over contiguous bytes and stores and vectorizes. Other formats: dequantize_row.
// A product over several tokens dots such rows with x put in the same order (split_group_order).
void dequantize_row_split(const QuantizedMatrix& m, std::int64_t row, float* dst);

// dst[0, cols) = x[0, cols) in group-split order (dequantize_row_split).
void split_group_order(const float* x, std::int64_t cols, float* dst);

// x prepared once for the int4 products of many rows: the sum of x over each group of 128 columns,
// and x split into its even and odd columns (the low and high nibbles of each byte; odd is padded
// with a 0 for an odd column count), so a row's products read contiguous streams.
struct Int4DotInput {
  std::vector<float> group_sum;  // [ceil(cols / 128)]
  std::vector<float> even, odd;  // [ceil(cols / 2)] each
};
Int4DotInput prepare_int4_dot(const float* x, std::int64_t cols);

// The sum over the columns of row `row` of m times x[0, cols), without materializing the row (what
// a one-token matrix-vector product needs): int8 / fp8 sum(q * x) * s; int4 per group
// s * sum(q * x) + m * sum(x), reading x through `int4` (prepare_int4_dot(x), once for all rows;
// required for int4, ignored otherwise). Equal to the dot product of dequantize_row() with x up to
// fp32 rounding.
float quant_row_dot(const QuantizedMatrix& m, std::int64_t row, const float* x, const Int4DotInput* int4);

// The instructions quant_row_dot runs on: x86-64 AVX-512 (F, BW, DQ, VL) or AVX2 (with FMA and F16C)
// intrinsics, else the portable loops (which the compiler vectorizes well for int8 at best, not for
// fp8's table lookups or int4's group sums). The best level the CPU runs is picked at the first use;
// the results differ only in the order of the fp32 sums.
enum class QuantDotIsa { portable, avx2, avx512 };
const char* name(QuantDotIsa isa);
QuantDotIsa quant_dot_isa();
bool quant_dot_isa_supported(QuantDotIsa isa);
// For tests and benchmarks (process-wide): false, and nothing changed, if this CPU lacks `isa`.
bool set_quant_dot_isa(QuantDotIsa isa);

// OCP FP8 E4M3 ("E4M3FN": bias 7, no infinities, S.1111.111 is NaN, largest finite 448): round to
// nearest even, values beyond +-448 (infinities included) saturate to +-448, NaN becomes 0x7F;
// subnormals (mant / 8 * 2^-6) are exact, and a zero keeps its sign.
std::uint8_t float_to_e4m3(float v);
float e4m3_to_float(std::uint8_t bits);

}  // namespace cosmos
