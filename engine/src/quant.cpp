// Quantized weight formats (cosmos/quant.h): int8 and fp8 (E4M3) per output row, int4 per group of
// 128 columns with a bf16 scale and minimum; the E4M3 codec; sizes matching linear_weight_bytes().
//
// quantize_rows() reads each source row once to convert it to fp32, reject NaN / infinity and find
// every group's minimum and maximum (the row's max|w| follows from them), then once more to quantize
// from that fp32 copy. Rounding to an integer is to nearest, ties to even, everywhere (the result
// std::nearbyint gives in the default rounding mode).
#include "cosmos/quant.h"
#include "quant_dot_x86.h"
#include "simd_clones.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace cosmos {
namespace {

// ---- bf16 -------------------------------------------------------------------------------------

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// The largest bf16 <= x, for |x| <= kMaxWeight.
std::uint16_t bf16_round_down(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  std::uint32_t hi = u >> 16;
  if ((u & 0xFFFFu) != 0 && (u & 0x80000000u) != 0) ++hi;  // negative: truncation rounded it up
  return static_cast<std::uint16_t>(hi);
}

// The smallest bf16 >= x for a finite x >= 0 that is far below bf16's largest finite value.
std::uint16_t bf16_round_up_nonneg(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u >> 16) + ((u & 0xFFFFu) != 0 ? 1u : 0u));
}

// ---- rounding ---------------------------------------------------------------------------------

// Round to nearest, ties to even, for |x| <= 2^22: adding 1.5 * 2^23 leaves no fraction bits, so the
// FPU's (default) round-to-nearest-even does the work. Same result as std::nearbyint, without a
// library call on baseline x86-64. Callers clamp x first.
inline float round_even(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

// std::clamp for a non-NaN x, by value: the selects vectorize (std::clamp's references kept GCC 12
// from vectorizing the loops that call it).
inline float clamp_value(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return hi < x ? hi : x;
}

// ---- E4M3 decoding table ----------------------------------------------------------------------

constexpr float e4m3_value(unsigned code) {
  const std::uint32_t sign = (code & 0x80u) << 24;
  const unsigned exp = (code >> 3) & 0xFu;
  const unsigned mant = code & 0x7u;
  if (exp == 0xFu && mant == 0x7u) return std::bit_cast<float>(sign | 0x7FC00000u);  // NaN
  if (exp == 0) {                                                                      // mant/8 * 2^-6
    const float mag = static_cast<float>(mant) * 0x1p-9f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(mag) | sign);
  }
  // 2^(exp - 7) * (1 + mant/8): fp32 exponent field exp - 7 + 127, mantissa's top three bits.
  return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (static_cast<std::uint32_t>(mant) << 20));
}

// e4m3_value as selects instead of branches, so a loop over codes vectorizes (dequantize_row): the
// same bits for every code, which test_quant checks for all 256.
inline float e4m3_select(std::uint32_t code) {
  const std::uint32_t mag = code & 0x7Fu;
  const std::uint32_t normal = (mag << 20) + (120u << 23);  // exp 1..15: exponent field exp + 120
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(mag)) * 0x1p-9f);
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(mag < 8u);     // all ones or zero
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(mag == 0x7Fu);
  const std::uint32_t bits = (((subnormal & is_sub) | (normal & ~is_sub)) & ~is_nan) | (0x7FC00000u & is_nan);
  return std::bit_cast<float>(bits | (code & 0x80u) << 24);
}

constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = e4m3_value(c);
  return t;
}

constexpr std::array<float, 256> kE4m3 = make_e4m3_table();

// ---- E4M3 encoding ----------------------------------------------------------------------------

// float_to_e4m3 as selects instead of branches, so quantize_fp8_row's loop vectorizes: the nearest
// E4M3 value, ties to even; |v| >= 448 (infinity too) saturates to +-448; NaN gives 0x7F. Normals
// round their 23 mantissa bits to 3 at bit 20 (a carry runs into the exponent); below 2^-6 the code
// is |v| * 2^9 rounded to an integer (exact scaling; 8 is the smallest normal's code, 0x08).
inline std::uint8_t e4m3_encode(float v) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal = ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - (120u << 3);  // rebias 127 -> 7
  const float below = std::bit_cast<float>(a < 0x3C800000u ? a : 0x3C800000u);  // |v| capped at 2^-6 (NaN too)
  const auto sub = static_cast<std::uint32_t>(static_cast<std::int32_t>(round_even(below * 512.0f)));
  std::uint32_t code = a >= 0x3C800000u ? normal : sub;  // |v| >= 2^-6: a normal
  code = a >= 0x43E00000u ? 0x7Eu : code;               // |v| >= 448
  return static_cast<std::uint8_t>(a > 0x7F800000u ? 0x7Fu : (sign | code));
}

// ---- reading source rows ----------------------------------------------------------------------

// The largest magnitude quantized: 2^126 keeps every step in range (int4's max - min <= 2^127, so
// 15 s and q * s + m stay below FLT_MAX; int8 / fp8's q * s <= max|w| plus rounding). Weights
// beyond it (f32 or bf16 values near 3e38) mean a broken checkpoint, and are rejected.
constexpr float kMaxWeight = 0x1p126f;

struct LoadBf16 {
  static float at(const std::byte* row, std::int64_t c) {
    std::uint16_t b;
    std::memcpy(&b, row + 2 * c, 2);
    return bf16_to_float(b);
  }
};
struct LoadF16 {
  static float at(const std::byte* row, std::int64_t c) {
    _Float16 h;
    std::memcpy(&h, row + 2 * c, 2);
    return static_cast<float>(h);
  }
};
struct LoadF32 {
  static float at(const std::byte* row, std::int64_t c) {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  }
};

// Converts one source row to fp32 in dst and records each group's min / max. Returns the first
// column that is NaN, infinite or beyond kMaxWeight, or -1. The loops vectorize (omp simd), so their
// minimum and maximum come out of vector lanes in any order; that changes nothing but the sign of a
// zero, and the scalar rule (std::min / std::max keep the first of equal values, which the GPU's
// quantizer follows too) is restored for a group whose minimum or maximum is a zero.
template <typename Load>
[[gnu::always_inline]] inline std::int64_t load_row(const std::byte* row, std::int64_t cols, float* dst, float* gmin,
                                                    float* gmax) {
  for (std::int64_t c0 = 0, g = 0; c0 < cols; c0 += kInt4GroupSize, ++g) {
    const std::int64_t c1 = std::min<std::int64_t>(cols, c0 + kInt4GroupSize);
    float mn = std::numeric_limits<float>::infinity(), mx = -mn;
    int bad = 0;
#pragma omp simd reduction(min : mn) reduction(max : mx) reduction(| : bad)
    for (std::int64_t c = c0; c < c1; ++c) {
      const float x = Load::at(row, c);
      dst[c] = x;
      bad |= !(std::fabs(x) <= kMaxWeight);  // NaN, infinity or out of range
      mn = x < mn ? x : mn;
      mx = mx < x ? x : mx;
    }
    if (bad) {
      for (std::int64_t c = c0; c < c1; ++c)
        if (!(std::fabs(dst[c]) <= kMaxWeight)) return c;
    }
    if (mn == 0.0f || mx == 0.0f) {  // -0 or +0: the first zero's sign, as a scalar pass keeps it
      const float* z = std::find(dst + c0, dst + c1, 0.0f);
      if (mn == 0.0f) mn = *z;
      if (mx == 0.0f) mx = *z;
    }
    gmin[g] = mn;
    gmax[g] = mx;
  }
  return -1;
}

// bf16 checkpoints' rows (the common case) at each x86-64 level's vector width.
COSMOS_SIMD_CLONES std::int64_t load_row_bf16(const std::byte* row, std::int64_t cols, float* dst, float* gmin, float* gmax) {
  return load_row<LoadBf16>(row, cols, dst, gmin, gmax);
}

// ---- one row of each format (src: the row in fp32; gmin / gmax: its groups' ranges) ------------

float row_absmax(const float* gmin, const float* gmax, std::int64_t groups) {
  float a = 0.0f;
  for (std::int64_t g = 0; g < groups; ++g) a = std::max(a, std::max(-gmin[g], gmax[g]));
  return a;
}

COSMOS_SIMD_CLONES void quantize_int8_row(const float* src, std::int64_t cols, float absmax, float& scale, std::uint8_t* q) {
  const float s = absmax / 127.0f;
  scale = s;
  if (s == 0.0f) {  // a row of zeros (or one so tiny that its scale underflows)
    std::fill(q, q + cols, std::uint8_t{0});
    return;
  }
#pragma omp simd
  for (std::int64_t c = 0; c < cols; ++c) {
    const float x = clamp_value(src[c] / s, -127.0f, 127.0f);
    q[c] = static_cast<std::uint8_t>(static_cast<std::int8_t>(round_even(x)));
  }
}

COSMOS_SIMD_CLONES void quantize_fp8_row(const float* src, std::int64_t cols, float absmax, float& scale, std::uint8_t* q) {
  const float s = absmax / 448.0f;
  scale = s;
  if (s == 0.0f) {
    std::fill(q, q + cols, std::uint8_t{0});
    return;
  }
#pragma omp simd
  for (std::int64_t c = 0; c < cols; ++c) q[c] = e4m3_encode(src[c] / s);
}

// One int4 group [c0, c1) with range [lo, hi]: chooses m (bf16 rounded down from lo) and s (bf16
// rounded up from (hi - m) / 15), so every weight lies in [m, m + 15 s] and only q's own rounding
// (at most s/2) remains. c0 is even (groups are 128 wide), so bytes are never shared between groups.
[[gnu::always_inline]] inline void quantize_int4_group(const float* src, std::int64_t c0, std::int64_t c1, float lo,
                                                      float hi, std::uint16_t& scale_bits, std::uint16_t& min_bits,
                                                      std::uint8_t* q) {
  min_bits = bf16_round_down(lo);
  const float m = bf16_to_float(min_bits);
  const double span = (static_cast<double>(hi) - static_cast<double>(m)) / 15.0;  // exact enough, no overflow
  float s = 0.0f;
  if (span > 0.0) {
    float f = static_cast<float>(span);
    if (static_cast<double>(f) < span) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    scale_bits = bf16_round_up_nonneg(f);
    s = bf16_to_float(scale_bits);
  } else {
    scale_bits = 0;
  }
  if (s == 0.0f) {  // constant group (zeros included) that bf16 holds exactly: every q is 0
    std::fill(q + c0 / 2, q + (c1 + 1) / 2, std::uint8_t{0});
    return;
  }
  auto q4 = [&](float w) {
    return static_cast<std::uint8_t>(static_cast<int>(round_even(clamp_value((w - m) / s, 0.0f, 15.0f))));
  };
  const std::int64_t pairs = (c1 - c0) / 2;
  const float* w = src + c0;
  std::uint8_t* out = q + c0 / 2;
#pragma omp simd
  for (std::int64_t i = 0; i < pairs; ++i) out[i] = static_cast<std::uint8_t>(q4(w[2 * i]) | (q4(w[2 * i + 1]) << 4));
  if (c0 + 2 * pairs < c1) out[pairs] = q4(w[2 * pairs]);  // a last odd column: high nibble 0
}

// A row's groups: scale_bits / min_bits [groups], q [ceil(cols / 2)].
COSMOS_SIMD_CLONES void quantize_int4_row(const float* src, std::int64_t cols, const float* gmin, const float* gmax,
                                          std::uint16_t* scale_bits, std::uint16_t* min_bits, std::uint8_t* q) {
  for (std::int64_t g = 0, c0 = 0; c0 < cols; ++g, c0 += kInt4GroupSize)
    quantize_int4_group(src, c0, std::min(cols, c0 + kInt4GroupSize), gmin[g], gmax[g], scale_bits[g], min_bits[g], q);
}

template <typename Load>
Status quantize_rows_as(const std::byte* data, std::size_t elem, QuantizedMatrix& m, std::int64_t row0,
                        std::int64_t row1) {
  const std::int64_t cols = m.cols, groups = m.groups();
  const std::int64_t row_bytes = m.format == QuantFormat::int4_group ? (cols + 1) / 2 : cols;
  std::vector<float> buf(static_cast<std::size_t>(cols));
  std::vector<float> gmin(static_cast<std::size_t>(groups)), gmax(static_cast<std::size_t>(groups));
  for (std::int64_t r = row0; r < row1; ++r) {
    const std::byte* src = data + static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) * elem;
    std::int64_t bad;
    if constexpr (std::is_same_v<Load, LoadBf16>) bad = load_row_bf16(src, cols, buf.data(), gmin.data(), gmax.data());
    else bad = load_row<Load>(src, cols, buf.data(), gmin.data(), gmax.data());
    if (bad >= 0) {
      const float x = Load::at(src, bad);
      const std::string where = "the weight at row " + std::to_string(r) + ", column " + std::to_string(bad);
      if (std::isfinite(x))
        return make_error(ErrorCategory::bad_input, "quant.range",
                          where + " is " + std::to_string(x) +
                              ", beyond the +-2^126 that quantized weights hold: the checkpoint looks corrupt");
      return make_error(ErrorCategory::bad_input, "quant.non_finite",
                        where + " is " + (std::isnan(x) ? "NaN" : "infinite") +
                            ": the checkpoint holds a non-finite weight, which cannot be quantized");
    }
    std::uint8_t* q = m.q.data() + r * row_bytes;
    switch (m.format) {
      case QuantFormat::int8_row:
        quantize_int8_row(buf.data(), cols, row_absmax(gmin.data(), gmax.data(), groups), m.row_scale[r], q);
        break;
      case QuantFormat::fp8_row:
        quantize_fp8_row(buf.data(), cols, row_absmax(gmin.data(), gmax.data(), groups), m.row_scale[r], q);
        break;
      case QuantFormat::int4_group: {
        const std::size_t k = static_cast<std::size_t>(r * groups);
        quantize_int4_row(buf.data(), cols, gmin.data(), gmax.data(), &m.group_scale[k], &m.group_min[k], q);
        break;
      }
    }
  }
  return ok_status();
}

}  // namespace

std::optional<QuantFormat> quant_format_for(Precision p) {
  switch (p) {
    case Precision::fp8: return QuantFormat::fp8_row;
    case Precision::int8: return QuantFormat::int8_row;
    case Precision::int4: return QuantFormat::int4_group;
    case Precision::bf16:
    case Precision::fp16: return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t QuantizedMatrix::bytes() const {
  return q.size() + row_scale.size() * sizeof(float) + group_scale.size() * sizeof(std::uint16_t) +
         group_min.size() * sizeof(std::uint16_t);
}

namespace {

// Fills v with n zeros in memory that Linux may back with 2 MB pages: the buffer is reserved (not
// yet touched), its whole 2 MB pages are advised MADV_HUGEPAGE (transparent huge pages in "madvise"
// mode; a no-op in "always" mode or where the kernel lacks them, so a failure changes nothing but
// speed), and only then filled. A 7B model's int4 weights then fault in ~2,200 times instead of
// ~1.1 million (each fault costs microseconds in a VM): bench_quantize does not see it (it touches
// its buffers before timing), a CPU load does.
void assign_zeros_huge(std::vector<std::uint8_t>& v, std::size_t n) {
  v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1), hi = (begin + n) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#endif
  v.assign(n, 0);
}

}  // namespace

QuantizedMatrix make_quantized(QuantFormat format, std::int64_t rows, std::int64_t cols) {
  assert(rows >= 0 && cols >= 0);
  QuantizedMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  switch (format) {
    case QuantFormat::int8_row:
    case QuantFormat::fp8_row:
      assign_zeros_huge(m.q, r * c);
      m.row_scale.assign(r, 0.0f);
      break;
    case QuantFormat::int4_group:
      assign_zeros_huge(m.q, r * ((c + 1) / 2));
      m.group_scale.assign(r * static_cast<std::size_t>(m.groups()), 0);
      m.group_min.assign(r * static_cast<std::size_t>(m.groups()), 0);
      break;
  }
  return m;
}

Status quantize_rows(const std::byte* data, DType dtype, QuantizedMatrix& m, std::int64_t row0, std::int64_t row1) {
  if (row0 < 0 || row0 > row1 || row1 > m.rows)
    return make_error(ErrorCategory::internal, "quant.rows",
                      "rows [" + std::to_string(row0) + ", " + std::to_string(row1) +
                          ") are outside the quantized matrix's " + std::to_string(m.rows) + " rows");
  const auto r = static_cast<std::uint64_t>(m.rows), c = static_cast<std::uint64_t>(m.cols);
  const auto groups = static_cast<std::uint64_t>(m.groups());
  const bool sized = m.cols >= 0 && (m.format == QuantFormat::int4_group
                                         ? m.q.size() == r * ((c + 1) / 2) && m.group_scale.size() == r * groups &&
                                               m.group_min.size() == r * groups
                                         : m.q.size() == r * c && m.row_scale.size() == r);
  if (!sized)
    return make_error(ErrorCategory::internal, "quant.shape",
                      "the quantized matrix's buffers do not match its shape (use make_quantized)");
  switch (dtype) {
    case DType::bf16: return quantize_rows_as<LoadBf16>(data, 2, m, row0, row1);
    case DType::f16: return quantize_rows_as<LoadF16>(data, 2, m, row0, row1);
    case DType::f32: return quantize_rows_as<LoadF32>(data, 4, m, row0, row1);
    default: break;
  }
  return make_error(ErrorCategory::internal, "quant.dtype",
                    "cannot quantize " + std::string(dtype_name(dtype)) + " weights (only BF16, F16 and F32)");
}

COSMOS_SIMD_CLONES void dequantize_row(const QuantizedMatrix& m, std::int64_t row, float* dst) {
  assert(row >= 0 && row < m.rows);
  const std::int64_t cols = m.cols;
  switch (m.format) {
    case QuantFormat::int8_row: {
      const std::uint8_t* q = m.q.data() + row * cols;
      const float s = m.row_scale[static_cast<std::size_t>(row)];
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) dst[c] = static_cast<float>(static_cast<std::int8_t>(q[c])) * s;
      return;
    }
    case QuantFormat::fp8_row: {
      const std::uint8_t* q = m.q.data() + row * cols;
      const float s = m.row_scale[static_cast<std::size_t>(row)];
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) dst[c] = e4m3_select(q[c]) * s;  // kE4m3[q[c]] * s
      return;
    }
    case QuantFormat::int4_group: {
      const std::uint8_t* q = m.q.data() + row * ((cols + 1) / 2);
      const std::int64_t groups = m.groups();
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::size_t k = static_cast<std::size_t>(row * groups + g);
        const float s = bf16_to_float(m.group_scale[k]), mn = bf16_to_float(m.group_min[k]);
        const std::int64_t c0 = g * kInt4GroupSize, c1 = std::min(cols, c0 + kInt4GroupSize);
        std::int64_t c = c0;
        for (; c + 1 < c1; c += 2) {
          const std::uint8_t b = q[c / 2];
          dst[c] = static_cast<float>(b & 0xF) * s + mn;
          dst[c + 1] = static_cast<float>(b >> 4) * s + mn;
        }
        if (c < c1) dst[c] = static_cast<float>(q[c / 2] & 0xF) * s + mn;
      }
      return;
    }
  }
}

COSMOS_SIMD_CLONES void dequantize_row_split(const QuantizedMatrix& m, std::int64_t row, float* dst) {
  if (m.format != QuantFormat::int4_group) {
    dequantize_row(m, row, dst);
    return;
  }
  assert(row >= 0 && row < m.rows);
  const std::int64_t cols = m.cols, groups = m.groups();
  const std::uint8_t* q = m.q.data() + row * ((cols + 1) / 2);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::size_t k = static_cast<std::size_t>(row * groups + g);
    const float s = bf16_to_float(m.group_scale[k]), mn = bf16_to_float(m.group_min[k]);
    const std::int64_t c0 = g * kInt4GroupSize, len = std::min<std::int64_t>(kInt4GroupSize, cols - c0);
    const std::int64_t pairs = len / 2, evens = (len + 1) / 2;  // a last odd column: one more even one
    const std::uint8_t* b = q + c0 / 2;
    float* lo = dst + c0;
    float* hi = lo + evens;
#pragma omp simd
    for (std::int64_t j = 0; j < pairs; ++j) {
      lo[j] = static_cast<float>(b[j] & 0xF) * s + mn;
      hi[j] = static_cast<float>(b[j] >> 4) * s + mn;
    }
    if (evens > pairs) lo[pairs] = static_cast<float>(b[pairs] & 0xF) * s + mn;
  }
}

void split_group_order(const float* x, std::int64_t cols, float* dst) {
  for (std::int64_t c0 = 0; c0 < cols; c0 += kInt4GroupSize) {
    const std::int64_t len = std::min<std::int64_t>(kInt4GroupSize, cols - c0), evens = (len + 1) / 2;
    for (std::int64_t c = 0; c < len; ++c) dst[c0 + (c % 2 ? evens + c / 2 : c / 2)] = x[c0 + c];
  }
}

Int4DotInput prepare_int4_dot(const float* x, std::int64_t cols) {
  Int4DotInput in;
  const std::int64_t bytes = (cols + 1) / 2;
  in.group_sum.resize(static_cast<std::size_t>((cols + kInt4GroupSize - 1) / kInt4GroupSize));
  in.even.resize(static_cast<std::size_t>(bytes));
  in.odd.assign(static_cast<std::size_t>(bytes), 0.0f);
  for (std::int64_t c = 0; c < cols; ++c) (c % 2 ? in.odd : in.even)[static_cast<std::size_t>(c / 2)] = x[c];
  for (std::int64_t c0 = 0, g = 0; c0 < cols; c0 += kInt4GroupSize, ++g) {
    const std::int64_t c1 = std::min(cols, c0 + kInt4GroupSize);
    float s = 0.0f;
    for (std::int64_t c = c0; c < c1; ++c) s += x[c];
    in.group_sum[static_cast<std::size_t>(g)] = s;
  }
  return in;
}

COSMOS_SIMD_CLONES float quant_row_dot(const QuantizedMatrix& m, std::int64_t row, const float* x,
                                         const Int4DotInput* int4) {
  assert(row >= 0 && row < m.rows);
  if (const auto fast = quant_dot::row_dot(quant_dot_isa(), m, row, x, int4)) return *fast;  // intrinsics
  const std::int64_t cols = m.cols;
  switch (m.format) {
    case QuantFormat::int8_row: {
      const auto* q = reinterpret_cast<const std::int8_t*>(m.q.data() + row * cols);
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (std::int64_t c = 0; c < cols; ++c) acc += static_cast<float>(q[c]) * x[c];
      return acc * m.row_scale[static_cast<std::size_t>(row)];
    }
    case QuantFormat::fp8_row: {
      const std::uint8_t* q = m.q.data() + row * cols;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (std::int64_t c = 0; c < cols; ++c) acc += kE4m3[q[c]] * x[c];
      return acc * m.row_scale[static_cast<std::size_t>(row)];
    }
    case QuantFormat::int4_group: {
      assert(int4 != nullptr);
      const std::uint8_t* q = m.q.data() + row * ((cols + 1) / 2);
      const std::int64_t groups = m.groups();
      float acc = 0.0f;
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::size_t k = static_cast<std::size_t>(row * groups + g);
        const std::int64_t b0 = g * (kInt4GroupSize / 2), b1 = std::min((cols + 1) / 2, b0 + kInt4GroupSize / 2);
        const float* xe = int4->even.data();
        const float* xo = int4->odd.data();
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (std::int64_t i = b0; i < b1; ++i)  // an odd last column: its high nibble is 0, odd[] 0
          d += static_cast<float>(q[i] & 0xF) * xe[i] + static_cast<float>(q[i] >> 4) * xo[i];
        acc += bf16_to_float(m.group_scale[k]) * d + bf16_to_float(m.group_min[k]) * int4->group_sum[static_cast<std::size_t>(g)];
      }
      return acc;
    }
  }
  return 0.0f;
}

const char* name(QuantDotIsa isa) {
  switch (isa) {
    case QuantDotIsa::portable: return "portable";
    case QuantDotIsa::avx2: return "AVX2";
    case QuantDotIsa::avx512: return "AVX-512";
  }
  return "?";
}

namespace {

QuantDotIsa best_quant_dot_isa() {
  for (const QuantDotIsa isa : {QuantDotIsa::avx512, QuantDotIsa::avx2})
    if (quant_dot::cpu_has(isa)) return isa;
  return QuantDotIsa::portable;
}

std::atomic<int> g_quant_dot_isa{-1};  // -1: not picked yet

}  // namespace

QuantDotIsa quant_dot_isa() {
  int v = g_quant_dot_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(best_quant_dot_isa());
    g_quant_dot_isa.store(v, std::memory_order_relaxed);  // every thread picks the same
  }
  return static_cast<QuantDotIsa>(v);
}

bool quant_dot_isa_supported(QuantDotIsa isa) { return quant_dot::cpu_has(isa); }

bool set_quant_dot_isa(QuantDotIsa isa) {
  if (!quant_dot::cpu_has(isa)) return false;
  g_quant_dot_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

std::uint8_t float_to_e4m3(float v) { return e4m3_encode(v); }

float e4m3_to_float(std::uint8_t bits) { return kE4m3[bits]; }

}  // namespace cosmos
