// quant_row_dot's int8, fp8 and int4 products on x86-64 with AVX-512 (F + BW) and AVX2 (+ FMA, F16C)
// intrinsics (quant_dot_x86.h). Each kernel returns the row's sum without its row scale: int8
// sum(q x), fp8 sum(e4m3(q) x), int4 sum over groups of s sum(q x) + m sum(x); row_dot() applies it.
// Each kernel carries its own target attribute, so the file builds with the baseline flags and the
// caller passes a level the CPU has (quant.cpp, quant_dot_isa()).
//
// Why not the portable loops that the compiler vectorizes (simd_clones.h): on a 2-core AVX-512
// machine they read fp8 rows at 4.7 GB/s (a table lookup per weight is a gather) and int4 rows at
// 4.6 GB/s (a horizontal sum per group of 128), against a memory that reads ~10.5 GB/s; int8's reach
// it only at times (8.9-11.1 GB/s, mostly 128-bit code); docs/PERFORMANCE.md has the measurements.
// int8: 16 weights widened to int32 and converted (exact) per vector.
//
// fp8: E4M3 byte b becomes the fp16 bit pattern ((b & 0x80) << 8) | ((b & 0x7F) << 7), whose value is
// exactly the E4M3 value times 2^-8 (the same sign, exponent field and top mantissa bits, exponent
// bias 15 instead of 7; subnormals map to subnormals), and the hardware converts fp16 to fp32
// exactly (vcvtph2ps); the sum is scaled by 2^8 at the end. (The NaN codes, which the quantizer
// never writes, would read as 480.)
// int4: a group's 64 bytes are split into low nibbles (the even columns) and high nibbles (the odd
// ones), widened to int32, converted (exact) and multiplied by x's even / odd streams
// (prepare_int4_dot); the group's sum times its scale goes into a vector accumulator, and
// min * sum(x over the group) into a scalar one. Whole groups only: rows whose length is not a
// multiple of 128 (the tiny test model's) take the portable loop.
#include "quant_dot_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

// GCC 12's AVX-512 headers fill the unused operand of masked conversions and extractions with an
// undefined value that -Wuninitialized flags in the header itself (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <bit>
#include <optional>

namespace cosmos::quant_dot {

namespace {

float bf16f(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

constexpr std::int64_t kGroupBytes = kInt4GroupSize / 2;  // 64

// The kernels ask for the row bytes kPrefetchAhead bytes ahead of those they multiply (the rows of
// a thread's share lie one after another, so that is a row or two ahead), once per 64 bytes. On the
// 2-core AVX-512 VM the hardware prefetcher alone kept too few reads in flight: bench_cpu_matmul,
// AVX-512, int8 37 -> 42 GB/s, fp8 30 -> 37, int4 24 -> 30 (with its loads below); 1-8 KB measured
// alike, 4 KB kept. The AVX2 kernels, timed there with --isa avx2 (four pairs, session 51): int4
// 16.0 -> 18.0 GB/s, int8 22.1 -> 26.0, fp8 18.8 -> 21.8 (means). A prefetch never faults, so it may
// point past the end of the weights.
constexpr std::int64_t kPrefetchAhead = 4096;

inline void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

// ---- AVX-512 --------------------------------------------------------------------------------------

#define COSMOS_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))

COSMOS_AVX512 float int8_dot_avx512(const std::int8_t* q, const float* x, std::int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  std::int64_t c = 0;
  for (; c + 32 <= n; c += 32) {  // 32 weights: two [16] int32 -> fp32 (exact)
    prefetch(q + c + kPrefetchAhead);
    const __m512i w0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c)));
    const __m512i w1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c + 16)));
    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(w0), _mm512_loadu_ps(x + c), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(w1), _mm512_loadu_ps(x + c + 16), acc1);
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += static_cast<float>(q[c]) * x[c];
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
}

COSMOS_AVX512 float fp8_dot_avx512(const std::uint8_t* q, const float* x, std::int64_t n) {
  const __m512i sign = _mm512_set1_epi16(0x80), mag = _mm512_set1_epi16(0x7F);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  std::int64_t c = 0;
  for (; c + 32 <= n; c += 32) {  // 32 codes: [32] u16, two [16] fp32
    prefetch(q + c + kPrefetchAhead);
    const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c)));
    const __m512i h = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(b, sign), 8),
                                      _mm512_slli_epi16(_mm512_and_si512(b, mag), 7));
    acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), _mm512_loadu_ps(x + c), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), _mm512_loadu_ps(x + c + 16), acc1);
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += e4m3_to_float(q[c]) * x[c];
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * 256.0f + tail;
}

COSMOS_AVX512 float int4_dot_avx512(const std::uint8_t* q, std::int64_t cols, const std::uint16_t* scale,
                                    const std::uint16_t* minimum, const Int4DotInput& in) {
  const std::int64_t groups = cols / kInt4GroupSize;
  const float* xe = in.even.data();
  const float* xo = in.odd.data();
  const __m512i low = _mm512_set1_epi32(0x0F);
  __m512 acc = _mm512_setzero_ps();
  float rest = 0.0f;  // min * sum(x) of every group
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t b0 = g * kGroupBytes;
    prefetch(q + b0 + kPrefetchAhead);
    const float s = bf16f(scale[g]);
    rest += bf16f(minimum[g]) * in.group_sum[static_cast<std::size_t>(g)];
    __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
    // 16 bytes at a time widened to [16] int32 by the load itself: the low nibbles (even columns)
    // by a mask, the high ones (odd columns) by a shift. (Before: one 64-byte load, then a 16-byte
    // lane extracted per widening, 1.24x slower on bench_cpu_matmul.)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + b0 + 16 * k)));
      d0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, low)), _mm512_loadu_ps(xe + b0 + 16 * k), d0);
      d1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), _mm512_loadu_ps(xo + b0 + 16 * k), d1);
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(s), _mm512_add_ps(d0, d1), acc);
  }
  return _mm512_reduce_add_ps(acc) + rest;
}

#undef COSMOS_AVX512

// ---- AVX2 -----------------------------------------------------------------------------------------

#define COSMOS_AVX2 __attribute__((target("avx2,fma,f16c")))

COSMOS_AVX2 float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

COSMOS_AVX2 float int8_dot_avx2(const std::int8_t* q, const float* x, std::int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t c = 0;
  for (; c + 16 <= n; c += 16) {  // 16 weights: two [8] int32 -> fp32 (exact)
    if ((c & 63) == 0) prefetch(q + c + kPrefetchAhead);
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_loadu_ps(x + c), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))), _mm256_loadu_ps(x + c + 8), acc1);
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += static_cast<float>(q[c]) * x[c];
  return hsum256(_mm256_add_ps(acc0, acc1)) + tail;
}

COSMOS_AVX2 float fp8_dot_avx2(const std::uint8_t* q, const float* x, std::int64_t n) {
  const __m256i sign = _mm256_set1_epi16(0x80), mag = _mm256_set1_epi16(0x7F);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t c = 0;
  for (; c + 16 <= n; c += 16) {  // 16 codes: [16] u16, two [8] fp32
    if ((c & 63) == 0) prefetch(q + c + kPrefetchAhead);
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c)));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, sign), 8),
                                      _mm256_slli_epi16(_mm256_and_si256(b, mag), 7));
    acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_loadu_ps(x + c), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), _mm256_loadu_ps(x + c + 8), acc1);
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += e4m3_to_float(q[c]) * x[c];
  return hsum256(_mm256_add_ps(acc0, acc1)) * 256.0f + tail;
}

COSMOS_AVX2 float int4_dot_avx2(const std::uint8_t* q, std::int64_t cols, const std::uint16_t* scale,
                                const std::uint16_t* minimum, const Int4DotInput& in) {
  const std::int64_t groups = cols / kInt4GroupSize;
  const float* xe = in.even.data();
  const float* xo = in.odd.data();
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  float rest = 0.0f;
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t b0 = g * kGroupBytes;
    prefetch(q + b0 + kPrefetchAhead);
    const float s = bf16f(scale[g]);
    rest += bf16f(minimum[g]) * in.group_sum[static_cast<std::size_t>(g)];
    __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
    for (int half = 0; half < 2; ++half) {  // [32] bytes each
      const std::int64_t b = b0 + 32 * half;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b));
      const __m256i lo = _mm256_and_si256(v, low);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      const __m128i parts[4] = {_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1),
                                _mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)};
      for (int p = 0; p < 2; ++p) {  // 16 low nibbles, then their 8-byte halves
        const __m128i l = parts[p], h = parts[2 + p];
        const std::int64_t i = b + 16 * p;
        d0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(l)), _mm256_loadu_ps(xe + i), d0);
        d0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(l, 8))), _mm256_loadu_ps(xe + i + 8), d0);
        d1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h)), _mm256_loadu_ps(xo + i), d1);
        d1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(h, 8))), _mm256_loadu_ps(xo + i + 8), d1);
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_add_ps(d0, d1), acc);
  }
  return hsum256(acc) + rest;
}

#undef COSMOS_AVX2

}  // namespace

std::optional<float> row_dot(QuantDotIsa isa, const QuantizedMatrix& m, std::int64_t row, const float* x,
                             const Int4DotInput* int4) {
  if (isa == QuantDotIsa::portable) return std::nullopt;
  const bool wide = isa == QuantDotIsa::avx512;
  const std::int64_t cols = m.cols;
  switch (m.format) {
    case QuantFormat::int8_row: {
      const auto* q = reinterpret_cast<const std::int8_t*>(m.q.data() + row * cols);
      return (wide ? int8_dot_avx512(q, x, cols) : int8_dot_avx2(q, x, cols)) * m.row_scale[static_cast<std::size_t>(row)];
    }
    case QuantFormat::fp8_row: {
      const std::uint8_t* q = m.q.data() + row * cols;
      return (wide ? fp8_dot_avx512(q, x, cols) : fp8_dot_avx2(q, x, cols)) * m.row_scale[static_cast<std::size_t>(row)];
    }
    case QuantFormat::int4_group: {
      if (cols % kInt4GroupSize != 0) return std::nullopt;
      const std::uint8_t* q = m.q.data() + row * (cols / 2);
      const std::size_t g0 = static_cast<std::size_t>(row * m.groups());
      return wide ? int4_dot_avx512(q, cols, &m.group_scale[g0], &m.group_min[g0], *int4)
                  : int4_dot_avx2(q, cols, &m.group_scale[g0], &m.group_min[g0], *int4);
    }
  }
  return std::nullopt;
}

bool cpu_has(QuantDotIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case QuantDotIsa::portable: return true;
    case QuantDotIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case QuantDotIsa::avx512:
      return cpu_has(QuantDotIsa::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

}  // namespace cosmos::quant_dot

#else  // not x86-64 GCC / Clang: the portable loops only

namespace cosmos::quant_dot {
bool cpu_has(QuantDotIsa isa) { return isa == QuantDotIsa::portable; }
std::optional<float> row_dot(QuantDotIsa, const QuantizedMatrix&, std::int64_t, const float*, const Int4DotInput*) {
  return std::nullopt;
}
}  // namespace cosmos::quant_dot

#endif
