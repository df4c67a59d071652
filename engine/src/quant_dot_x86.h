// quant_row_dot's int8, fp8 and int4 products written with x86-64 intrinsics (quant_dot_x86.cpp),
// for quant.cpp's dispatch. Each returns the row's sum without its row scale: int8 sum(q x), fp8
// sum(e4m3(q) x); int4
// sum over groups of s sum(q x) + m sum(x), reading x through `in` (prepare_int4_dot). `scale` and
// `minimum` point at the row's [groups] bf16 group scales and minimums; the int4 functions need
// cols to be a multiple of 128 (whole groups).
#pragma once

#include <cstdint>

#include "cosmos/quant.h"

namespace cosmos::quant_dot {

// Whether this CPU (and its operating system) runs `isa`; portable always.
bool cpu_has(QuantDotIsa isa);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define COSMOS_QUANT_DOT_X86 1
float int8_dot_avx512(const std::int8_t* q, const float* x, std::int64_t n);
float fp8_dot_avx512(const std::uint8_t* q, const float* x, std::int64_t n);
float int4_dot_avx512(const std::uint8_t* q, std::int64_t cols, const std::uint16_t* scale,
                      const std::uint16_t* minimum, const Int4DotInput& in);
float int8_dot_avx2(const std::int8_t* q, const float* x, std::int64_t n);
float fp8_dot_avx2(const std::uint8_t* q, const float* x, std::int64_t n);
float int4_dot_avx2(const std::uint8_t* q, std::int64_t cols, const std::uint16_t* scale,
                    const std::uint16_t* minimum, const Int4DotInput& in);
#endif

}  // namespace cosmos::quant_dot
